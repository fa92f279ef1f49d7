// Dequantize and dot for every supported block type, against a deliberately naive decoder
// written here from the format definitions (ggml-common.h): each element's fields are found
// by computing their bit position in the block and reading them one bit at a time.
//
// dequantize_row must agree bit for bit: the expected float is evaluated in the same order
// as ggml's dequantizers (scale products first, e.g. (d*sc)*q - dmin*m), which is part of
// what "bit-identical to llama.cpp" means. dot_row must agree with a double-precision dot of
// the naive values within a stated tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/quant.h"

namespace geist {
namespace {

// Bits [pos, pos + count) of a little-endian byte string, LSB first, one bit at a time.
uint32_t read_bits(const uint8_t* p, int pos, int count) {
  uint32_t v = 0;
  for (int i = 0; i < count; ++i) {
    const int bit = pos + i;
    v |= static_cast<uint32_t>((p[bit / 8] >> (bit % 8)) & 1) << i;
  }
  return v;
}

int32_t sign_extend(uint32_t v, int bits) {
  return (v & (1u << (bits - 1))) ? static_cast<int32_t>(v) - (1 << bits) : static_cast<int32_t>(v);
}

// IEEE binary16 by definition.
float half_at(const uint8_t* p, int byte) {
  const uint32_t h = read_bits(p, 8 * byte, 16);
  const int e = (h >> 10) & 31;
  const int m = h & 1023;
  double v = e == 0 ? std::ldexp(double(m), -24) : std::ldexp(double(1024 + m), e - 25);
  if (e == 31) v = m ? NAN : INFINITY;
  return static_cast<float>((h >> 15) ? -v : v);
}

// One decoded element: its value, and a magnitude (|scale*q| + |offset|) that bounds the
// rounding of a dot product which factors scale and offset out of its sums.
struct Elem {
  float value;
  double mag;
};

using Decoder = std::function<Elem(const uint8_t* block, int e)>;

Elem scaled(float d, int q) { return {static_cast<float>(q) * d, std::fabs(double(d) * q)}; }
Elem affine(float d, int q, float m) {  // q*d + m, as Q4_1/Q5_1 evaluate it
  return {static_cast<float>(q) * d + m, std::fabs(double(d) * q) + std::fabs(double(m))};
}
Elem k_affine(float d, int sc, float dmin, int m, int q) {  // (d*sc)*q - dmin*m
  const float d1 = d * static_cast<float>(sc);
  const float m1 = dmin * static_cast<float>(m);
  return {d1 * static_cast<float>(q) - m1, std::fabs(double(d1) * q) + std::fabs(double(m1))};
}

Elem decode_q4_0(const uint8_t* b, int e) {
  const int q = static_cast<int>(read_bits(b, 16 + 8 * (e % 16) + 4 * (e / 16), 4));
  return scaled(half_at(b, 0), q - 8);
}
Elem decode_q4_1(const uint8_t* b, int e) {
  const int q = static_cast<int>(read_bits(b, 32 + 8 * (e % 16) + 4 * (e / 16), 4));
  return affine(half_at(b, 0), q, half_at(b, 2));
}
Elem decode_q5_0(const uint8_t* b, int e) {
  const int q = static_cast<int>(read_bits(b, 48 + 8 * (e % 16) + 4 * (e / 16), 4) |
                                 (read_bits(b, 16 + e, 1) << 4));
  return scaled(half_at(b, 0), q - 16);
}
Elem decode_q5_1(const uint8_t* b, int e) {
  const int q = static_cast<int>(read_bits(b, 64 + 8 * (e % 16) + 4 * (e / 16), 4) |
                                 (read_bits(b, 32 + e, 1) << 4));
  return affine(half_at(b, 0), q, half_at(b, 2));
}
Elem decode_q8_0(const uint8_t* b, int e) {
  return scaled(half_at(b, 0), sign_extend(read_bits(b, 16 + 8 * e, 8), 8));
}

// Q4_K/Q5_K 6-bit scale and min of sub-block s, from the 12 bytes at byte 4. Sub-blocks 0-3:
// 6 low bits of bytes s (scale) and s+4 (min). 4-7: low 4 bits from byte s+4's low/high
// nibble, top 2 bits from bits 6-7 of bytes s-4 (scale) and s (min).
void k_scale_min_naive(const uint8_t* b, int s, int* sc, int* m) {
  const int base = 8 * 4;
  if (s < 4) {
    *sc = static_cast<int>(read_bits(b, base + 8 * s, 6));
    *m = static_cast<int>(read_bits(b, base + 8 * (s + 4), 6));
  } else {
    *sc = static_cast<int>(read_bits(b, base + 8 * (s + 4), 4) |
                           (read_bits(b, base + 8 * (s - 4) + 6, 2) << 4));
    *m = static_cast<int>(read_bits(b, base + 8 * (s + 4) + 4, 4) |
                          (read_bits(b, base + 8 * s + 6, 2) << 4));
  }
}

Elem decode_q4_k(const uint8_t* b, int e) {
  const int chunk = e / 64, upper = (e % 64) / 32, l = e % 32;
  const int q = static_cast<int>(read_bits(b, 8 * (16 + 32 * chunk + l) + 4 * upper, 4));
  int sc, m;
  k_scale_min_naive(b, e / 32, &sc, &m);
  return k_affine(half_at(b, 0), sc, half_at(b, 2), m, q);
}
Elem decode_q5_k(const uint8_t* b, int e) {
  const int chunk = e / 64, upper = (e % 64) / 32, l = e % 32;
  const int lo = static_cast<int>(read_bits(b, 8 * (48 + 32 * chunk + l) + 4 * upper, 4));
  const int hi = static_cast<int>(read_bits(b, 8 * (16 + l) + 2 * chunk + upper, 1));
  int sc, m;
  k_scale_min_naive(b, e / 32, &sc, &m);
  return k_affine(half_at(b, 0), sc, half_at(b, 2), m, lo + 16 * hi);
}
Elem decode_q6_k(const uint8_t* b, int e) {
  const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
  // Quarters 0,1 use the low nibbles of ql[64h+l], ql[64h+l+32]; quarters 2,3 the high ones.
  const int ql_byte = 64 * half + l + 32 * (quarter % 2);
  const int lo = static_cast<int>(read_bits(b, 8 * ql_byte + 4 * (quarter / 2), 4));
  const int hi = static_cast<int>(read_bits(b, 8 * (128 + 32 * half + l) + 2 * quarter, 2));
  const int sc = sign_extend(read_bits(b, 8 * (192 + e / 16), 8), 8);
  const float d1 = half_at(b, 208) * static_cast<float>(sc);
  const int q = lo + 16 * hi - 32;
  return {d1 * static_cast<float>(q), std::fabs(double(d1) * q)};
}
// Q2_K / Q3_K element e = 128h + 32j + l: its 2 low bits at bits 2j of qs byte 32h + l.
int k_low2_naive(const uint8_t* b, int qs_byte, int e) {
  const int h = e / 128, j = (e % 128) / 32, l = e % 32;
  return static_cast<int>(read_bits(b, 8 * (qs_byte + 32 * h + l) + 2 * j, 2));
}
Elem decode_q2_k(const uint8_t* b, int e) {
  const int s = e / 16;
  const int sc = static_cast<int>(read_bits(b, 8 * s, 4));
  const int m = static_cast<int>(read_bits(b, 8 * s + 4, 4));
  return k_affine(half_at(b, 80), sc, half_at(b, 82), m, k_low2_naive(b, 16, e));
}
Elem decode_q3_k(const uint8_t* b, int e) {
  const int s = e / 16;
  const int lo4 = static_cast<int>(s < 8 ? read_bits(b, 8 * (96 + s), 4)
                                         : read_bits(b, 8 * (96 + s - 8) + 4, 4));
  const int hi2 = static_cast<int>(read_bits(b, 8 * (104 + s % 4) + 2 * (s / 4), 2));
  const int high = static_cast<int>(read_bits(b, 8 * (e % 32) + e / 32, 1));
  const int q = k_low2_naive(b, 32, e) - (high ? 0 : 4);
  const float d1 = half_at(b, 108) * static_cast<float>(lo4 + 16 * hi2 - 32);
  return {d1 * static_cast<float>(q), std::fabs(double(d1) * q)};
}
constexpr int kIq4Table[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                               1,    13,   25,  38,  53,  69,  89,  113};
// The 4-bit index of element i (< 32) of a 16-byte IQ4 block whose quants start at byte qs.
int iq4_index_naive(const uint8_t* b, int qs, int i) {
  return static_cast<int>(read_bits(b, 8 * (qs + i % 16) + 4 * (i / 16), 4));
}
Elem decode_iq4_nl(const uint8_t* b, int e) {
  return scaled(half_at(b, 0), kIq4Table[iq4_index_naive(b, 2, e)]);
}
Elem decode_iq4_xs(const uint8_t* b, int e) {
  const int j = e / 32;
  const int sc = static_cast<int>(read_bits(b, 32 + 4 * j, 4) | (read_bits(b, 16 + 2 * j, 2) << 4));
  const float d1 = half_at(b, 0) * static_cast<float>(sc - 32);
  const int q = kIq4Table[iq4_index_naive(b, 8 + 16 * j, e % 32)];
  return {d1 * static_cast<float>(q), std::fabs(double(d1) * q)};
}
Elem decode_f16(const uint8_t* b, int) {
  const float v = half_at(b, 0);
  return {v, std::fabs(double(v))};
}
Elem decode_bf16(const uint8_t* b, int) {
  const uint32_t h = read_bits(b, 0, 16);
  const int e = (h >> 7) & 255, m = h & 127;
  double v = e == 0 ? std::ldexp(double(m), -133) : std::ldexp(double(128 + m), e - 134);
  if (h >> 15) v = -v;
  return {static_cast<float>(v), std::fabs(v)};
}
Elem decode_f32(const uint8_t* b, int) {
  float v;
  std::memcpy(&v, b, 4);
  return {v, std::fabs(double(v))};
}

struct TypeCase {
  const char* name;
  GgmlType type;
  int block_elems;
  int block_bytes;
  std::vector<int> f16_offsets;  // byte offsets of the f16 fields, given finite values
  Decoder decode;
};

std::vector<TypeCase> all_cases() {
  return {
      {"f32", GgmlType::F32, 1, 4, {}, decode_f32},
      {"f16", GgmlType::F16, 1, 2, {0}, decode_f16},
      {"bf16", GgmlType::BF16, 1, 2, {}, decode_bf16},
      {"q4_0", GgmlType::Q4_0, 32, 18, {0}, decode_q4_0},
      {"q4_1", GgmlType::Q4_1, 32, 20, {0, 2}, decode_q4_1},
      {"q5_0", GgmlType::Q5_0, 32, 22, {0}, decode_q5_0},
      {"q5_1", GgmlType::Q5_1, 32, 24, {0, 2}, decode_q5_1},
      {"q8_0", GgmlType::Q8_0, 32, 34, {0}, decode_q8_0},
      {"q4_k", GgmlType::Q4_K, 256, 144, {0, 2}, decode_q4_k},
      {"q5_k", GgmlType::Q5_K, 256, 176, {0, 2}, decode_q5_k},
      {"q6_k", GgmlType::Q6_K, 256, 210, {208}, decode_q6_k},
      {"q2_k", GgmlType::Q2_K, 256, 84, {80, 82}, decode_q2_k},
      {"q3_k", GgmlType::Q3_K, 256, 110, {108}, decode_q3_k},
      {"iq4_nl", GgmlType::IQ4_NL, 32, 18, {0}, decode_iq4_nl},
      {"iq4_xs", GgmlType::IQ4_XS, 256, 136, {0}, decode_iq4_xs},
  };
}

// Random bytes, then finite f16 fields (any sign, exponents 2^-14..2^5 so sums stay tame)
// and, for the float types, finite values.
std::vector<uint8_t> random_blocks(const TypeCase& c, int n_blocks, std::mt19937& rng) {
  std::vector<uint8_t> bytes(static_cast<size_t>(n_blocks) * c.block_bytes);
  for (auto& v : bytes) v = static_cast<uint8_t>(rng());
  std::uniform_int_distribution<int> exp(1, 20);
  for (int b = 0; b < n_blocks; ++b) {
    uint8_t* blk = bytes.data() + static_cast<size_t>(b) * c.block_bytes;
    for (int off : c.f16_offsets) {
      const uint16_t h =
          static_cast<uint16_t>((rng() & 0x83ffu) | (static_cast<uint32_t>(exp(rng)) << 10));
      std::memcpy(blk + off, &h, 2);
    }
    if (c.type == GgmlType::BF16) blk[1] = static_cast<uint8_t>((blk[1] & 0x80) | (exp(rng) + 50));
    if (c.type == GgmlType::F32) blk[3] = static_cast<uint8_t>((blk[3] & 0x80) | (exp(rng) + 50));
  }
  return bytes;
}

TEST(QuantBlocks, AllTypesSupported) {
  for (const TypeCase& c : all_cases()) EXPECT_TRUE(quant_type_supported(c.type)) << c.name;
  for (const TypeCase& c : all_cases()) EXPECT_TRUE(quant_type_writable(c.type)) << c.name;
  // Types geist cannot compute (the loaders refuse them, naming quant_supported_types()).
  for (GgmlType t : {GgmlType::IQ2_XXS, GgmlType::IQ3_S, GgmlType::IQ1_M, GgmlType::TQ2_0,
                     GgmlType::MXFP4, GgmlType::Q8_K}) {
    EXPECT_FALSE(quant_type_supported(t)) << ggml_type_name(t);
    EXPECT_EQ(std::string(quant_supported_types()).find(ggml_type_name(t)), std::string::npos);
  }
  for (const TypeCase& c : all_cases()) {
    EXPECT_NE(std::string(quant_supported_types()).find(ggml_type_name(c.type)), std::string::npos)
        << c.name;
  }
}

// The geometry this file uses (from ggml-common.h) against the formats layer's table, which
// callers use to size rows.
TEST(QuantBlocks, GeometryAgreesWithTypeTraits) {
  for (const TypeCase& c : all_cases()) {
    const GgmlTypeTraits tr = ggml_type_traits(c.type);
    EXPECT_EQ(tr.block_size, static_cast<uint32_t>(c.block_elems)) << c.name;
    EXPECT_EQ(tr.type_size, static_cast<uint32_t>(c.block_bytes)) << c.name;
  }
}

TEST(QuantBlocks, DequantizeMatchesNaiveDecoderBitwise) {
  std::mt19937 rng(2024);
  for (const TypeCase& c : all_cases()) {
    SCOPED_TRACE(c.name);
    const int n_blocks = c.block_elems == 1 ? 1000 : 4096 / c.block_elems;
    const int n = n_blocks * c.block_elems;
    for (int rep = 0; rep < 8; ++rep) {
      const std::vector<uint8_t> bytes = random_blocks(c, n_blocks, rng);
      std::vector<float> got(n, NAN);
      dequantize_row(c.type, bytes.data(), got.data(), n);
      for (int i = 0; i < n; ++i) {
        const uint8_t* blk = bytes.data() + static_cast<size_t>(i / c.block_elems) * c.block_bytes;
        const float want = c.decode(blk, i % c.block_elems).value;
        uint32_t gb, wb;
        std::memcpy(&gb, &got[i], 4);
        std::memcpy(&wb, &want, 4);
        ASSERT_EQ(gb, wb) << "element " << i << ": got " << got[i] << " want " << want;
      }
    }
  }
}

TEST(QuantBlocks, DotMatchesNaiveDecoderWithinTolerance) {
  std::mt19937 rng(77);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const TypeCase& c : all_cases()) {
    SCOPED_TRACE(c.name);
    for (const int n_blocks : {1, 3, 16}) {
      const int n = n_blocks * c.block_elems * (c.block_elems == 1 ? 37 : 1);
      const int nb = n / c.block_elems;
      const std::vector<uint8_t> bytes = random_blocks(c, nb, rng);
      std::vector<float> x(n);
      for (auto& v : x) v = nd(rng);
      double ref = 0, mag = 0;
      for (int i = 0; i < n; ++i) {
        const uint8_t* blk = bytes.data() + static_cast<size_t>(i / c.block_elems) * c.block_bytes;
        const Elem w = c.decode(blk, i % c.block_elems);
        ref += double(w.value) * x[i];
        mag += w.mag * std::fabs(double(x[i]));
      }
      // Float accumulation of at most a few thousand terms: each rounding is 2^-24 relative
      // to a partial sum bounded by `mag`; 1e-5 * mag is about 170 such roundings.
      const float got = dot_row(c.type, bytes.data(), x.data(), n);
      EXPECT_NEAR(got, ref, 1e-5 * mag) << "n=" << n;
      // And consistent with dequantize-then-dot.
      std::vector<float> w(n);
      dequantize_row(c.type, bytes.data(), w.data(), n);
      double ref2 = 0;
      for (int i = 0; i < n; ++i) ref2 += double(w[i]) * x[i];
      EXPECT_NEAR(got, ref2, 1e-5 * mag) << "n=" << n;
    }
  }
}

TEST(QuantBlocks, DotOfEmptyRowIsZero) {
  for (const TypeCase& c : all_cases()) EXPECT_EQ(dot_row(c.type, nullptr, nullptr, 0), 0.0f);
}

// ---- Hand-computed blocks ---------------------------------------------------------------

TEST(QuantBlocks, KnownQ8_0Block) {
  uint8_t blk[34];
  blk[0] = 0x00;  // d = 0.5 = f16 0x3800
  blk[1] = 0x38;
  for (int j = 0; j < 32; ++j) blk[2 + j] = static_cast<uint8_t>(0x80 + j);  // -128..-97
  float y[32];
  dequantize_row(GgmlType::Q8_0, blk, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], -64.0f + 0.5f * j) << j;
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = (j % 2) ? 1.0f : 0.0f;
  // Sum over odd j of (-64 + j/2) = 16 * -64 + (1+3+...+31)/2 = -1024 + 128.
  EXPECT_EQ(dot_row(GgmlType::Q8_0, blk, x, 32), -896.0f);
}

TEST(QuantBlocks, KnownQ4_0Block) {
  uint8_t blk[18] = {0x00, 0x40};  // d = 2
  for (int j = 0; j < 16; ++j) blk[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(GgmlType::Q4_0, blk, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * (j - 8)) << j;
    EXPECT_EQ(y[16 + j], 2.0f * (7 - j)) << j;
  }
}

TEST(QuantBlocks, KnownQ5_0Block) {
  // d = 1; qh = 0xffff0000: only elements 16..31 carry the fifth bit.
  uint8_t blk[22] = {0x00, 0x3c, 0x00, 0x00, 0xff, 0xff};
  for (int j = 0; j < 16; ++j) blk[6 + j] = static_cast<uint8_t>(j | (j << 4));
  float y[32];
  dequantize_row(GgmlType::Q5_0, blk, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], static_cast<float>(j - 16)) << j;
    EXPECT_EQ(y[16 + j], static_cast<float>(j)) << j;
  }
}

TEST(QuantBlocks, KnownQ4_KBlock) {
  // d = 1, dmin = 0.5; scales (1,2,3,4,36,37,38,39), mins (0,2,4,6,40,41,42,43) packed by
  // hand; every qs byte 0x5a, so even sub-blocks read q = 10 and odd ones q = 5.
  uint8_t blk[144] = {0x00, 0x3c, 0x00, 0x38, 0x81, 0x82, 0x83, 0x84,
                      0x80, 0x82, 0x84, 0x86, 0x84, 0x95, 0xa6, 0xb7};
  std::memset(blk + 16, 0x5a, 128);
  const float want[8] = {10, 9, 28, 17, 340, 164.5f, 359, 173.5f};
  float y[256];
  dequantize_row(GgmlType::Q4_K, blk, y, 256);
  for (int e = 0; e < 256; ++e) ASSERT_EQ(y[e], want[e / 32]) << e;
  std::vector<float> ones(256, 1.0f);
  float total = 0;
  for (float v : want) total += 32 * v;
  EXPECT_EQ(dot_row(GgmlType::Q4_K, blk, ones.data(), 256), total);
}

TEST(QuantBlocks, KnownQ6_KBlock) {
  // d = 0.25, scales[s] = s - 8; ql bytes 0x21, qh bytes 0b11'10'01'00: the four quarters of
  // each 128 read codes 1|0<<4, 1|1<<4, 2|2<<4, 2|3<<4 = 1, 17, 34, 50, minus 32.
  uint8_t blk[210];
  std::memset(blk, 0x21, 128);
  std::memset(blk + 128, 0xe4, 64);
  for (int s = 0; s < 16; ++s) blk[192 + s] = static_cast<uint8_t>(s - 8);
  blk[208] = 0x00;
  blk[209] = 0x34;
  const int code[4] = {-31, -15, 2, 18};
  float y[256];
  dequantize_row(GgmlType::Q6_K, blk, y, 256);
  for (int e = 0; e < 256; ++e) {
    ASSERT_EQ(y[e], 0.25f * (e / 16 - 8) * code[(e % 128) / 32]) << e;
  }
}

}  // namespace
}  // namespace geist
