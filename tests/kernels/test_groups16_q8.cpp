// Q5_0 and IQ4_NL weights in the GROUPS16 layout keep their codes packed (the Q8P form,
// kernels/matmul.h): the view keeps the type and the file's bytes, its rows dequantize to the
// file's bits, and the kernels equal, bit for bit on every SIMD target, the one-plane formula of
// matmul_simd.h (Q4_0's) written out below from the file's block bytes (ggml's layouts, not
// through our decoders), decode and prefill; matmul on the view is batch-independent and within
// the 8-bit activations' step of the double product. Q3_K keeps its bytes there and equals, bit
// for bit, matmul on Q6_K rows of its values.
#include <gtest/gtest.h>

#include <bit>
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

using test::kIq4;

// Block b of a Q5_0 (d, qh[4], qs[16]: ((nibble | high << 4) - 16) * d) or IQ4_NL (d, qs[16]:
// kvalues[nibble] * d) row: its signed codes w and its scale d. ggml-common.h's layouts.
float block_terms(GgmlType t, const uint8_t* row, int64_t b, int w[32]) {
  const bool q5 = t == GgmlType::Q5_0;
  const uint8_t* blk = row + b * (q5 ? 22 : 18);
  uint32_t qh = 0;
  if (q5) std::memcpy(&qh, blk + 2, 4);
  const uint8_t* qs = blk + (q5 ? 6 : 2);
  for (int j = 0; j < 32; ++j) {
    const int nib = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
    w[j] = q5 ? (nib | static_cast<int>((qh >> j) & 1) << 4) - 16 : kIq4[nib];
  }
  return fp16_to_fp32(static_cast<uint16_t>(blk[0] | blk[1] << 8));
}

// The one-plane formula for one row and one token (q1 codes, steps dx per block).
float one_plane_formula(GgmlType t, const uint8_t* row, const int8_t* q1, const float* dx,
                        int64_t n_in) {
  float acc = 0.0f;
  int w[32];
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const float d = block_terms(t, row, b, w);
    int32_t isum = 0;
    for (int i = 0; i < 32; ++i) isum += w[i] * q1[b * 32 + i];
    acc = std::fma(static_cast<float>(isum), d * dx[b], acc);
  }
  return acc;
}

TEST(Groups16Q8, Q5_0AndIq4NlEqualTheOnePlaneFormula) {
  for (GgmlType type : {GgmlType::Q5_0, GgmlType::IQ4_NL}) {
    SCOPED_TRACE(ggml_type_name(type));
    std::mt19937 rng(17);
    // Odd rows: a padded last group; 77 blocks: two pieces of the prefill kernel's unpacking (64
    // blocks each).
    const int64_t n_in = 32 * 77, n_out = 37, n_tok = 70, nb = n_in / 32;
    std::vector<float> deq;
    const std::vector<uint8_t> bytes = test::random_rows(type, n_in, n_out, &rng, &deq);
    const WeightMatrix w{type, bytes.data(), n_in, n_out, ggml_row_size(type, n_in)};
    if (!weight_groups16_useful(w)) {
      ASSERT_FALSE(simd::q8_panels_fast());
      GTEST_SKIP() << "no 8-bit kernels on this CPU (GROUPS16 is not used)";
    }
    ASSERT_EQ(simd::q8_planes(type), 1);
    // The formula's terms are the file's values, exactly.
    for (int64_t o = 0; o < n_out; ++o) {
      for (int64_t b = 0; b < nb; ++b) {
        int c[32];
        const float d = block_terms(type, bytes.data() + o * w.row_bytes, b, c);
        for (int i = 0; i < 32; ++i) {
          ASSERT_EQ(double{d} * c[i], double{deq[static_cast<size_t>(o * n_in + b * 32 + i)]});
        }
      }
    }
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
    // The kernels on every SIMD target (the portable loops where there is no VNNI), decode and
    // prefill (a full and a partial panel), against the formula.
    test::for_each_target([&] {
      const int64_t nt = 19, np = 2, ys = n_out + 3;
      std::vector<int8_t> q(2 * nt * n_in), pq(np * nb * 1024);
      std::vector<float> dx(nt * nb), pdx(np * nb * 16);
      std::vector<int32_t> sx(dx.size()), psx(pdx.size());
      for (int64_t t = 0; t < np * 16; ++t) {
        const float* xt = t < nt ? x.data() + t * n_in : nullptr;
        if (xt) {
          simd::quantize_row_q8(xt, n_in, 1, q.data() + t * 2 * n_in, dx.data() + t * nb,
                                sx.data() + t * nb);
        }
        simd::quantize_row_q8_panel(xt, n_in, 1, t % 16, pq.data() + t / 16 * nb * 1024,
                                    pdx.data() + t / 16 * nb * 16, psx.data() + t / 16 * nb * 16);
      }
      std::vector<float> y_rows(nt * ys, -3.0f), y_pan(y_rows);
      simd::dot_q8_rows(type, true, wg.data, wg.row_bytes, n_out, n_in, q.data(), dx.data(),
                        sx.data(), nt, y_rows.data(), ys);
      simd::dot_q8_panels(type, true, wg.data, wg.row_bytes, n_out, n_in, pq.data(), pdx.data(),
                          psx.data(), nt, y_pan.data(), ys);
      test::expect_rows_and_panels_equal(
          y_rows, y_pan, nt, n_out, ys, -3.0f, [&](int64_t t, int64_t r) {
            return one_plane_formula(type, bytes.data() + r * w.row_bytes, q.data() + t * 2 * n_in,
                                     dx.data() + t * nb, n_in);
          });
    });
    // matmul: any batch and thread count gives the same bits, within the activation step of the
    // double product of the file's values.
    std::vector<float> all(n_tok * n_out);
    {
      ThreadPool pool(2);
      std::vector<float> scratch(matmul_scratch_floats(n_in, 2));
      matmul(wg, x.data(), n_in, n_tok, all.data(), n_out, scratch.data(), pool);
      for (int64_t m : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{17}}) {
        std::vector<float> y(m * n_out);
        matmul(wg, x.data(), n_in, m, y.data(), n_out, scratch.data(), pool);
        ASSERT_EQ(std::memcmp(y.data(), all.data(), y.size() * sizeof(float)), 0) << m;
      }
    }
    {
      ThreadPool pool(1);
      std::vector<float> scratch(matmul_scratch_floats(n_in, 1)), y(all.size());
      matmul(wg, x.data(), n_in, n_tok, y.data(), n_out, scratch.data(), pool);
      ASSERT_EQ(std::memcmp(y.data(), all.data(), y.size() * sizeof(float)), 0);
    }
    test::expect_within_activation_step(all, x, deq, n_tok, n_in, n_out);
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
  test::expect_within_activation_step(all, x, deq, n_tok, n_in, n_out);
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
