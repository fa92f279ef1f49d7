// Q5_0 and IQ4_NL weights in the GROUPS16 layout keep their codes packed and are computed as
// Q8_0 of the same values (kernels/matmul.h): the view keeps the type and the file's bytes, its
// rows dequantize to the file's bits, and matmul on it equals, bit for bit, matmul on Q8_0 rows
// written directly from those values (in either layout). Q3_K keeps
// its bytes there and equals, bit for bit, matmul on Q6_K rows of its values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd/matmul_simd.h"

namespace geist {
namespace {

TEST(Groups16Q8, Q5_0AndIq4NlRunAsQ8_0OfTheSameValues) {
  for (GgmlType type : {GgmlType::Q5_0, GgmlType::IQ4_NL}) {
    SCOPED_TRACE(ggml_type_name(type));
    std::mt19937 rng(17);
    // Odd rows: a padded last group; 77 blocks: two pieces of the prefill kernel's unpacking (64
    // blocks each).
    const int64_t n_in = 32 * 77, n_out = 37, n_tok = 70;
    std::vector<float> deq;
    const std::vector<uint8_t> bytes = test::random_rows(type, n_in, n_out, &rng, &deq);
    const WeightMatrix w{type, bytes.data(), n_in, n_out, ggml_row_size(type, n_in)};
    if (!weight_groups16_useful(w)) {
      ASSERT_FALSE(simd::q8_panels_fast());
      GTEST_SKIP() << "no 8-bit kernels on this CPU (GROUPS16 is not used)";
    }
    // The same values as Q8_0 rows: each block's f16 scale and code = value / scale (exact:
    // value is an integer times the scale).
    const size_t rb8 = ggml_row_size(GgmlType::Q8_0, n_in);
    std::vector<uint8_t> q8(rb8 * n_out);
    for (int64_t o = 0; o < n_out; ++o) {
      for (int64_t b = 0; b < n_in / 32; ++b) {
        const uint8_t* src = bytes.data() + o * w.row_bytes + b * ggml_type_traits(type).type_size;
        uint8_t* dst = q8.data() + o * rb8 + b * 34;
        std::memcpy(dst, src, 2);
        const float d = fp16_to_fp32(quant_detail::load_u16(src));
        for (int i = 0; i < 32; ++i) {
          const float v = deq[static_cast<size_t>(o * n_in + b * 32 + i)];
          dst[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(d != 0.0f ? v / d : 0.0f));
        }
      }
    }
    const WeightMatrix w8{GgmlType::Q8_0, q8.data(), n_in, n_out, rb8};
    std::vector<uint8_t> g(weight_groups16_bytes(w));
    ASSERT_EQ(g.size(), 48 * w.row_bytes);  // the codes stay packed: the file's bytes per row
    WeightMatrix wg;
    weight_to_groups16(w, g.data(), &wg);
    EXPECT_EQ(wg.type, type);
    EXPECT_EQ(wg.row_bytes, w.row_bytes);
    std::vector<float> row(n_in);
    for (int64_t o = 0; o < n_out; ++o) {
      get_row(wg, o, row.data());
      ASSERT_EQ(std::memcmp(row.data(), deq.data() + o * n_in, n_in * sizeof(float)), 0) << o;
    }
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n_tok * n_in));
    for (float& f : x) f = nd(rng);
    ThreadPool pool(2);
    std::vector<float> scratch(matmul_scratch_floats(n_in, 2));
    std::vector<uint8_t> g8(weight_groups16_bytes(w8));
    WeightMatrix wg8;
    weight_to_groups16(w8, g8.data(), &wg8);
    // The kernels on every SIMD target (the portable loops where there is no VNNI), decode and
    // prefill, against Q8_0's GROUPS16 kernels on the same activations.
    test::for_each_target([&] {
      const int64_t nb = n_in / 32, nt = 19, np = 2;
      std::vector<int8_t> q(2 * nt * n_in), pq(np * nb * 1024);
      std::vector<float> dx(nt * nb), pdx(np * nb * 16);
      std::vector<int32_t> sx(dx.size()), psx(pdx.size());
      for (int64_t t = 0; t < np * 16; ++t) {
        const float* xt = t < nt ? x.data() + t * n_in : nullptr;
        if (xt) {
          simd::quantize_row_q8(xt, n_in, 2, q.data() + t * 2 * n_in, dx.data() + t * nb,
                                sx.data() + t * nb);
        }
        simd::quantize_row_q8_panel(xt, n_in, 2, t % 16, pq.data() + t / 16 * nb * 1024,
                                    pdx.data() + t / 16 * nb * 16, psx.data() + t / 16 * nb * 16);
      }
      for (bool panels : {false, true}) {
        std::vector<float> a(nt * n_out, -1.0f), b(a);
        for (const auto& [m, y] : {std::pair{&wg, &a}, std::pair{&wg8, &b}}) {
          if (panels) {
            simd::dot_q8_panels(m->type, true, m->data, m->row_bytes, n_out, n_in, pq.data(),
                                pdx.data(), psx.data(), nt, y->data(), n_out);
          } else {
            simd::dot_q8_rows(m->type, true, m->data, m->row_bytes, n_out, n_in, q.data(),
                              dx.data(), sx.data(), nt, y->data(), n_out);
          }
        }
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << panels;
      }
    });
    for (int64_t m : {int64_t{1}, int64_t{2}, int64_t{3}, n_tok}) {
      std::vector<float> yg(m * n_out), y8(m * n_out), yg8(m * n_out);
      matmul(wg, x.data(), n_in, m, yg.data(), n_out, scratch.data(), pool);
      matmul(w8, x.data(), n_in, m, y8.data(), n_out, scratch.data(), pool);
      matmul(wg8, x.data(), n_in, m, yg8.data(), n_out, scratch.data(), pool);
      ASSERT_EQ(std::memcmp(yg.data(), y8.data(), yg.size() * sizeof(float)), 0) << m;
      ASSERT_EQ(std::memcmp(yg.data(), yg8.data(), yg.size() * sizeof(float)), 0) << m;
    }
  }
}

// Q3_K keeps its own bytes in GROUPS16 (the I8M form, 1.0x the file) and gives, bit for bit,
// what it gave as Q6_K rows of the same values (its exact rows, repacked as Q6_K is): decode,
// a two-token chunk and prefill; and is within the Q8 path's bound of the double product.
TEST(Groups16Q8, Q3_KGivesTheBitsOfQ6_KRowsOfItsValues) {
  std::mt19937 rng(19);
  const int64_t n_in = 256 * 9, n_out = 21;  // more than one 64-block piece of prefill unpacking
  std::vector<float> deq;
  const std::vector<uint8_t> bytes =
      test::random_rows(GgmlType::Q3_K, n_in, n_out, &rng, &deq, true);
  const WeightMatrix w{GgmlType::Q3_K, bytes.data(), n_in, n_out,
                       ggml_row_size(GgmlType::Q3_K, n_in)};
  if (!weight_groups16_useful(w)) {
    ASSERT_FALSE(simd::q8_panels_fast());
    GTEST_SKIP() << "no 8-bit kernels on this CPU (GROUPS16 is not used)";
  }
  std::vector<uint8_t> g(weight_groups16_bytes(w));
  EXPECT_EQ(g.size(), 32 * w.row_bytes);  // two groups of 16 rows of the file's bytes
  WeightMatrix wg;
  weight_to_groups16(w, g.data(), &wg);
  EXPECT_EQ(wg.type, GgmlType::Q3_K);
  EXPECT_EQ(wg.row_bytes, ggml_row_size(GgmlType::Q3_K, n_in));
  std::vector<float> row(n_in);
  for (int64_t o = 0; o < n_out; ++o) {
    get_row(wg, o, row.data());
    ASSERT_EQ(std::memcmp(row.data(), deq.data() + o * n_in, n_in * sizeof(float)), 0) << o;
  }
  std::vector<uint8_t> q6(ggml_row_size(GgmlType::Q6_K, n_in) * n_out);
  WeightMatrix w6;
  weight_to_exact_rows(w, q6.data(), &w6);
  ASSERT_EQ(w6.type, GgmlType::Q6_K);
  std::vector<uint8_t> g6(weight_groups16_bytes(w6));
  WeightMatrix wg6;
  weight_to_groups16(w6, g6.data(), &wg6);
  const int64_t n_tok = 40;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tok * n_in));
  for (float& f : x) f = nd(rng);
  ThreadPool pool(2);
  std::vector<float> scratch(matmul_scratch_floats(n_in, 2));
  for (int64_t m : {int64_t{1}, int64_t{2}, n_tok}) {
    std::vector<float> y3(m * n_out), y6(m * n_out), r6(m * n_out);
    matmul(wg, x.data(), n_in, m, y3.data(), n_out, scratch.data(), pool);
    matmul(wg6, x.data(), n_in, m, y6.data(), n_out, scratch.data(), pool);
    matmul(w6, x.data(), n_in, m, r6.data(), n_out, scratch.data(), pool);
    ASSERT_EQ(std::memcmp(y3.data(), y6.data(), y3.size() * sizeof(float)), 0) << m;
    ASSERT_EQ(std::memcmp(y3.data(), r6.data(), y3.size() * sizeof(float)), 0) << m;
  }
  std::vector<float> all(n_tok * n_out);
  matmul(wg, x.data(), n_in, n_tok, all.data(), n_out, scratch.data(), pool);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t o = 0; o < n_out; ++o) {
      double ref = 0, qerr = 0;
      for (int64_t b = 0; b < n_in / 32; ++b) {
        double amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[t * n_in + b * 32 + i]));
        for (int i = 0; i < 32; ++i) {
          const double wv = deq[o * n_in + b * 32 + i];
          ref += wv * x[t * n_in + b * 32 + i];
          qerr += std::fabs(wv) * 0.5 * amax / 127.0;
        }
      }
      ASSERT_NEAR(all[t * n_out + o], ref, 1e-5 + 1.01 * qerr) << t << " " << o;
    }
  }
}

// The same re-encodings in the GGUF row layout, for backends without kernels of their own for
// these types (the CUDA backend's upload): rows of Q8_0 / Q6_K that dequantize to the file's bits.
TEST(Groups16Q8, ExactRowsHoldTheFilesValues) {
  const std::pair<GgmlType, GgmlType> cases[] = {{GgmlType::Q5_0, GgmlType::Q8_0},
                                                 {GgmlType::IQ4_NL, GgmlType::Q8_0},
                                                 {GgmlType::Q3_K, GgmlType::Q6_K}};
  for (const auto& [type, to] : cases) {
    SCOPED_TRACE(ggml_type_name(type));
    ASSERT_EQ(weight_exact_rows_type(type), to);
    std::mt19937 rng(29);
    const int64_t n_in = 256 * 2, n_out = 9;
    std::vector<float> deq;
    const std::vector<uint8_t> bytes = test::random_rows(type, n_in, n_out, &rng, &deq, true);
    const WeightMatrix w{type, bytes.data(), n_in, n_out, ggml_row_size(type, n_in)};
    std::vector<uint8_t> dst(ggml_row_size(to, n_in) * n_out);
    WeightMatrix v;
    weight_to_exact_rows(w, dst.data(), &v);
    EXPECT_EQ(v.type, to);
    EXPECT_EQ(v.layout, WeightLayout::ROWS);
    EXPECT_EQ(v.row_bytes, ggml_row_size(to, n_in));
    std::vector<float> row(n_in);
    for (int64_t o = 0; o < n_out; ++o) {
      dequantize_row(to, v.data + o * v.row_bytes, row.data(), n_in);
      ASSERT_EQ(std::memcmp(row.data(), deq.data() + o * n_in, n_in * sizeof(float)), 0) << o;
    }
  }
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::Q5_K, GgmlType::IQ4_XS}) {
    EXPECT_EQ(weight_exact_rows_type(t), t) << ggml_type_name(t);
  }
}

}  // namespace
}  // namespace geist
