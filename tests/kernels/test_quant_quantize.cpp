// quantize_row: for the legacy types, the exact bytes that ggml's reference quantizer rules
// give (re-derived here from the rules, packed bit by bit into the documented layout); for
// every writable type, quantize -> dequantize error bounds derived from the format.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <random>
#include <vector>

#include "kernels/quant.h"
#include "support/compiler_half.h"

namespace geist {
namespace {

// Used only where the compiler has a binary16 type (support/compiler_half.h; not clang 14 on x86).
[[maybe_unused]] void write_bits(uint8_t* p, int pos, int count, uint32_t v) {
  for (int i = 0; i < count; ++i) {
    const int bit = pos + i;
    p[bit / 8] =
        static_cast<uint8_t>((p[bit / 8] & ~(1u << (bit % 8))) | (((v >> i) & 1u) << (bit % 8)));
  }
}

// Test data: Gaussian blocks at wildly different scales, plus the awkward cases (all zero,
// constant, one outlier, all negative, all positive).
std::vector<float> test_row(int n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ex(-6.0f, 3.0f);
  std::vector<float> x(n);
  for (int b = 0; b < n / 32; ++b) {
    float* blk = x.data() + 32 * b;
    const float scale = std::pow(10.0f, ex(rng));
    for (int j = 0; j < 32; ++j) blk[j] = scale * nd(rng);
    switch (b % 9) {
      case 1:
        std::fill(blk, blk + 32, 0.0f);
        break;
      case 2:
        std::fill(blk, blk + 32, -scale);
        break;
      case 3:
        blk[rng() % 32] = 40 * scale;
        break;
      case 4:
        for (int j = 0; j < 32; ++j) blk[j] = -std::fabs(blk[j]);
        break;
      case 5:
        for (int j = 0; j < 32; ++j) blk[j] = std::fabs(blk[j]) + scale;
        break;
      default:
        break;
    }
  }
  return x;
}

#ifdef GEIST_TEST_COMPILER_HALF
uint16_t f16(float f) {  // the compiler's conversion, not ours
  const GEIST_TEST_COMPILER_HALF h = static_cast<GEIST_TEST_COMPILER_HALF>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

// ggml's reference quantizer rules for one 32-element block, written from their definition:
//   Q8_0: d = amax/127, q = roundf(x/d)                         (x/d computed as x * (1/d))
//   Q4_0: d = (signed value of largest |x|) / -8, q = min(15, trunc(x/d + 8.5))
//   Q5_0: as Q4_0 with -16, 16.5 and 31, fifth bits in qh
//   Q4_1: d = (max-min)/15, m = min, q = min(15, trunc((x-min)/d + 0.5))
//   Q5_1: d = (max-min)/31, m = min, q = trunc((x-min)/d + 0.5), fifth bits in qh
std::vector<uint8_t> expected_block(GgmlType t, const float* x) {
  float amax = 0, signed_max = 0, mn = x[0], mx = x[0];
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      signed_max = x[j];
    }
    mn = std::min(mn, x[j]);
    mx = std::max(mx, x[j]);
  }
  std::vector<uint8_t> out;
  auto inv = [](float d) { return d != 0.0f ? 1.0f / d : 0.0f; };
  if (t == GgmlType::Q8_0) {
    out.assign(34, 0);
    const float d = amax / 127;
    write_bits(out.data(), 0, 16, f16(d));
    for (int j = 0; j < 32; ++j) {
      write_bits(out.data(), 16 + 8 * j, 8, static_cast<uint32_t>(std::lround(x[j] * inv(d))));
    }
  } else if (t == GgmlType::Q4_0 || t == GgmlType::Q5_0) {
    const bool five = t == GgmlType::Q5_0;
    out.assign(five ? 22 : 18, 0);
    const float d = signed_max / (five ? -16 : -8);
    write_bits(out.data(), 0, 16, f16(d));
    for (int j = 0; j < 32; ++j) {
      const int q =
          std::min(five ? 31 : 15, static_cast<int>(x[j] * inv(d) + (five ? 16.5f : 8.5f)));
      const int nib = (five ? 48 : 16) + 8 * (j % 16) + 4 * (j / 16);
      write_bits(out.data(), nib, 4, static_cast<uint32_t>(q & 15));
      if (five) write_bits(out.data(), 16 + j, 1, static_cast<uint32_t>(q >> 4));
    }
  } else {
    const bool five = t == GgmlType::Q5_1;
    out.assign(five ? 24 : 20, 0);
    const float d = (mx - mn) / (five ? 31 : 15);
    write_bits(out.data(), 0, 16, f16(d));
    write_bits(out.data(), 16, 16, f16(mn));
    for (int j = 0; j < 32; ++j) {
      int q = static_cast<int>((x[j] - mn) * inv(d) + 0.5f);
      if (!five) q = std::min(15, q);
      const int nib = (five ? 64 : 32) + 8 * (j % 16) + 4 * (j / 16);
      write_bits(out.data(), nib, 4, static_cast<uint32_t>(q & 15));
      if (five) write_bits(out.data(), 32 + j, 1, static_cast<uint32_t>(q >> 4));
    }
  }
  return out;
}

TEST(QuantQuantize, LegacyTypesMatchReferenceRulesBytewise) {
  std::mt19937 rng(5);
  const int n = 32 * 90;
  const std::vector<float> x = test_row(n, rng);
  for (const GgmlType t :
       {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1}) {
    SCOPED_TRACE(static_cast<int>(t));
    const size_t bb = expected_block(t, x.data()).size();
    std::vector<uint8_t> got(bb * (n / 32), 0xcd);
    quantize_row(t, x.data(), got.data(), n);
    for (int b = 0; b < n / 32; ++b) {
      const std::vector<uint8_t> want = expected_block(t, x.data() + 32 * b);
      ASSERT_EQ(std::memcmp(got.data() + bb * b, want.data(), bb), 0) << "block " << b;
    }
  }
}

TEST(QuantQuantize, Q4_0KnownBlock) {
  // Largest magnitude is -4 at j = 0, so d = -4 / -8 = 0.5 and -4 maps to code 0; +3.75
  // maps to trunc(7.5 + 8.5) = 16 -> clamped to 15 (value 3.5).
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = 0.25f * j - 4.0f;  // -4 .. 3.75
  uint8_t blk[18];
  quantize_row(GgmlType::Q4_0, x, blk, 32);
  EXPECT_EQ(blk[0], 0x00);  // f16 0.5 = 0x3800
  EXPECT_EQ(blk[1], 0x38);
  for (int j = 0; j < 16; ++j) {
    // x[j] / 0.5 + 8.5 = j/2 + 0.5, x[j+16] / 0.5 + 8.5 = j/2 + 8.5 (truncated).
    const int lo = (j + 1) / 2;
    const int hi = std::min(15, (j + 17) / 2);
    EXPECT_EQ(blk[2 + j], lo | (hi << 4)) << j;
  }
}
#else
TEST(QuantQuantize, LegacyTypesMatchReferenceRulesBytewise) {
  GTEST_SKIP() << "compiler has no binary16 type: quantize bytes not cross-checked";
}
#endif

TEST(QuantQuantize, Q8_0ErrorAtMostHalfStepWhenScaleExact) {
  // amax = 127/8 makes d = 1/8 exact in f16 and 1/d = 8 exact, so only the code rounding
  // errs: at most d/2.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-127.0f / 8, 127.0f / 8);
  float x[32], y[32];
  uint8_t blk[34];
  for (int rep = 0; rep < 100; ++rep) {
    for (float& v : x) v = u(rng);
    x[rng() % 32] = (rng() & 1) ? 127.0f / 8 : -127.0f / 8;
    quantize_row(GgmlType::Q8_0, x, blk, 32);
    dequantize_row(GgmlType::Q8_0, blk, y, 32);
    for (int j = 0; j < 32; ++j) ASSERT_LE(std::fabs(y[j] - x[j]), 1.0f / 16) << j;
  }
}

// Per-block error bounds from the format: half a nominal step (a full one where the
// symmetric formats clamp), plus the f16 rounding of d, which moves a reconstructed value by
// up to |q| times d's rounding error, and of the offset m.
TEST(QuantQuantize, LegacyErrorBounds) {
  std::mt19937 rng(13);
  const int n = 32 * 180;
  const std::vector<float> x = test_row(n, rng);
  const double h = std::ldexp(1.0, -11);
  for (const GgmlType t :
       {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1}) {
    SCOPED_TRACE(static_cast<int>(t));
    std::vector<uint8_t> q(34 * (n / 32));
    std::vector<float> y(n);
    quantize_row(t, x.data(), q.data(), n);
    dequantize_row(t, q.data(), y.data(), n);
    for (int b = 0; b < n / 32; ++b) {
      const float* xb = x.data() + 32 * b;
      double amax = 0, mn = xb[0], mx = xb[0];
      for (int j = 0; j < 32; ++j) {
        amax = std::max(amax, double(std::fabs(xb[j])));
        mn = std::min(mn, double(xb[j]));
        mx = std::max(mx, double(xb[j]));
      }
      // f16 rounding error of a value: 2^-11 relative, or 2^-25 absolute among subnormals.
      auto f16_err = [h](double v) { return std::max(std::fabs(v) * h, std::ldexp(1.0, -25)); };
      double bound;
      switch (t) {
        case GgmlType::Q8_0:
          bound = amax / 127 / 2 + 127 * f16_err(amax / 127);
          break;
        // Symmetric 4/5-bit: the side opposite the extreme can clamp one full step.
        case GgmlType::Q4_0:
          bound = amax / 8 + 8 * f16_err(amax / 8);
          break;
        case GgmlType::Q5_0:
          bound = amax / 16 + 16 * f16_err(amax / 16);
          break;
        case GgmlType::Q4_1:
          bound = (mx - mn) / 15 / 2 + 15 * f16_err((mx - mn) / 15) + f16_err(mn);
          break;
        default:
          bound = (mx - mn) / 31 / 2 + 31 * f16_err((mx - mn) / 31) + f16_err(mn);
          break;
      }
      bound = bound * (1 + 1e-5) + 1e-6 * amax;  // float arithmetic in the quantizer
      for (int j = 0; j < 32; ++j) {
        ASSERT_LE(std::fabs(double(y[32 * b + j]) - xb[j]), bound) << "block " << b << " j " << j;
      }
    }
  }
}

double rms_error(GgmlType t, const std::vector<float>& x, std::vector<float>* y) {
  std::vector<uint8_t> q(x.size() * 2);  // >= any writable type's row size
  y->assign(x.size(), 0.0f);
  quantize_row(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
  dequantize_row(t, q.data(), y->data(), static_cast<int64_t>(x.size()));
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e += (double((*y)[i]) - x[i]) * (double((*y)[i]) - x[i]);
  return std::sqrt(e / x.size());
}

// K-quants: our own search quantizers, so no byte comparison. Bounds per element:
//   Q4_K: within a 32-element sub-block of range r = max - min(min, 0), one nominal step
//         r/15, plus what 6-bit scale/min codes can cost: up to 15 * d/2 + dmin/2 with d,
//         dmin the super-block factors (<= max scale / 63, max min / 63).
//   Q6_K: within a 16-element sub-block of max |x| = a, one nominal step a/32, plus 32 * d/2
//         for the int8 scale code, d = super-block factor.
// and on unit Gaussian data an RMS error close to uniform rounding noise (step / sqrt(12)):
// about 0.07 for Q4_K and 0.016 for Q6_K; we require < 0.09 and < 0.022.
TEST(QuantQuantize, KQuantErrorBounds) {
  std::mt19937 rng(17);
  const int n = 256 * 40;
  const std::vector<float> x = test_row(n, rng);
  std::vector<float> y;
  rms_error(GgmlType::Q4_K, x, &y);
  std::vector<uint8_t> q(144 * (n / 256));
  quantize_row(GgmlType::Q4_K, x.data(), q.data(), n);
  for (int b = 0; b < n / 256; ++b) {
    uint16_t dh, dminh;
    std::memcpy(&dh, &q[144 * b], 2);
    std::memcpy(&dminh, &q[144 * b + 2], 2);
    const double d = fp16_to_fp32(dh), dmin = fp16_to_fp32(dminh);
    for (int s = 0; s < 8; ++s) {
      const float* xs = x.data() + 256 * b + 32 * s;
      double mn = 0, mx = xs[0];
      for (int j = 0; j < 32; ++j) {
        mn = std::min(mn, double(xs[j]));
        mx = std::max(mx, double(xs[j]));
      }
      const double bound = ((mx - mn) / 15 + 7.5 * d + 0.5 * dmin) * (1 + 1e-3) + 1e-6 * (mx - mn);
      for (int j = 0; j < 32; ++j) {
        ASSERT_LE(std::fabs(double(y[256 * b + 32 * s + j]) - xs[j]), bound)
            << "block " << b << " sub " << s << " j " << j;
      }
    }
  }

  rms_error(GgmlType::Q6_K, x, &y);
  std::vector<uint8_t> q6(210 * (n / 256));
  quantize_row(GgmlType::Q6_K, x.data(), q6.data(), n);
  for (int b = 0; b < n / 256; ++b) {
    uint16_t dh;
    std::memcpy(&dh, &q6[210 * b + 208], 2);
    const double d = std::fabs(fp16_to_fp32(dh));
    for (int s = 0; s < 16; ++s) {
      const float* xs = x.data() + 256 * b + 16 * s;
      double a = 0;
      for (int j = 0; j < 16; ++j) a = std::max(a, double(std::fabs(xs[j])));
      const double bound = (a / 32 + 16 * d) * (1 + 1e-3) + 1e-6 * a;
      for (int j = 0; j < 16; ++j) {
        ASSERT_LE(std::fabs(double(y[256 * b + 16 * s + j]) - xs[j]), bound)
            << "block " << b << " sub " << s << " j " << j;
      }
    }
  }

  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> g(256 * 64);
  for (float& v : g) v = nd(rng);
  const double rms_q4k = rms_error(GgmlType::Q4_K, g, &y);
  const double rms_q6k = rms_error(GgmlType::Q6_K, g, &y);
  EXPECT_LT(rms_q4k, 0.09);
  EXPECT_LT(rms_q6k, 0.022);
  // Same bits per weight as Q4_0 (4.5): the K format with a fitted min should do better.
  EXPECT_LT(rms_q4k, rms_error(GgmlType::Q4_0, g, &y));
  std::cout << "rms error on N(0,1): q4_k " << rms_q4k << ", q6_k " << rms_q6k << "\n";
}

// The ggml-reference quantizers (Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS; their bytes are checked
// against llama-quantize's in tests/quant) on N(0, 1): the error falls with the bits spent.
TEST(QuantQuantize, GgmlReferenceQuantizersOrderByBits) {
  std::mt19937 rng(99);
  std::vector<float> y;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> g(256 * 64);
  for (float& v : g) v = nd(rng);
  const double q2 = rms_error(GgmlType::Q2_K, g, &y), q3 = rms_error(GgmlType::Q3_K, g, &y);
  const double q4 = rms_error(GgmlType::Q4_K, g, &y), q5 = rms_error(GgmlType::Q5_K, g, &y);
  const double nl = rms_error(GgmlType::IQ4_NL, g, &y), xs = rms_error(GgmlType::IQ4_XS, g, &y);
  const double q40 = rms_error(GgmlType::Q4_0, g, &y);
  std::cout << "rms error on N(0,1): q2_k " << q2 << ", q3_k " << q3 << ", q5_k " << q5
            << ", iq4_nl " << nl << ", iq4_xs " << xs << "\n";
  EXPECT_LT(q3, q2);
  EXPECT_LT(q4, q3);
  EXPECT_LT(q5, q4);
  EXPECT_LT(nl, q40);  // same 4.5 bits per weight, non-linear levels
  EXPECT_LT(xs, q40);  // fewer bits (4.25), still better than the linear 4-bit format
  EXPECT_LT(q2, 0.45);
  EXPECT_LT(q5, 0.05);
}

TEST(QuantQuantize, ZeroRowsStayZero) {
  std::vector<float> x(512, 0.0f), y(512, 1.0f);
  std::vector<uint8_t> q(4 * 512);
  for (const GgmlType t :
       {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
        GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q6_K,
        GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q5_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    ASSERT_TRUE(quant_type_writable(t));
    quantize_row(t, x.data(), q.data(), 512);
    dequantize_row(t, q.data(), y.data(), 512);
    for (float v : y) ASSERT_EQ(v, 0.0f) << static_cast<int>(t);
  }
}

}  // namespace
}  // namespace geist
