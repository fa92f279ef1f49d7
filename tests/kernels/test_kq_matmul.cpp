// The Q8 path's K-quant kernels (Q4_K, Q6_K read in the file's super-blocks): the decode and
// prefill kernels against the formula of matmul_simd.h, bitwise, on every SIMD target; the
// formula against dequantize_row and a double product; matmul's batch / thread independence.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/simd/matmul_simd.h"

namespace geist {
namespace {

using test::for_each_target;

// K-quant rows with shifted sub-blocks, so Q4_K's mins are not all zero.
std::vector<uint8_t> shifted_rows(GgmlType type, int64_t n_in, int64_t n_out, std::mt19937* rng,
                                  std::vector<float>* deq) {
  return test::random_rows(type, n_in, n_out, rng, deq, /*shifted=*/true);
}

uint16_t u16_at(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

// Element e (< 256) of a super-block as its unsigned code (Q4_K 0..15, Q6_K 0..63), read from
// the block layouts ggml documents (quant_blocks.h), independently of the kernels' helpers.
int code_of(GgmlType type, const uint8_t* blk, int e) {
  if (type == GgmlType::Q4_K) {
    const uint8_t byte = blk[16 + 32 * (e / 64) + e % 32];
    return e % 64 < 32 ? byte & 15 : byte >> 4;
  }
  const int h = e / 128, r = e % 128;
  const uint8_t ql = blk[64 * h + r % 64];
  const int lo = r < 64 ? ql & 15 : ql >> 4;
  const int hi = (blk[128 + 32 * h + r % 32] >> (2 * (r / 32))) & 3;
  return lo | (hi << 4);
}

// Q4_K's 6-bit scale and min of sub-block j.
void scale_min(const uint8_t* blk, int j, int* sc, int* m) {
  const uint8_t* s = blk + 4;
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The formula of matmul_simd.h for one (row, token): q [n_in] the token's q1 codes, dx and sx
// per 32-block.
float kq_formula(GgmlType type, const uint8_t* row, const int8_t* q, const float* dx,
                 const int32_t* sx, int64_t n_in) {
  const bool q6 = type == GgmlType::Q6_K;
  const size_t bytes = q6 ? 210 : 144;
  float acc = 0.0f;
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const uint8_t* blk = row + static_cast<size_t>(b / 8) * bytes;
    const int k = static_cast<int>(b % 8);
    if (q6) {
      const float d = fp16_to_fp32(u16_at(blk + 208));
      int32_t isum = 0;
      for (int half = 0; half < 2; ++half) {
        int32_t dot = 0;
        for (int i = 16 * half; i < 16 * half + 16; ++i) {
          dot += (code_of(type, blk, 32 * k + i) - 32) * q[b * 32 + i];
        }
        isum += static_cast<int8_t>(blk[192 + 2 * k + half]) * dot;
      }
      acc = std::fma(static_cast<float>(isum), d * dx[b], acc);
    } else {
      const float d = fp16_to_fp32(u16_at(blk)), dmin = fp16_to_fp32(u16_at(blk + 2));
      int sc, m;
      scale_min(blk, k, &sc, &m);
      int32_t isum = 0;
      for (int i = 0; i < 32; ++i) isum += code_of(type, blk, 32 * k + i) * q[b * 32 + i];
      acc = std::fma(static_cast<float>(isum), d * static_cast<float>(sc) * dx[b], acc);
      acc = std::fma(dmin * static_cast<float>(m), -(static_cast<float>(sx[b]) * dx[b]), acc);
    }
  }
  return acc;
}

// Activations in both layouts for n_tok tokens, as matmul writes them for type.
struct Acts {
  std::vector<int8_t> q, pq;
  std::vector<float> dx, pdx;
  std::vector<int32_t> sx, psx;
};

Acts quantize_acts(GgmlType type, const std::vector<float>& x, int64_t n_in, int64_t n_tok) {
  const int64_t nb = n_in / 32, n_panels = (n_tok + 15) / 16;
  Acts a;
  a.q.assign(static_cast<size_t>(n_tok * 2 * n_in), 0);
  a.dx.assign(static_cast<size_t>(n_tok * nb), 0.0f);
  a.sx.assign(a.dx.size(), 0);
  a.pq.assign(static_cast<size_t>(n_panels * nb * 1024), 0);
  a.pdx.assign(static_cast<size_t>(n_panels * nb * 16), 0.0f);
  a.psx.assign(a.pdx.size(), 0);
  const int planes = simd::q8_planes(type);
  for (int64_t t = 0; t < n_panels * 16; ++t) {
    const float* xt = t < n_tok ? x.data() + t * n_in : nullptr;
    if (xt) {
      simd::quantize_row_q8(xt, n_in, planes, a.q.data() + t * 2 * n_in, a.dx.data() + t * nb,
                            a.sx.data() + t * nb);
      if (type == GgmlType::Q6_K) simd::q8_half_sums_row(a.q.data() + t * 2 * n_in, n_in);
    }
    int8_t* panel = a.pq.data() + t / 16 * nb * 1024;
    simd::quantize_row_q8_panel(xt, n_in, planes, t % 16, panel, a.pdx.data() + t / 16 * nb * 16,
                                a.psx.data() + t / 16 * nb * 16);
    if (type == GgmlType::Q6_K) simd::q8_half_sums_panel(panel, nb, t % 16);
  }
  return a;
}

TEST(KqMatmul, UseTheQ8PathWithOnePlane) {
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K}) {
    EXPECT_TRUE(simd::q8_path_supported(type));
    EXPECT_EQ(simd::q8_planes(type), 1);
  }
}

// Decode (row layout) and prefill (panels) kernels against the formula, bitwise, on every
// target, weights in the file's rows and in the GROUPS16 layout: row counts around the 16-row and
// 4-row tiles, token counts around the decode kernel's 1-4-token tiles and the 16-token panels,
// rows of 1 to 5 super-blocks and one of 35 (more than the 32 super-blocks whose scales the panel
// kernel decodes at a time, so the accumulators carry over between pieces); activations with a zero
// block and wide magnitudes.
TEST(KqMatmul, KernelsEqualTheFormulaBitwise) {
  std::mt19937 rng(91);
  struct Case {
    int64_t n_in;
    int count;
    int64_t n_tok;
  };
  const Case cases[] = {{256, 1, 1},   {256, 16, 2}, {512, 17, 3}, {1024, 37, 17},
                        {1280, 5, 33}, {768, 33, 1}, {256, 3, 16}, {1024, 20, 2},
                        {8960, 5, 35}, {512, 19, 6}, {256, 16, 64}};
  for_each_target([&] {
    for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K}) {
      for (const Case& c : cases) {
        SCOPED_TRACE(::testing::Message() << ggml_type_name(type) << " n_in " << c.n_in << " rows "
                                          << c.count << " tokens " << c.n_tok);
        std::vector<float> deq;
        const std::vector<uint8_t> bytes = shifted_rows(type, c.n_in, c.count, &rng, &deq);
        const size_t rb = ggml_row_size(type, c.n_in);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> x(static_cast<size_t>(c.n_tok * c.n_in));
        for (size_t i = 0; i < x.size(); ++i) {
          x[i] = std::ldexp(nd(rng), static_cast<int>(i / 32 % 7) * 3 - 9);
        }
        for (int64_t i = 32; i < 64 && i < c.n_in; ++i) x[static_cast<size_t>(i)] = 0.0f;
        const Acts a = quantize_acts(type, x, c.n_in, c.n_tok);
        const int64_t nb = c.n_in / 32, ys = c.count + 3;
        std::vector<float> y_rows(static_cast<size_t>(c.n_tok * ys), -3.0f), y_pan(y_rows);
        simd::dot_q8_rows(type, false, bytes.data(), rb, c.count, c.n_in, a.q.data(), a.dx.data(),
                          a.sx.data(), c.n_tok, y_rows.data(), ys);
        simd::dot_q8_panels(type, false, bytes.data(), rb, c.count, c.n_in, a.pq.data(),
                            a.pdx.data(), a.psx.data(), c.n_tok, y_pan.data(), ys);
        // And in the GROUPS16 layout (a partial last group when count % 16 != 0).
        const WeightMatrix w{type, bytes.data(), c.n_in, c.count, rb};
        std::vector<uint8_t> grouped(weight_groups16_bytes(w));
        WeightMatrix wg;
        weight_to_groups16(w, grouped.data(), &wg);
        std::vector<float> y_grows(y_rows), y_gpan(y_rows);
        simd::dot_q8_rows(type, true, grouped.data(), rb, c.count, c.n_in, a.q.data(), a.dx.data(),
                          a.sx.data(), c.n_tok, y_grows.data(), ys);
        simd::dot_q8_panels(type, true, grouped.data(), rb, c.count, c.n_in, a.pq.data(),
                            a.pdx.data(), a.psx.data(), c.n_tok, y_gpan.data(), ys);
        for (int64_t t = 0; t < c.n_tok; ++t) {
          for (int r = 0; r < c.count; ++r) {
            const float ref = kq_formula(type, bytes.data() + r * rb, a.q.data() + t * 2 * c.n_in,
                                         a.dx.data() + t * nb, a.sx.data() + t * nb, c.n_in);
            const size_t k = static_cast<size_t>(t * ys + r);
            ASSERT_EQ(std::bit_cast<uint32_t>(y_rows[k]), std::bit_cast<uint32_t>(ref))
                << "rows t=" << t << " r=" << r << " " << y_rows[k] << " vs " << ref;
            ASSERT_EQ(std::bit_cast<uint32_t>(y_pan[k]), std::bit_cast<uint32_t>(ref))
                << "panels t=" << t << " r=" << r << " " << y_pan[k] << " vs " << ref;
            ASSERT_EQ(std::bit_cast<uint32_t>(y_grows[k]), std::bit_cast<uint32_t>(ref))
                << "GROUPS16 rows t=" << t << " r=" << r << " " << y_grows[k] << " vs " << ref;
            ASSERT_EQ(std::bit_cast<uint32_t>(y_gpan[k]), std::bit_cast<uint32_t>(ref))
                << "GROUPS16 panels t=" << t << " r=" << r << " " << y_gpan[k] << " vs " << ref;
          }
          for (int64_t r = c.count; r < ys; ++r) {
            ASSERT_EQ(y_rows[static_cast<size_t>(t * ys + r)], -3.0f);
            ASSERT_EQ(y_pan[static_cast<size_t>(t * ys + r)], -3.0f);
            ASSERT_EQ(y_grows[static_cast<size_t>(t * ys + r)], -3.0f);
            ASSERT_EQ(y_gpan[static_cast<size_t>(t * ys + r)], -3.0f);
          }
        }
      }
    }
  });
}

// The formula against the dequantized weights times the unquantized activations in double.
// Bound: each activation is within half a step (max|x| / 127 of its block) of dx * q1, which
// moves the product by at most sum |w| * step / 2; plus f32 accumulation, n_in * 2^-24 * sum
// |w x| for the chain (two fmas per block for Q4_K).
TEST(KqMatmul, FormulaIsWithinTheActivationStepOfTheDoubleProduct) {
  std::mt19937 rng(17);
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K}) {
    for (int64_t n_in : {int64_t{256}, int64_t{2048}}) {
      SCOPED_TRACE(::testing::Message() << ggml_type_name(type) << " n_in " << n_in);
      const int n_out = 9, n_tok = 4;
      std::vector<float> deq;
      const std::vector<uint8_t> bytes = shifted_rows(type, n_in, n_out, &rng, &deq);
      const size_t rb = ggml_row_size(type, n_in);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> x(static_cast<size_t>(n_tok * n_in));
      for (float& f : x) f = nd(rng);
      const Acts a = quantize_acts(type, x, n_in, n_tok);
      double worst = 0;  // largest error as a fraction of its bound
      for (int t = 0; t < n_tok; ++t) {
        for (int o = 0; o < n_out; ++o) {
          double ref = 0, mag = 0, qerr = 0;
          for (int64_t b = 0; b < n_in / 32; ++b) {
            double amax = 0;
            for (int64_t i = b * 32; i < b * 32 + 32; ++i) {
              amax = std::fmax(amax, std::fabs(x[static_cast<size_t>(t * n_in + i)]));
            }
            for (int64_t i = b * 32; i < b * 32 + 32; ++i) {
              const double w = deq[static_cast<size_t>(o * n_in + i)];
              ref += w * x[static_cast<size_t>(t * n_in + i)];
              mag += std::fabs(w * x[static_cast<size_t>(t * n_in + i)]);
              qerr += std::fabs(w) * 0.5 * amax / 127.0;
            }
          }
          const float got =
              kq_formula(type, bytes.data() + o * rb, a.q.data() + t * 2 * n_in,
                         a.dx.data() + t * (n_in / 32), a.sx.data() + t * (n_in / 32), n_in);
          // The min term of Q4_K is summed apart from the code term, so its f32 rounding
          // scales with the magnitude of both; 4x the plain chain's bound covers it.
          const double tol = 1.01 * qerr + 4.0 * n_in * 6e-8 * (mag + 1e-6);
          ASSERT_NEAR(got, ref, tol) << "t=" << t << " o=" << o;
          worst = std::fmax(worst, std::fabs(got - ref) / tol);
        }
      }
      std::printf("  %s n_in %lld: worst error %.2f of the bound\n", ggml_type_name(type),
                  static_cast<long long>(n_in), worst);
    }
  }
}

// matmul() on Q4_K / Q6_K: a token's outputs are the same bits alone, in any batch (row layout
// up to 2 tokens, panels beyond), on any thread count, and across chunk boundaries.
TEST(KqMatmul, MatmulBitwiseIndependentOfBatchThreadsAndChunks) {
  std::mt19937 rng(5);
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K}) {
    SCOPED_TRACE(ggml_type_name(type));
    const int64_t n_in = 1024, n_out = 37, n_tok = 150;
    std::vector<float> deq;
    const std::vector<uint8_t> bytes = shifted_rows(type, n_in, n_out, &rng, &deq);
    const WeightMatrix w{type, bytes.data(), n_in, n_out, ggml_row_size(type, n_in)};
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n_tok * n_in));
    for (float& f : x) f = nd(rng);
    auto run = [&](int64_t first, int64_t count, int threads) {
      ThreadPool pool(threads);
      std::vector<float> scratch(matmul_scratch_floats(n_in, threads));
      std::vector<float> y(static_cast<size_t>(count * n_out));
      matmul(w, x.data() + first * n_in, n_in, count, y.data(), n_out, scratch.data(), pool);
      return y;
    };
    const std::vector<float> all = run(0, n_tok, 1);
    for (int threads : {2, 3}) {
      const std::vector<float> y = run(0, n_tok, threads);
      ASSERT_EQ(std::memcmp(all.data(), y.data(), all.size() * sizeof(float)), 0) << threads;
    }
    for (int64_t first : {int64_t{0}, int64_t{63}, int64_t{149}}) {
      for (int64_t count : {int64_t{1}, int64_t{2}}) {
        if (first + count > n_tok) continue;
        const std::vector<float> y = run(first, count, 2);
        ASSERT_EQ(std::memcmp(all.data() + first * n_out, y.data(), y.size() * sizeof(float)), 0)
            << first << "+" << count;
      }
    }
    for (int64_t count : {int64_t{3}, int64_t{17}, int64_t{33}}) {
      const std::vector<float> y = run(40, count, 2);
      ASSERT_EQ(std::memcmp(all.data() + 40 * n_out, y.data(), y.size() * sizeof(float)), 0)
          << count;
    }
  }
}

// Body of Groups16SameBitsAsRows for one type.
void groups16_same_bits_as_rows(GgmlType type, std::mt19937* prng) {
  std::mt19937& rng = *prng;
  const int64_t n_in = 768, n_out = 41, n_tok = 70;  // a partial last group
  std::vector<float> deq;
  const std::vector<uint8_t> bytes = shifted_rows(type, n_in, n_out, &rng, &deq);
  const size_t rb = ggml_row_size(type, n_in);
  const WeightMatrix w{type, bytes.data(), n_in, n_out, rb};
  ASSERT_TRUE(weight_groups16_useful(w));
  ASSERT_EQ(weight_groups16_bytes(w), 48 * rb);
  std::vector<uint8_t> grouped(weight_groups16_bytes(w), 0xAB);
  WeightMatrix wg;
  weight_to_groups16(w, grouped.data(), &wg);
  ASSERT_EQ(wg.layout, WeightLayout::GROUPS16);
  ASSERT_EQ(wg.data, grouped.data());
  // Group g, super-block s (sb bytes per row) at g * 16 * rb + s * 16 * sb; unit u of row r at
  // (u * 16 + r) * 4, then the sb % 4 bytes left of row r at sb / 4 * 64 + r * (sb % 4);
  // padding rows all zero.
  const int64_t sb = type == GgmlType::Q6_K ? 210 : 144, units = sb / 4, tail = sb % 4;
  for (int64_t o = 0; o < 48; ++o) {
    for (int64_t s = 0; s < n_in / 256; ++s) {
      const size_t super = static_cast<size_t>(o / 16 * 16 * rb + s * 16 * sb);
      for (int64_t i = 0; i < sb; ++i) {
        const int64_t u = i / 4;
        const size_t at =
            super + static_cast<size_t>(u < units ? (u * 16 + o % 16) * 4 + i % 4
                                                  : units * 64 + o % 16 * tail + i % 4);
        const uint8_t want = o < n_out ? bytes[static_cast<size_t>(o * rb + s * sb + i)] : 0;
        ASSERT_EQ(grouped[at], want) << "row " << o << " super " << s << " byte " << i;
      }
    }
  }
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tok * n_in));
  for (float& f : x) f = nd(rng);
  auto run = [&](const WeightMatrix& wm, int64_t count, int threads) {
    ThreadPool pool(threads);
    std::vector<float> scratch(matmul_scratch_floats(n_in, threads));
    std::vector<float> y(static_cast<size_t>(count * n_out));
    matmul(wm, x.data(), n_in, count, y.data(), n_out, scratch.data(), pool);
    return y;
  };
  const std::vector<float> all = run(w, n_tok, 1);
  // Around the decode kernel's 4-token tiles, the row layout's limit (simd::q8_rows_max) and the
  // panels with a tail in the row layout.
  for (int64_t count : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{15},
                        int64_t{16}, int64_t{17}, int64_t{31}, int64_t{33}, int64_t{48}, n_tok}) {
    for (int threads : {1, 2, 3}) {
      const std::vector<float> y = run(wg, count, threads);
      ASSERT_EQ(std::memcmp(all.data(), y.data(), y.size() * sizeof(float)), 0)
          << "tokens " << count << " threads " << threads;
    }
  }
  std::vector<float> row(static_cast<size_t>(n_in)), row_g(row.size());
  for (int64_t o = 0; o < n_out; ++o) {
    get_row(wg, o, row_g.data());
    dequantize_row(type, bytes.data() + o * rb, row.data(), n_in);
    ASSERT_EQ(std::memcmp(row.data(), row_g.data(), row.size() * sizeof(float)), 0) << o;
  }
}

// Q4_K and Q6_K in the GROUPS16 layout (the CPU backend's load-time repack): matmul gives the
// same bits as on the file's rows for every token-count path and thread count, and get_row
// the same row. The layout itself is checked against its description in kernels/matmul.h.
TEST(KqMatmul, Groups16SameBitsAsRows) {
  if (!simd::q8_panels_fast()) GTEST_SKIP() << "no 8-bit multiply-add kernels on this CPU";
  std::mt19937 rng(23);
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K}) {
    SCOPED_TRACE(ggml_type_name(type));
    groups16_same_bits_as_rows(type, &rng);
  }
}

}  // namespace
}  // namespace geist
