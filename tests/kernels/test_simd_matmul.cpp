// The Highway matmul kernels against the scalar references (dequantize_row, double products),
// on every SIMD target this CPU supports, random shapes with odd tails, every weight type.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "hwy/targets.h"
#include "kernels/kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/simd/f16.h"
#include "kernels/simd/matmul_simd.h"

namespace geist {
namespace {

using test::for_each_target;

using test::random_rows;

// Names the targets the per-target tests below run on (AVX3/AVX2/SSE4/EMU128 on x86-64, NEON
// on Arm; scripts/test_arm64.sh), and checks the one dispatch picks by default is among them.
TEST(SimdMatmul, DispatchedTargetIsAmongTheTestedOnes) {
  std::string names;
  bool found = false;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
    names += std::string(names.empty() ? "" : ", ") + hwy::TargetName(t);
    found = found || std::string(hwy::TargetName(t)) == simd::target_name();
  }
  std::printf("SIMD targets tested here: %s; dispatched by default: %s\n", names.c_str(),
              simd::target_name());
  EXPECT_TRUE(found) << simd::target_name() << " not in " << names;
}

// Every type the int16 path unpacks.
constexpr GgmlType kInt16Types[] = {GgmlType::Q8_0,   GgmlType::Q4_0,  GgmlType::Q4_1,
                                    GgmlType::Q5_0,   GgmlType::Q5_1,  GgmlType::Q3_K,
                                    GgmlType::Q4_K,   GgmlType::Q5_K,  GgmlType::Q6_K,
                                    GgmlType::IQ4_NL, GgmlType::IQ4_XS};

TEST(SimdMatmul, UnpackReproducesDequantize) {
  std::mt19937 rng(7);
  for_each_target([&] {
    for (GgmlType type : kInt16Types) {
      SCOPED_TRACE(ggml_type_name(type));
      ASSERT_TRUE(simd::int16_path_supported(type));
      const int64_t blk = ggml_type_traits(type).block_size;
      const int64_t n_in = blk * (1 + static_cast<int64_t>(rng() % 5));
      const int count = 1 + static_cast<int>(rng() % 4);
      std::vector<float> deq;
      const std::vector<uint8_t> bytes = random_rows(type, n_in, count, &rng, &deq, true);
      const int64_t nb = n_in / 32;
      std::vector<int16_t> w16(static_cast<size_t>(count * n_in));
      std::vector<float> dw(static_cast<size_t>(count * nb)), mw(dw.size());
      simd::unpack_rows_i16(type, bytes.data(), ggml_row_size(type, n_in), count, n_in, w16.data(),
                            dw.data(), mw.data());
      for (int r = 0; r < count; ++r) {
        for (int64_t i = 0; i < n_in; ++i) {
          const size_t bi = static_cast<size_t>(r * nb + i / 32);
          const float v = dw[bi] * w16[static_cast<size_t>(r * n_in + i)] + mw[bi];
          const float ref = deq[static_cast<size_t>(r * n_in + i)];
          // The scalar reference multiplies d * scale first; the unpacked form scale * q
          // first: a few f32 roundings apart.
          ASSERT_NEAR(v, ref, 4e-7f * (std::fabs(ref) + std::fabs(mw[bi]) + 1e-6f))
              << "row " << r << " element " << i;
        }
      }
    }
  });
}

TEST(SimdMatmul, Q16QuantizationIsWithinHalfAStep) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(256);
  for (float& f : x) f = nd(rng);
  for (int i = 64; i < 96; ++i) x[static_cast<size_t>(i)] = 0.0f;  // an all-zero block
  std::vector<int16_t> q(256);
  std::vector<float> dx(8), sx(8);
  simd::quantize_row_q16(x.data(), 256, q.data(), dx.data(), sx.data());
  for (int b = 0; b < 8; ++b) {
    float amax = 0;
    int32_t sum = 0;
    for (int i = 32 * b; i < 32 * b + 32; ++i) {
      amax = std::fmax(amax, std::fabs(x[static_cast<size_t>(i)]));
      sum += q[static_cast<size_t>(i)];
    }
    EXPECT_FLOAT_EQ(dx[static_cast<size_t>(b)], amax / 32767.0f);
    EXPECT_EQ(sx[static_cast<size_t>(b)], dx[static_cast<size_t>(b)] * static_cast<float>(sum));
    for (int i = 32 * b; i < 32 * b + 32; ++i) {
      const float err =
          x[static_cast<size_t>(i)] - dx[static_cast<size_t>(b)] * q[static_cast<size_t>(i)];
      EXPECT_LE(std::fabs(err), 0.5001f * dx[static_cast<size_t>(b)] + 1e-30f) << i;
    }
  }
}

struct MatmulShape {
  GgmlType type;
  int64_t n_in, n_out, n_tok;
};

// matmul on every target against sum_i deq[o][i] * x[t][i] in double. The bound: f32
// accumulation (n_in * eps * sum|terms|) plus, on the integer paths, half a quantization step of
// each activation times |w| (x is rounded to 1/(127 * 254) or 1/32767 of its block's max).
TEST(SimdMatmul, MatchesDoubleReferenceOnAllTypesAndTargets) {
  std::mt19937 rng(2024);
  const MatmulShape shapes[] = {
      {GgmlType::F32, 1, 1, 1},       {GgmlType::F32, 77, 19, 5},     {GgmlType::F32, 300, 9, 3},
      {GgmlType::F16, 53, 11, 4},     {GgmlType::F16, 512, 6, 2},     {GgmlType::BF16, 31, 7, 3},
      {GgmlType::BF16, 130, 5, 2},    {GgmlType::Q8_0, 32, 1, 1},     {GgmlType::Q8_0, 416, 13, 6},
      {GgmlType::Q4_0, 96, 7, 3},     {GgmlType::Q4_0, 1024, 10, 2},  {GgmlType::Q4_K, 256, 3, 1},
      {GgmlType::Q4_K, 768, 9, 5},    {GgmlType::Q6_K, 256, 5, 2},    {GgmlType::Q6_K, 1280, 6, 3},
      {GgmlType::Q4_1, 64, 5, 2},     {GgmlType::Q5_0, 96, 6, 2},     {GgmlType::Q5_1, 32, 3, 3},
      {GgmlType::Q4_1, 160, 9, 7},    {GgmlType::Q5_0, 32, 17, 5},    {GgmlType::Q5_1, 416, 5, 9},
      {GgmlType::Q5_K, 256, 7, 3},    {GgmlType::Q5_K, 768, 5, 6},    {GgmlType::Q3_K, 256, 3, 2},
      {GgmlType::Q3_K, 512, 9, 5},    {GgmlType::Q2_K, 256, 5, 3},    {GgmlType::Q2_K, 768, 6, 2},
      {GgmlType::IQ4_NL, 32, 3, 1},   {GgmlType::IQ4_NL, 224, 11, 6}, {GgmlType::IQ4_XS, 256, 2, 4},
      {GgmlType::IQ4_XS, 1024, 7, 3},
  };
  for_each_target([&] {
    for (const MatmulShape& s : shapes) {
      SCOPED_TRACE(::testing::Message()
                   << ggml_type_name(s.type) << " " << s.n_in << "x" << s.n_out);
      std::vector<float> deq;
      const std::vector<uint8_t> bytes = random_rows(s.type, s.n_in, s.n_out, &rng, &deq);
      const WeightMatrix w{s.type, bytes.data(), s.n_in, s.n_out, ggml_row_size(s.type, s.n_in)};
      const int64_t xs = s.n_in + 5, ys = s.n_out + 3;
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> x(static_cast<size_t>(s.n_tok * xs));
      for (float& f : x) f = nd(rng);
      ThreadPool pool(2);
      std::vector<float> scratch(matmul_scratch_floats(s.n_in, 2));
      std::vector<float> y(static_cast<size_t>(s.n_tok * ys), -3.0f);
      matmul(w, x.data(), xs, s.n_tok, y.data(), ys, scratch.data(), pool);
      const bool int_path = simd::int16_path_supported(s.type);
      // Q8_0: steps of max / (127 * kQ8Fine) (+ residual rounding); Q4_0: max / 127 (one
      // plane); others max / 32767.
      const double act_levels = !simd::q8_path_supported(s.type) ? 32767.0
                                : simd::q8_planes(s.type) == 1   ? 127.0
                                                                 : 127.0 * simd::kQ8Fine / 1.02;
      for (int64_t t = 0; t < s.n_tok; ++t) {
        for (int64_t o = 0; o < s.n_out; ++o) {
          double ref = 0, mag = 0, qerr = 0;
          for (int64_t b = 0; b * 32 < s.n_in; ++b) {
            double amax = 0;
            for (int64_t i = b * 32; i < std::min(s.n_in, b * 32 + 32); ++i) {
              amax = std::fmax(amax, std::fabs(x[static_cast<size_t>(t * xs + i)]));
            }
            for (int64_t i = b * 32; i < std::min(s.n_in, b * 32 + 32); ++i) {
              const double wv = deq[static_cast<size_t>(o * s.n_in + i)];
              const double p = wv * x[static_cast<size_t>(t * xs + i)];
              ref += p;
              mag += std::fabs(p);
              qerr += std::fabs(wv) * 0.5 * amax / act_levels;
            }
          }
          const double tol = 1e-6 + 2.0 * s.n_in * 6e-8 * mag + (int_path ? 1.01 * qerr : 0.0);
          ASSERT_NEAR(y[static_cast<size_t>(t * ys + o)], ref, tol) << "t=" << t << " o=" << o;
        }
        for (int64_t o = s.n_out; o < ys; ++o) ASSERT_EQ(y[static_cast<size_t>(t * ys + o)], -3.0f);
      }
    }
  });
}

// The determinism contract: a token row's outputs do not depend on the batch it comes in, the
// thread count, or the chunking of long batches (more rows than one chunk of scratch).
TEST(SimdMatmul, RowsBitwiseIndependentOfBatchThreadsAndChunks) {
  std::mt19937 rng(11);
  for (GgmlType type :
       {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K,
        GgmlType::Q5_1, GgmlType::Q5_K, GgmlType::Q3_K, GgmlType::IQ4_XS, GgmlType::Q2_K}) {
    SCOPED_TRACE(ggml_type_name(type));
    const int64_t n_in = 256, n_out = 21, n_tok = 150;  // 150 > one chunk on 1 thread
    std::vector<float> deq;
    const std::vector<uint8_t> bytes = random_rows(type, n_in, n_out, &rng, &deq);
    const WeightMatrix w{type, bytes.data(), n_in, n_out, ggml_row_size(type, n_in)};
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n_tok * n_in));
    for (float& f : x) f = nd(rng);
    auto run_on = [&](const WeightMatrix& wm, int64_t first, int64_t count, int threads) {
      ThreadPool pool(threads);
      std::vector<float> scratch(matmul_scratch_floats(n_in, threads));
      std::vector<float> y(static_cast<size_t>(count * n_out));
      matmul(wm, x.data() + first * n_in, n_in, count, y.data(), n_out, scratch.data(), pool);
      return y;
    };
    auto run = [&](int64_t first, int64_t count, int threads) {
      return run_on(w, first, count, threads);
    };
    const std::vector<float> all = run(0, n_tok, 1);
    for (int threads : {2, 3}) {
      const std::vector<float> y = run(0, n_tok, threads);
      ASSERT_EQ(std::memcmp(all.data(), y.data(), all.size() * sizeof(float)), 0) << threads;
    }
    for (int64_t first : {int64_t{0}, int64_t{37}, int64_t{149}}) {
      const std::vector<float> y = run(first, 1, 2);
      ASSERT_EQ(std::memcmp(all.data() + first * n_out, y.data(), n_out * sizeof(float)), 0)
          << first;
    }
    const std::vector<float> mid = run(40, 70, 2);
    ASSERT_EQ(std::memcmp(all.data() + 40 * n_out, mid.data(), mid.size() * sizeof(float)), 0);
    // The GROUPS16 layout (the CPU backend's load-time repack) gives the same bits.
    if (!weight_groups16_useful(w)) continue;
    std::vector<uint8_t> grouped(weight_groups16_bytes(w));
    WeightMatrix wg;
    weight_to_groups16(w, grouped.data(), &wg);
    ASSERT_EQ(wg.layout, WeightLayout::GROUPS16);
    // Q5_1, Q5_K, Q3_K, IQ4_XS and Q2_K are in the I8M form there, the 8-bit kernels' own
    // formula (test_i8m_matmul.cpp; Q3_K against its Q6_K rows in test_groups16_q8.cpp).
    if (wg.type != type || simd::i8m_type(type)) continue;
    for (int64_t count :
         {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{8}, int64_t{9},
          int64_t{15}, int64_t{16}, int64_t{17}, int64_t{31}, int64_t{33}, int64_t{64}, n_tok}) {
      for (int threads : {1, 2, 3}) {
        const std::vector<float> y = run_on(wg, 0, count, threads);
        ASSERT_EQ(std::memcmp(all.data(), y.data(), y.size() * sizeof(float)), 0)
            << "GROUPS16 tokens " << count << " threads " << threads;
      }
    }
    std::vector<float> row(static_cast<size_t>(n_in)), row_g(row.size());
    for (int64_t o = 0; o < n_out; ++o) {
      get_row(w, o, row.data());
      get_row(wg, o, row_g.data());
      ASSERT_EQ(std::memcmp(row.data(), row_g.data(), row.size() * sizeof(float)), 0) << o;
    }
  }
}

}  // namespace
}  // namespace geist

namespace geist {
namespace {

TEST(SimdMatmul, HalfToFloatMatchesScalarReferenceForAllInputs) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float ref = fp16_to_fp32(static_cast<uint16_t>(h));
    const float got = simd::f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(ref)) << h;
    }
  }
}

// Decode reads Q8_0/Q4_0 rows directly, batches unpack them first: both must give the bits
// of the other, on every target.
TEST(SimdMatmul, PackedDotEqualsUnpackedDotBitwise) {
  std::mt19937 rng(5);
  for_each_target([&] {
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
      SCOPED_TRACE(ggml_type_name(type));
      ASSERT_TRUE(simd::packed_dot_supported(type));
      const int64_t n_in = 32 * (1 + static_cast<int64_t>(rng() % 40));
      const int count = 1 + static_cast<int>(rng() % 4);
      std::vector<float> deq;
      const std::vector<uint8_t> bytes = random_rows(type, n_in, count, &rng, &deq);
      const size_t rb = ggml_row_size(type, n_in);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> x(static_cast<size_t>(n_in));
      for (float& f : x) f = nd(rng);
      const int64_t nb = n_in / 32;
      std::vector<int16_t> q(static_cast<size_t>(n_in)), w16(static_cast<size_t>(count * n_in));
      std::vector<float> dx(static_cast<size_t>(nb)), sx(dx.size());
      std::vector<float> dw(static_cast<size_t>(count * nb)), mw(dw.size());
      simd::quantize_row_q16(x.data(), n_in, q.data(), dx.data(), sx.data());
      simd::unpack_rows_i16(type, bytes.data(), rb, count, n_in, w16.data(), dw.data(), mw.data());
      float a[4], b[4];
      simd::dot_i16_rows(w16.data(), dw.data(), nullptr, count, n_in, q.data(), dx.data(),
                         sx.data(), a);
      simd::dot_packed_rows(type, bytes.data(), rb, count, n_in, q.data(), dx.data(), b);
      for (int r = 0; r < count; ++r) {
        ASSERT_EQ(std::bit_cast<uint32_t>(a[r]), std::bit_cast<uint32_t>(b[r])) << r;
      }
    }
  });
}

}  // namespace
}  // namespace geist

namespace geist {
namespace {

// Prefill dots register tiles of rows x tokens; decode one token at a time: every output must
// carry the bits of the one-token call, for any tile position, on every target.
TEST(SimdMatmul, TiledBatchEqualsOneTokenDotBitwise) {
  std::mt19937 rng(23);
  for_each_target([&] {
    for (GgmlType type : kInt16Types) {
      SCOPED_TRACE(ggml_type_name(type));
      const int64_t n_in = 256 * (1 + static_cast<int64_t>(rng() % 4));
      const int count = 1 + static_cast<int>(rng() % 4);
      const int64_t n_tok = 1 + static_cast<int64_t>(rng() % 11);
      const int64_t nb = n_in / 32, ys = count + 3;
      std::vector<float> deq;
      const std::vector<uint8_t> bytes = random_rows(type, n_in, count, &rng, &deq);
      std::vector<int16_t> w16(static_cast<size_t>(count * n_in));
      std::vector<float> dw(static_cast<size_t>(count * nb)), mw(dw.size());
      simd::unpack_rows_i16(type, bytes.data(), ggml_row_size(type, n_in), count, n_in, w16.data(),
                            dw.data(), mw.data());
      const float* mins = simd::int16_has_min(type) ? mw.data() : nullptr;
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> x(static_cast<size_t>(n_tok * n_in));
      for (float& f : x) f = nd(rng);
      std::vector<int16_t> q(x.size());
      std::vector<float> dx(static_cast<size_t>(n_tok * nb)), sx(dx.size());
      for (int64_t t = 0; t < n_tok; ++t) {
        simd::quantize_row_q16(x.data() + t * n_in, n_in, q.data() + t * n_in, dx.data() + t * nb,
                               sx.data() + t * nb);
      }
      std::vector<float> y(static_cast<size_t>(n_tok * ys), -3.0f);
      simd::dot_i16_batch(w16.data(), dw.data(), mins, count, n_in, q.data(), dx.data(), sx.data(),
                          n_tok, y.data(), ys);
      for (int64_t t = 0; t < n_tok; ++t) {
        float one[4];
        simd::dot_i16_rows(w16.data(), dw.data(), mins, count, n_in, q.data() + t * n_in,
                           dx.data() + t * nb, sx.data() + t * nb, one);
        for (int r = 0; r < count; ++r) {
          ASSERT_EQ(std::bit_cast<uint32_t>(y[static_cast<size_t>(t * ys + r)]),
                    std::bit_cast<uint32_t>(one[r]))
              << "t=" << t << " r=" << r;
          // And the value itself: within f32 rounding of the double product of the dequantized
          // weights with the unquantized activations (Q16 error is far below this bound).
          double ref = 0.0, mag = 0.0;
          for (int64_t i = 0; i < n_in; ++i) {
            const double p = double{deq[static_cast<size_t>(r * n_in + i)]} *
                             x[static_cast<size_t>(t * n_in + i)];
            ref += p;
            mag += std::fabs(p);
          }
          ASSERT_NEAR(one[r], ref, 1e-4 * mag + 1e-6) << "t=" << t << " r=" << r;
        }
        for (int64_t r = count; r < ys; ++r) ASSERT_EQ(y[static_cast<size_t>(t * ys + r)], -3.0f);
      }
    }
  });
}

}  // namespace
}  // namespace geist

namespace geist {
namespace {

// The Q8 path's contract, written out independently of the kernels: exact int32 block sums of
// the signed weight codes with the two int8 activation planes (q [2][n_in]), then one std::fma
// per block in order.
float q8_contract(GgmlType type, const uint8_t* row, const int8_t* q, const float* dx,
                  int64_t n_in) {
  const bool q4 = type == GgmlType::Q4_0;
  const size_t bb = q4 ? 18 : 34;
  float acc = 0.0f;
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const uint8_t* blk = row + static_cast<size_t>(b) * bb;
    const float dw = fp16_to_fp32(static_cast<uint16_t>(blk[0] | (blk[1] << 8)));
    int32_t i1 = 0, i2 = 0;
    for (int i = 0; i < 32; ++i) {
      const int32_t wv = q4 ? ((i < 16 ? blk[2 + i] & 15 : blk[2 + i - 16] >> 4) - 8)
                            : static_cast<int8_t>(blk[2 + i]);
      i1 += wv * q[b * 32 + i];
      if (!q4) i2 += wv * q[n_in + b * 32 + i];  // Q4_0: one plane, dx is the coarse step
    }
    const int32_t isum = q4 ? i1 : simd::kQ8Fine * i1 + i2;
    acc = std::fma(static_cast<float>(isum), dw * dx[b], acc);
  }
  return acc;
}

TEST(SimdMatmul, Q8QuantizationIsWithinHalfAStepAndPanelsHoldTheSameCodes) {
  std::mt19937 rng(31);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n_in = 256, nb = 8;
  std::vector<float> x(n_in);
  for (float& f : x) f = nd(rng);
  for (int i = 96; i < 128; ++i) x[static_cast<size_t>(i)] = 0.0f;  // an all-zero block
  for (int planes : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << planes << " plane(s)");
    std::vector<int8_t> q(2 * n_in, 99);
    std::vector<float> dx(nb);
    std::vector<int32_t> sx(nb);
    simd::quantize_row_q8(x.data(), n_in, planes, q.data(), dx.data(), sx.data());
    const int32_t levels = planes == 2 ? 127 * simd::kQ8Fine : 127;  // steps per block max
    for (int64_t b = 0; b < nb; ++b) {
      float amax = 0.0f;
      int32_t sum = 0;
      auto code = [&](int64_t i) {
        const int32_t c = q[static_cast<size_t>(i)];
        return planes == 2 ? simd::kQ8Fine * c + q[static_cast<size_t>(n_in + i)] : c;
      };
      for (int64_t i = b * 32; i < b * 32 + 32; ++i) {
        amax = std::fmax(amax, std::fabs(x[static_cast<size_t>(i)]));
        sum += code(i);
        EXPECT_LE(std::abs(q[static_cast<size_t>(i)]), 127);
        if (planes == 2) {
          EXPECT_LE(std::abs(q[static_cast<size_t>(n_in + i)]), 127);
        } else {
          EXPECT_EQ(q[static_cast<size_t>(n_in + i)], 99);  // the fine plane is not written
        }
      }
      EXPECT_FLOAT_EQ(dx[static_cast<size_t>(b)], amax / static_cast<float>(levels));
      EXPECT_EQ(sx[static_cast<size_t>(b)], sum);
      for (int64_t i = b * 32; i < b * 32 + 32; ++i) {
        const size_t k = static_cast<size_t>(i);
        // Half a step, plus the f32 rounding of the residual x - d * q1.
        EXPECT_LE(std::fabs(x[k] - dx[static_cast<size_t>(b)] * code(i)),
                  0.51f * dx[static_cast<size_t>(b)] + 1e-30f)
            << i;
      }
    }
    std::vector<int8_t> pq(static_cast<size_t>(nb * 1024), 99);
    std::vector<float> pdx(static_cast<size_t>(nb * 16));
    std::vector<int32_t> psx(pdx.size());
    simd::quantize_row_q8_panel(x.data(), n_in, planes, 5, pq.data(), pdx.data(), psx.data());
    for (int64_t i = 0; i < n_in; ++i) {
      const size_t at = static_cast<size_t>(((i / 32 * 8 + i % 32 / 4) * 16 + 5) * 4 + i % 4);
      ASSERT_EQ(pq[at], q[static_cast<size_t>(i)]) << i;
      ASSERT_EQ(pq[at + nb * 512], planes == 2 ? q[static_cast<size_t>(n_in + i)] : 99) << i;
    }
    for (int64_t b = 0; b < nb; ++b) {
      EXPECT_EQ(pdx[static_cast<size_t>(b * 16 + 5)], dx[static_cast<size_t>(b)]);
      EXPECT_EQ(psx[static_cast<size_t>(b * 16 + 5)], sx[static_cast<size_t>(b)]);
    }
  }
}

// The vectorised quantizer against the scalar definition, bitwise, on every target: scales over
// many decades, exact halves (ties of the rounding), zero and single-element blocks, clamping.
TEST(SimdMatmul, Q8QuantizerEqualsTheScalarDefinitionBitwise) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n_in = 32 * 40, nb = 40;
  std::vector<float> x(static_cast<size_t>(n_in));
  for (int64_t b = 0; b < nb; ++b) {
    const float scale = std::ldexp(1.0f, static_cast<int>(b % 20) * 6 - 60);
    for (int64_t i = 0; i < 32; ++i) {
      float v = scale * nd(rng);
      if (b % 5 == 1) v = scale * (std::round(nd(rng) * 8.0f) + 0.5f);  // ties
      if (b % 7 == 3) v = i == 9 ? -scale : 0.0f;                       // one element
      x[static_cast<size_t>(b * 32 + i)] = v;
    }
  }
  for (int64_t i = 64; i < 96; ++i) x[static_cast<size_t>(i)] = 0.0f;  // all zero
  for (int64_t i = 96; i < 128; ++i) x[static_cast<size_t>(i)] = i % 2 ? -0.0f : 0.0f;
  std::vector<int8_t> q_ref(static_cast<size_t>(2 * n_in)), q(q_ref.size());
  std::vector<float> dx_ref(static_cast<size_t>(nb)), dx(dx_ref.size());
  std::vector<int32_t> sx_ref(dx_ref.size()), sx(dx_ref.size());
  for (int planes : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << planes << " plane(s)");
    std::fill(q_ref.begin(), q_ref.end(), int8_t{99});
    simd::quantize_row_q8_reference(x.data(), n_in, planes, q_ref.data(), dx_ref.data(),
                                    sx_ref.data());
    for_each_target([&] {
      std::fill(q.begin(), q.end(), int8_t{99});
      simd::quantize_row_q8(x.data(), n_in, planes, q.data(), dx.data(), sx.data());
      for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(q[i], q_ref[i]) << i;
      for (size_t b = 0; b < dx.size(); ++b) {
        ASSERT_EQ(std::bit_cast<uint32_t>(dx[b]), std::bit_cast<uint32_t>(dx_ref[b])) << b;
        ASSERT_EQ(sx[b], sx_ref[b]) << b;
      }
    });
  }
}

// Decode (row layout, weight rows in lanes) and prefill (panels, tokens in lanes) against the
// contract, bitwise, on every target: odd row counts, partial panels, Q8_0 and Q4_0, weights in
// the file's rows and in the GROUPS16 layout (a partial last group).
TEST(SimdMatmul, Q8KernelsEqualTheScalarContractBitwise) {
  std::mt19937 rng(77);
  for_each_target([&] {
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
      for (int rep = 0; rep < 3; ++rep) {
        SCOPED_TRACE(::testing::Message() << ggml_type_name(type) << " rep " << rep);
        ASSERT_TRUE(simd::q8_path_supported(type));
        const int64_t n_in = 32 * (1 + static_cast<int64_t>(rng() % 24));
        const int count = 1 + static_cast<int>(rng() % 21);
        const int64_t n_tok = 1 + static_cast<int64_t>(rng() % 40);
        const int64_t nb = n_in / 32, ys = count + 3;
        std::vector<float> deq;
        const std::vector<uint8_t> bytes = random_rows(type, n_in, count, &rng, &deq);
        const size_t rb = ggml_row_size(type, n_in);
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
            simd::quantize_row_q8(xt, n_in, simd::q8_planes(type), q.data() + t * 2 * n_in,
                                  dx.data() + t * nb, sx.data() + t * nb);
          }
          const int64_t p = t / 16;
          simd::quantize_row_q8_panel(xt, n_in, simd::q8_planes(type), t % 16,
                                      pq.data() + p * nb * 1024, pdx.data() + p * nb * 16,
                                      psx.data() + p * nb * 16);
        }
        const WeightMatrix w{type, bytes.data(), n_in, count, rb};
        std::vector<uint8_t> grouped(weight_groups16_bytes(w));
        WeightMatrix wg;
        weight_to_groups16(w, grouped.data(), &wg);
        for (bool groups : {false, true}) {
          SCOPED_TRACE(groups ? "GROUPS16" : "rows");
          const uint8_t* src = groups ? grouped.data() : bytes.data();
          std::vector<float> y_rows(static_cast<size_t>(n_tok * ys), -3.0f), y_pan(y_rows);
          simd::dot_q8_rows(type, groups, src, rb, count, n_in, q.data(), dx.data(), sx.data(),
                            n_tok, y_rows.data(), ys);
          simd::dot_q8_panels(type, groups, src, rb, count, n_in, pq.data(), pdx.data(), psx.data(),
                              n_tok, y_pan.data(), ys);
          test::expect_rows_and_panels_equal(
              y_rows, y_pan, n_tok, count, ys, -3.0f, [&](int64_t t, int64_t r) {
                return q8_contract(type, bytes.data() + r * rb, q.data() + t * 2 * n_in,
                                   dx.data() + t * nb, n_in);
              });
        }
      }
    }
  });
}

// The GROUPS16 decode kernel's token tiles (1 to 4 tokens per weight load, several tiles for
// up to 64 tokens, matmul's row layout: simd::q8_rows_max) against the scalar contract, bitwise,
// for every token count up to 33, on a partial last group of rows.
TEST(SimdMatmul, Q8GroupsDecodeTilesEqualTheScalarContractBitwise) {
  std::mt19937 rng(78);
  for_each_target([&] {
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
      const int64_t n_in = 32 * 7, nb = n_in / 32;
      const int count = 21, ys = count + 3;
      std::vector<float> deq;
      const std::vector<uint8_t> bytes = random_rows(type, n_in, count, &rng, &deq);
      const size_t rb = ggml_row_size(type, n_in);
      const WeightMatrix w{type, bytes.data(), n_in, count, rb};
      std::vector<uint8_t> grouped(weight_groups16_bytes(w));
      WeightMatrix wg;
      weight_to_groups16(w, grouped.data(), &wg);
      for (int64_t n_tok = 1; n_tok <= 33; ++n_tok) {
        SCOPED_TRACE(::testing::Message() << ggml_type_name(type) << " tokens " << n_tok);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> x(static_cast<size_t>(n_tok * n_in));
        for (float& f : x) f = 3.0f * nd(rng);
        std::vector<int8_t> q(2 * x.size());
        std::vector<float> dx(static_cast<size_t>(n_tok * nb));
        std::vector<int32_t> sx(dx.size());
        for (int64_t t = 0; t < n_tok; ++t) {
          simd::quantize_row_q8(x.data() + t * n_in, n_in, simd::q8_planes(type),
                                q.data() + t * 2 * n_in, dx.data() + t * nb, sx.data() + t * nb);
        }
        std::vector<float> y(static_cast<size_t>(n_tok * ys), -3.0f);
        simd::dot_q8_rows(type, true, grouped.data(), rb, count, n_in, q.data(), dx.data(),
                          sx.data(), n_tok, y.data(), ys);
        for (int64_t t = 0; t < n_tok; ++t) {
          for (int r = 0; r < count; ++r) {
            const float ref = q8_contract(type, bytes.data() + r * rb, q.data() + t * 2 * n_in,
                                          dx.data() + t * nb, n_in);
            ASSERT_EQ(std::bit_cast<uint32_t>(y[static_cast<size_t>(t * ys + r)]),
                      std::bit_cast<uint32_t>(ref))
                << "t=" << t << " r=" << r;
          }
          for (int64_t r = count; r < ys; ++r) {
            ASSERT_EQ(y[static_cast<size_t>(t * ys + r)], -3.0f);
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace geist
