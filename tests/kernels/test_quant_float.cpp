// fp16 / bf16 conversions and the F32/F16/BF16 rows.
//
// Oracles: decoding is checked against the IEEE definitions evaluated with ldexp; encoding
// against the compiler's _Float16 conversion (libgcc's soft-float, independent of our code)
// and against a nearest-even property check written from the definition.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/quant.h"
#include "support/compiler_half.h"

namespace geist {
namespace {

// IEEE binary16 by definition: (-1)^s * 2^(e-15) * 1.m, or 2^-14 * 0.m when e == 0.
double half_value(uint16_t h) {
  const int s = h >> 15;
  const int e = (h >> 10) & 31;
  const int m = h & 1023;
  double v;
  if (e == 31) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), -24);
  } else {
    v = std::ldexp(static_cast<double>(1024 + m), e - 25);
  }
  return s ? -v : v;
}

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

TEST(QuantFloat, Fp16DecodeAllHalvesMatchesDefinition) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = fp16_to_fp32(static_cast<uint16_t>(h));
    const double want = half_value(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      EXPECT_EQ(bits_of(got) >> 31, h >> 15) << "NaN sign, half " << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << h;
      ASSERT_EQ(std::signbit(got), (h >> 15) != 0) << std::hex << h;  // -0 stays -0
    }
  }
}

TEST(QuantFloat, Fp16RoundTripsAllHalves) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t back = fp32_to_fp16(fp16_to_fp32(static_cast<uint16_t>(h)));
    if (((h >> 10) & 31) == 31 && (h & 1023) != 0) {
      EXPECT_TRUE((back & 0x7c00) == 0x7c00 && (back & 0x3ff) != 0) << std::hex << h;
      EXPECT_EQ(back >> 15, h >> 15);
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

TEST(QuantFloat, Fp16EncodeSpecialValues) {
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);   // largest finite half
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7bff);  // below the midpoint to 2^16
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);   // midpoint, odd mantissa: up to inf
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 2^-24: even
  EXPECT_EQ(fp32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);     // 1.5 * 2^-24 ties to 2
  EXPECT_EQ(fp32_to_fp16(std::ldexp(5.0f, -25)), 0x0002);     // 2.5 * 2^-24 ties to 2
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.5f, -24)), 0x0400);  // rounds into the first normal
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie, even stays
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, odd goes up
  const uint16_t qnan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(qnan & 0x7c00, 0x7c00);
  EXPECT_NE(qnan & 0x3ff, 0);
  // A signalling NaN whose payload sits only in the low 13 bits must not become inf.
  const uint16_t snan = fp32_to_fp16(from_bits(0xff800001u));
  EXPECT_EQ(snan & 0xfc00, 0xfc00);
  EXPECT_NE(snan & 0x3ff, 0);
}

#ifdef GEIST_TEST_COMPILER_HALF
// libgcc's float -> _Float16 conversion, an implementation that is not ours.
uint16_t compiler_fp16(float f) {
  const GEIST_TEST_COMPILER_HALF h = static_cast<GEIST_TEST_COMPILER_HALF>(f);
  uint16_t u;
  std::memcpy(&u, &h, sizeof(u));
  return u;
}

void expect_matches_compiler(float f) {
  if (std::isnan(f)) return;
  ASSERT_EQ(fp32_to_fp16(f), compiler_fp16(f))
      << std::hexfloat << f << " bits " << std::hex << bits_of(f);
}

TEST(QuantFloat, Fp16EncodeMatchesCompilerOnHalvesAndMidpoints) {
  // Every half, every midpoint between neighbours (the ties), and one float either side.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    for (const uint32_t sign : {0u, 0x8000u}) {
      const double lo = half_value(static_cast<uint16_t>(h | sign));
      const double hi = half_value(static_cast<uint16_t>((h + 1) | sign));
      const float mid = static_cast<float>((lo + hi) / 2);  // exact: needs <= 12 bits
      expect_matches_compiler(static_cast<float>(lo));
      expect_matches_compiler(mid);
      expect_matches_compiler(std::nextafter(mid, 0.0f));
      expect_matches_compiler(std::nextafter(mid, 2.0f * mid));
    }
  }
}

TEST(QuantFloat, Fp16EncodeMatchesCompilerOnRandomFloats) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 2000000; ++i) expect_matches_compiler(from_bits(rng()));
  // Concentrate on the half range, where the rounding work happens.
  std::uniform_int_distribution<uint32_t> exp(100, 144);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t u = (rng() & 0x807fffffu) | (exp(rng) << 23);
    expect_matches_compiler(from_bits(u));
  }
}
#else
TEST(QuantFloat, Fp16EncodeMatchesCompiler) {
  GTEST_SKIP() << "compiler has no binary16 type: fp16 encode not cross-checked against it";
}
#endif

// Nearest-even bf16 by definition: of the two bf16 values bracketing f (truncate, next up),
// pick the nearer; on a tie the one with an even last bit.
uint16_t bf16_by_definition(float f) {
  const uint32_t u = bits_of(f);
  const uint32_t lo = u & 0xffff0000u;
  const uint32_t hi = lo + 0x10000u;  // may be inf: the right answer past the largest
  const double dlo = std::fabs(static_cast<double>(from_bits(lo)) - f);
  const double dhi = (hi & 0x7fffffffu) == 0x7f800000u
                         ? std::fabs(std::ldexp(1.0, 128) - std::fabs(static_cast<double>(f)))
                         : std::fabs(static_cast<double>(from_bits(hi)) - f);
  if (dlo < dhi) return static_cast<uint16_t>(lo >> 16);
  if (dhi < dlo) return static_cast<uint16_t>(hi >> 16);
  return static_cast<uint16_t>(((lo >> 16) & 1) ? hi >> 16 : lo >> 16);
}

TEST(QuantFloat, Bf16DecodeAllValues) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = bf16_to_fp32(static_cast<uint16_t>(h));
    const int e = (h >> 7) & 255;
    const int m = h & 127;
    if (e == 255) {
      ASSERT_EQ(std::isnan(got), m != 0) << h;
      ASSERT_EQ(std::isinf(got), m == 0) << h;
      continue;
    }
    double v = e == 0 ? std::ldexp(static_cast<double>(m), -133)
                      : std::ldexp(static_cast<double>(128 + m), e - 134);
    if (h >> 15) v = -v;
    ASSERT_EQ(static_cast<double>(got), v) << h;
  }
}

TEST(QuantFloat, Bf16EncodeNearestEven) {
  std::mt19937 rng(99);
  for (int i = 0; i < 2000000; ++i) {
    const float f = from_bits(rng());
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_bf16(f), bf16_by_definition(f)) << std::hex << bits_of(f);
  }
  // Exact ties: the 16 dropped bits are 0x8000.
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f808000u)), 0x3f80);  // even stays
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f818000u)), 0x3f82);  // odd rounds up
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
  // NaNs stay NaN (even one whose payload is only in the dropped bits), sign kept.
  for (const uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u}) {
    const uint16_t b = fp32_to_bf16(from_bits(nan));
    EXPECT_TRUE(std::isnan(bf16_to_fp32(b))) << std::hex << nan;
    EXPECT_EQ(b >> 15, nan >> 31);
  }
}

TEST(QuantFloat, FloatRowsRoundTripAndDot) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  const int n = 257;  // block size 1: any length, including odd ones
  std::vector<float> x(n), y(n), back(n);
  for (auto& v : x) v = nd(rng);
  for (auto& v : y) v = nd(rng);

  std::vector<uint8_t> f32(4 * n), f16(2 * n), b16(2 * n);
  quantize_row(GgmlType::F32, x.data(), f32.data(), n);
  quantize_row(GgmlType::F16, x.data(), f16.data(), n);
  quantize_row(GgmlType::BF16, x.data(), b16.data(), n);
  EXPECT_EQ(std::memcmp(f32.data(), x.data(), 4 * n), 0);

  struct Case {
    GgmlType t;
    const std::vector<uint8_t>* bytes;
    double rel;  // relative precision of the format: half an ulp
  };
  for (const Case& c : {Case{GgmlType::F32, &f32, 0.0}, Case{GgmlType::F16, &f16, 0x1p-11},
                        Case{GgmlType::BF16, &b16, 0x1p-8}}) {
    dequantize_row(c.t, c.bytes->data(), back.data(), n);
    double ref = 0, mag = 0;
    for (int i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, c.bytes->data() + 2 * i, 2);
      if (c.t == GgmlType::F16) {
        ASSERT_EQ(static_cast<double>(back[i]), half_value(h));
      }
      if (c.t == GgmlType::BF16) {
        ASSERT_EQ(bits_of(back[i]), static_cast<uint32_t>(h) << 16);
      }
      ASSERT_LE(std::fabs(back[i] - x[i]), c.rel * std::fabs(x[i])) << i;
      ref += static_cast<double>(back[i]) * y[i];
      mag += std::fabs(static_cast<double>(back[i]) * y[i]);
    }
    // f32 accumulation of n products: well inside n * 2^-24 of the magnitude sum.
    EXPECT_NEAR(dot_row(c.t, c.bytes->data(), y.data(), n), ref, 1e-5 * mag);
  }
}

}  // namespace
}  // namespace geist
