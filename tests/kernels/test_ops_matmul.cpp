// matmul against a naive double-precision product of the dequantized weights, on odd shapes,
// plus batch-size and thread-count invariance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace geist {
namespace {

struct Matrix {
  std::vector<uint8_t> bytes;  // [n_out][row_bytes]
  std::vector<float> deq;      // [n_out][n_in], what the bytes decode to
  WeightMatrix w;
};

Matrix random_matrix(GgmlType type, int64_t n_in, int64_t n_out, std::mt19937* rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Matrix m;
  const size_t row_bytes = ggml_row_size(type, n_in);
  m.bytes.resize(row_bytes * static_cast<size_t>(n_out));
  m.deq.resize(static_cast<size_t>(n_in * n_out));
  std::vector<float> src(static_cast<size_t>(n_in));
  for (int64_t o = 0; o < n_out; ++o) {
    for (float& f : src) f = nd(*rng);
    quantize_row(type, src.data(), m.bytes.data() + o * row_bytes, n_in);
    dequantize_row(type, m.bytes.data() + o * row_bytes, m.deq.data() + o * n_in, n_in);
  }
  m.w = WeightMatrix{type, m.bytes.data(), n_in, n_out, row_bytes};
  return m;
}

std::vector<float> run(const Matrix& m, const std::vector<float>& x, int64_t x_stride,
                       int64_t n_tok, int64_t y_stride, int n_threads) {
  ThreadPool pool(n_threads);
  std::vector<float> scratch(matmul_scratch_floats(m.w.n_in, n_threads));
  std::vector<float> y(static_cast<size_t>(n_tok * y_stride), -7.0f);
  matmul(m.w, x.data(), x_stride, n_tok, y.data(), y_stride, scratch.data(), pool);
  return y;
}

struct Case {
  GgmlType type;
  int64_t n_in, n_out, n_tok;
};

TEST(OpsMatmul, MatchesDoubleProductOnOddShapes) {
  std::mt19937 rng(1234);
  const Case cases[] = {
      {GgmlType::F32, 37, 13, 5},  {GgmlType::F32, 1, 1, 1},    {GgmlType::F32, 129, 67, 3},
      {GgmlType::F16, 45, 9, 4},   {GgmlType::BF16, 23, 7, 2},  {GgmlType::Q8_0, 96, 11, 7},
      {GgmlType::Q4_0, 160, 6, 3}, {GgmlType::Q4_K, 256, 5, 3}, {GgmlType::Q6_K, 512, 7, 2},
      {GgmlType::Q5_1, 64, 3, 9},  {GgmlType::Q4_1, 32, 17, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ggml_type_name(c.type));
    ASSERT_TRUE(quant_type_writable(c.type));
    const Matrix m = random_matrix(c.type, c.n_in, c.n_out, &rng);
    const int64_t x_stride = c.n_in + 3;  // padded rows: the kernel must honour strides
    const int64_t y_stride = c.n_out + 2;
    std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(c.n_tok * x_stride));
    for (float& f : x) f = ud(rng);
    const std::vector<float> y = run(m, x, x_stride, c.n_tok, y_stride, 2);
    for (int64_t t = 0; t < c.n_tok; ++t) {
      for (int64_t o = 0; o < c.n_out; ++o) {
        double ref = 0, mag = 0, qerr = 0;
        for (int64_t i = 0; i < c.n_in; ++i) {
          const double p = static_cast<double>(m.deq[o * c.n_in + i]) * x[t * x_stride + i];
          ref += p;
          mag += std::fabs(p);
          // Q8_0 weights take activations in steps of 1/(127 * 254) of the 32-block's max |x|
          // (<= 1 here), Q4_0, Q4_K and Q6_K weights in steps of 1/127 (one plane, as
          // llama.cpp): each off by about half a step.
          const bool one_plane =
              c.type == GgmlType::Q4_0 || c.type == GgmlType::Q4_K || c.type == GgmlType::Q6_K;
          const double steps = one_plane ? 127.0 : 127.0 * 254.0;
          qerr += std::fabs(m.deq[o * c.n_in + i]) * 0.51 / steps;
        }
        // f32 accumulation over n_in terms: error bounded by ~n_in * eps * sum|terms|.
        const bool act8 = c.type == GgmlType::Q8_0 || c.type == GgmlType::Q4_0 ||
                          c.type == GgmlType::Q4_K || c.type == GgmlType::Q6_K;
        const double tol = 1e-6 + 4.0 * c.n_in * 6e-8 * mag + (act8 ? qerr : 0.0);
        EXPECT_NEAR(y[t * y_stride + o], ref, tol) << "t=" << t << " o=" << o;
      }
      for (int64_t o = c.n_out; o < y_stride; ++o) EXPECT_EQ(y[t * y_stride + o], -7.0f);
    }
  }
}

TEST(OpsMatmul, RowsBitwiseIndependentOfBatchAndThreads) {
  std::mt19937 rng(99);
  for (GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
    const Matrix m = random_matrix(type, 64, 23, &rng);
    const int64_t n_tok = 9;
    std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n_tok * 64));
    for (float& f : x) f = ud(rng);
    const std::vector<float> all = run(m, x, 64, n_tok, 23, 1);
    for (int threads : {2, 3, 5}) {
      const std::vector<float> y = run(m, x, 64, n_tok, 23, threads);
      EXPECT_EQ(std::memcmp(all.data(), y.data(), all.size() * sizeof(float)), 0) << threads;
    }
    for (int64_t t = 0; t < n_tok; ++t) {
      const std::vector<float> xt(x.begin() + t * 64, x.begin() + (t + 1) * 64);
      const std::vector<float> y = run(m, xt, 64, 1, 23, 2);
      EXPECT_EQ(std::memcmp(all.data() + t * 23, y.data(), 23 * sizeof(float)), 0) << t;
    }
  }
}

// matmul_q8_layout: the decode kernel's rows and the prefill kernel's panels forced for every
// token count of a GROUPS16 matrix give the bits matmul() picks (the Q8 path's contract: one
// formula, whichever kernel runs a token), and those are within the activation step of the
// double product of the dequantized weights.
TEST(OpsMatmul, Q8LayoutsForcedGiveMatmulsBits) {
  std::mt19937 rng(77);
  // Every type with a GROUPS16 form: each has its own q8_rows_max.
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K,
                        GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL,
                        GgmlType::IQ4_XS, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q5_K}) {
    SCOPED_TRACE(ggml_type_name(type));
    const int64_t n_in = 512, n_out = 35, n_tok = 70;
    const Matrix m = random_matrix(type, n_in, n_out, &rng);
    if (!weight_groups16_useful(m.w)) GTEST_SKIP() << "no 8-bit kernels on this CPU (no GROUPS16)";
    std::vector<uint8_t> grouped(weight_groups16_bytes(m.w));
    WeightMatrix wg;
    weight_to_groups16(m.w, grouped.data(), &wg);
    std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n_tok * n_in));
    for (float& f : x) f = ud(rng);
    ThreadPool pool(2);
    std::vector<float> scratch(matmul_scratch_floats(n_in, 2));
    for (int64_t n = 1; n <= n_tok; ++n) {
      std::vector<float> want(static_cast<size_t>(n * n_out)), rows(want.size()), pan(want.size());
      matmul(wg, x.data(), n_in, n, want.data(), n_out, scratch.data(), pool);
      matmul_q8_layout(wg, x.data(), n_in, n, rows.data(), n_out, scratch.data(), pool,
                       Q8Layout::ROWS);
      matmul_q8_layout(wg, x.data(), n_in, n, pan.data(), n_out, scratch.data(), pool,
                       Q8Layout::PANELS);
      ASSERT_EQ(std::memcmp(want.data(), rows.data(), want.size() * sizeof(float)), 0) << n;
      ASSERT_EQ(std::memcmp(want.data(), pan.data(), want.size() * sizeof(float)), 0) << n;
    }
    const double steps = type == GgmlType::Q8_0 ? 127.0 * 254.0 : 127.0;
    std::vector<float> y(static_cast<size_t>(n_tok * n_out));
    matmul(wg, x.data(), n_in, n_tok, y.data(), n_out, scratch.data(), pool);
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int64_t o = 0; o < n_out; ++o) {
        double ref = 0, mag = 0, qerr = 0;
        for (int64_t i = 0; i < n_in; ++i) {
          const double wv = m.deq[static_cast<size_t>(o * n_in + i)];
          ref += wv * x[static_cast<size_t>(t * n_in + i)];
          mag += std::fabs(wv * x[static_cast<size_t>(t * n_in + i)]);
          qerr += std::fabs(wv) * 0.51 / steps;  // |x| <= 1: half a step per activation
        }
        EXPECT_NEAR(y[static_cast<size_t>(t * n_out + o)], ref,
                    1e-6 + 4.0 * n_in * 6e-8 * mag + qerr)
            << "t=" << t << " o=" << o;
      }
    }
  }
}

TEST(OpsMatmul, GetRowDequantizes) {
  std::mt19937 rng(5);
  for (GgmlType type : {GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4_K}) {
    const Matrix m = random_matrix(type, 256, 4, &rng);
    std::vector<float> row(256);
    get_row(m.w, 3, row.data());
    EXPECT_EQ(std::memcmp(row.data(), m.deq.data() + 3 * 256, 256 * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace geist
