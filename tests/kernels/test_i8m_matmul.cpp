// Q4_1, Q5_1, Q5_K, Q2_K, Q3_K and IQ4_XS on the 8-bit path: the CPU backend re-encodes them at
// load to the I8M form of GROUPS16 (kernels/matmul.h, kernels/simd/matmul_simd.h). The re-encoding
// is lossless (its rows dequantize to the file's bits), and the kernels equal the I8M formula,
// written out below from the file's block bytes (ggml's layouts, not through our decoders),
// bitwise on every SIMD target, for decode and prefill, odd row counts and partial panels.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/simd/matmul_simd.h"

namespace geist {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::Q5_K,
                               GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_XS};
using test::kIq4;

float half(const uint8_t* p) { return fp16_to_fp32(static_cast<uint16_t>(p[0] | p[1] << 8)); }

// Block b (32 elements) of a file row, as the formula's terms: codes w, factor S, min factor M,
// the two halves' min weights. From ggml's block layouts (ggml-common.h).
struct Terms {
  float s = 0, m = 0;
  int m0 = 0, m1 = 0;
  int w[32] = {};
};

Terms terms(GgmlType t, const uint8_t* row, int64_t b) {
  Terms r;
  if (t == GgmlType::Q4_1 || t == GgmlType::Q5_1) {  // d, m, [qh], qs; q * d + m
    const bool five = t == GgmlType::Q5_1;
    const uint8_t* blk = row + b * (five ? 24 : 20);
    r.s = half(blk);
    r.m = -half(blk + 2);
    r.m0 = r.m1 = 1;
    uint32_t qh = 0;
    if (five) std::memcpy(&qh, blk + 4, 4);
    const uint8_t* qs = blk + (five ? 8 : 4);
    for (int j = 0; j < 32; ++j) {
      const int nib = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
      r.w[j] = nib + 16 * static_cast<int>((qh >> j) & 1);
    }
    return r;
  }
  const int k = static_cast<int>(b % 8);  // the block in its 256-element super-block
  if (t == GgmlType::Q5_K) {              // d, dmin, scales[12], qh[32], qs[128]
    const uint8_t* sb = row + b / 8 * 176;
    const uint8_t* sc = sb + 4;
    const int scale = k < 4 ? sc[k] & 63 : (sc[k + 4] & 15) | ((sc[k - 4] >> 6) << 4);
    const int min = k < 4 ? sc[k + 4] & 63 : (sc[k + 4] >> 4) | ((sc[k] >> 6) << 4);
    r.s = half(sb) * static_cast<float>(scale);
    r.m = half(sb + 2) * static_cast<float>(min);
    r.m0 = r.m1 = 1;
    for (int l = 0; l < 32; ++l) {
      r.w[l] = ((sb[48 + 32 * (k / 2) + l] >> (4 * (k % 2))) & 15) + 16 * ((sb[16 + l] >> k) & 1);
    }
    return r;
  }
  if (t == GgmlType::Q2_K) {  // scales[16] (low nibble scale, high min), qs[64], d, dmin
    const uint8_t* sb = row + b / 8 * 84;
    r.s = half(sb + 80);
    r.m = half(sb + 82);
    r.m0 = sb[2 * k] >> 4;
    r.m1 = sb[2 * k + 1] >> 4;
    for (int l = 0; l < 32; ++l) {
      const int q = (sb[16 + 32 * (k / 4) + l] >> (2 * (k % 4))) & 3;
      r.w[l] = (sb[2 * k + l / 16] & 15) * q;
    }
    return r;
  }
  if (t == GgmlType::Q3_K) {  // hmask[32], qs[64], scales[12] (6-bit, +32), d; no min
    const uint8_t* sb = row + b / 8 * 110;
    const uint8_t* sc = sb + 96;
    r.s = half(sb + 108);
    for (int l = 0; l < 32; ++l) {
      const int j = 2 * k + l / 16;  // the 16-element sub-block
      const int lo = j < 8 ? sc[j] & 15 : sc[j - 8] >> 4;
      const int scale = lo | ((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4;
      const int low = (sb[32 + 32 * (k / 4) + l] >> (2 * (k % 4))) & 3;
      const int code = ((sb[l] >> k) & 1) ? low : low - 4;
      r.w[l] = (scale - 32) * code;
    }
    return r;
  }
  // IQ4_XS: d, scales_h, scales_l[4], qs[128]
  const uint8_t* sb = row + b / 8 * 136;
  const int ls = ((sb[4 + k / 2] >> (4 * (k % 2))) & 15) | (((sb[2] | sb[3] << 8) >> (2 * k)) & 3)
                                                               << 4;
  r.s = half(sb) * static_cast<float>(ls - 32);
  for (int j = 0; j < 32; ++j) {
    const uint8_t byte = sb[8 + 16 * k + j % 16];
    r.w[j] = kIq4[j < 16 ? byte & 15 : byte >> 4];
  }
  return r;
}

// The I8M formula of matmul_simd.h for one row and one token (row-layout activations: q1 codes,
// steps dx per block).
float formula(GgmlType t, const uint8_t* row, const int8_t* q1, const float* dx, int64_t n_in) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const Terms tm = terms(t, row, b);
    int32_t isum = 0, hs[2] = {0, 0};
    for (int i = 0; i < 32; ++i) {
      isum += tm.w[i] * q1[b * 32 + i];
      hs[i / 16] += q1[b * 32 + i];
    }
    acc = std::fma(static_cast<float>(isum), tm.s * dx[b], acc);
    if (t != GgmlType::IQ4_XS && t != GgmlType::Q3_K) {
      const int32_t ms = tm.m0 * hs[0] + tm.m1 * hs[1];
      acc = std::fma(tm.m, -(static_cast<float>(ms) * dx[b]), acc);
    }
  }
  return acc;
}

TEST(I8mMatmul, ReEncodingIsLosslessAndKeepsTheType) {
  for (GgmlType type : kTypes) {
    SCOPED_TRACE(ggml_type_name(type));
    std::mt19937 rng(3);
    const int64_t n_in = 256 * 3, n_out = 37;  // a partial last group
    std::vector<float> deq;
    const std::vector<uint8_t> bytes = test::random_rows(type, n_in, n_out, &rng, &deq, true);
    const WeightMatrix w{type, bytes.data(), n_in, n_out, ggml_row_size(type, n_in)};
    std::vector<uint8_t> g(weight_groups16_bytes(w));
    // The codes stay packed, in the file's bytes: 48 rows (three groups of 16) of its row size.
    const size_t expect = 48 * ggml_row_size(type, n_in);
    EXPECT_EQ(g.size(), expect);
    WeightMatrix wg;
    weight_to_groups16(w, g.data(), &wg);
    EXPECT_EQ(wg.type, type);
    EXPECT_EQ(wg.layout, WeightLayout::GROUPS16);
    EXPECT_EQ(wg.row_bytes, simd::i8m_row_bytes(type, n_in));
    std::vector<float> row(n_in);
    for (int64_t o = 0; o < n_out; ++o) {
      get_row(wg, o, row.data());
      ASSERT_EQ(std::memcmp(row.data(), deq.data() + o * n_in, n_in * sizeof(float)), 0) << o;
      // The formula's terms are the file's values, exactly (double arithmetic).
      for (int64_t b = 0; b < n_in / 32; ++b) {
        const Terms tm = terms(type, bytes.data() + o * w.row_bytes, b);
        for (int i = 0; i < 32; ++i) {
          const double v = double{tm.s} * tm.w[i] - double{tm.m} * (i < 16 ? tm.m0 : tm.m1);
          ASSERT_EQ(v, double{deq[static_cast<size_t>(o * n_in + b * 32 + i)]}) << o << " " << b;
        }
      }
    }
  }
}

TEST(I8mMatmul, KernelsEqualTheFormulaBitwiseOnEveryTarget) {
  std::mt19937 rng(41);
  test::for_each_target([&] {
    for (GgmlType type : kTypes) {
      for (int rep = 0; rep < 3; ++rep) {
        SCOPED_TRACE(::testing::Message() << ggml_type_name(type) << " rep " << rep);
        const int64_t block = ggml_type_traits(type).block_size;
        // rep 0: more than one piece of the prefill kernels' unpacked blocks (64 blocks).
        const int64_t n_in =
            rep == 0 ? 256 * 9 : block * (1 + static_cast<int64_t>(rng() % (block == 32 ? 20 : 4)));
        const int count = 1 + static_cast<int>(rng() % 37);
        const int64_t n_tok = 1 + static_cast<int64_t>(rng() % 40);
        const int64_t nb = n_in / 32, ys = count + 3;
        std::vector<float> deq;
        std::vector<uint8_t> bytes = test::random_rows(type, n_in, count, &rng, &deq, true);
        const size_t rb = ggml_row_size(type, n_in);
        if (type == GgmlType::Q3_K && rep == 2) {
          // Any bytes are a Q3_K block (d kept finite): every scale and code, including the
          // product 128 (scale 0, code -4) that no 8-bit signed operand holds.
          for (uint8_t& v : bytes) v = static_cast<uint8_t>(rng());
          for (size_t at = 108; at < bytes.size(); at += 110) {
            bytes[at] = static_cast<uint8_t>(rng());
            bytes[at + 1] = static_cast<uint8_t>(0x20 + rng() % 0x1C);  // |d| in [2^-7, 2^0)
          }
          bytes[96] = bytes[104] = 0;  // sub-block 0: scale 0 - 32
          bytes[0] = bytes[32] = 0;    // its element 0: high bit clear, low bits 0: code -4
        }
        const WeightMatrix w{type, bytes.data(), n_in, count, rb};
        std::vector<uint8_t> grouped(weight_groups16_bytes(w));
        WeightMatrix wg;
        weight_to_groups16(w, grouped.data(), &wg);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> x(static_cast<size_t>(n_tok * n_in));
        for (float& f : x) f = 3.0f * nd(rng);
        std::vector<int8_t> q(2 * x.size());
        std::vector<float> dx(static_cast<size_t>(n_tok * nb));
        std::vector<int32_t> sx(dx.size());
        const int64_t n_panels = (n_tok + 15) / 16;
        std::vector<int8_t> pq(static_cast<size_t>(n_panels * nb * 1024));
        std::vector<float> pdx(static_cast<size_t>(n_panels * nb * 16));
        std::vector<int32_t> psx(pdx.size());
        for (int64_t t = 0; t < n_panels * 16; ++t) {
          const float* xt = t < n_tok ? x.data() + t * n_in : nullptr;
          if (xt) {
            simd::quantize_row_q8(xt, n_in, 1, q.data() + t * 2 * n_in, dx.data() + t * nb,
                                  sx.data() + t * nb);
            simd::q8_half_sums_row(q.data() + t * 2 * n_in, n_in);
          }
          const int64_t p = t / 16;
          simd::quantize_row_q8_panel(xt, n_in, 1, t % 16, pq.data() + p * nb * 1024,
                                      pdx.data() + p * nb * 16, psx.data() + p * nb * 16);
          simd::q8_half_sums_panel(pq.data() + p * nb * 1024, nb, t % 16);
        }
        std::vector<float> y_rows(static_cast<size_t>(n_tok * ys), -3.0f), y_pan(y_rows);
        simd::dot_q8_rows(type, true, grouped.data(), wg.row_bytes, count, n_in, q.data(),
                          dx.data(), sx.data(), n_tok, y_rows.data(), ys);
        simd::dot_q8_panels(type, true, grouped.data(), wg.row_bytes, count, n_in, pq.data(),
                            pdx.data(), psx.data(), n_tok, y_pan.data(), ys);
        test::expect_rows_and_panels_equal(
            y_rows, y_pan, n_tok, count, ys, -3.0f, [&](int64_t t, int64_t r) {
              return formula(type, bytes.data() + r * rb, q.data() + t * 2 * n_in,
                             dx.data() + t * nb, n_in);
            });
      }
    }
  });
}

// matmul on the GROUPS16 views: the same bits for any batch and thread count, and within the
// 8-bit activations' step of the double product of the dequantized weights.
TEST(I8mMatmul, MatmulIsBatchIndependentAndWithinTheActivationStep) {
  if (!simd::q8_panels_fast()) {
    GTEST_SKIP() << "no 8-bit multiply-add kernels on this CPU: the I8M form is not used";
  }
  for (GgmlType type : kTypes) {
    SCOPED_TRACE(ggml_type_name(type));
    std::mt19937 rng(23);
    const int64_t n_in = 256 * 2, n_out = 45, n_tok = 70;
    std::vector<float> deq;
    const std::vector<uint8_t> bytes = test::random_rows(type, n_in, n_out, &rng, &deq, true);
    const WeightMatrix w{type, bytes.data(), n_in, n_out, ggml_row_size(type, n_in)};
    ASSERT_TRUE(weight_groups16_useful(w));
    std::vector<uint8_t> g(weight_groups16_bytes(w));
    WeightMatrix wg;
    weight_to_groups16(w, g.data(), &wg);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n_tok * n_in));
    for (float& f : x) f = nd(rng);
    std::vector<float> all(n_tok * n_out), one(n_out), two(n_tok * n_out);
    {
      ThreadPool pool(2);
      std::vector<float> scratch(matmul_scratch_floats(n_in, 2));
      matmul(wg, x.data(), n_in, n_tok, all.data(), n_out, scratch.data(), pool);
      for (int64_t t = 0; t < n_tok; ++t) {
        matmul(wg, x.data() + t * n_in, n_in, 1, one.data(), n_out, scratch.data(), pool);
        ASSERT_EQ(std::memcmp(one.data(), all.data() + t * n_out, n_out * sizeof(float)), 0) << t;
      }
    }
    {
      ThreadPool pool(1);
      std::vector<float> scratch(matmul_scratch_floats(n_in, 1));
      matmul(wg, x.data(), n_in, n_tok, two.data(), n_out, scratch.data(), pool);
      ASSERT_EQ(std::memcmp(two.data(), all.data(), all.size() * sizeof(float)), 0);
    }
    test::expect_within_activation_step(all, x, deq, n_tok, n_in, n_out);
  }
}

}  // namespace
}  // namespace geist
