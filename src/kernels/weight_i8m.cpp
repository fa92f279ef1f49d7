// I8M re-encoding (weight_i8m.h). Every value of the five types is an integer code times an f32
// factor minus an f32 min, each factor exact in f32 (an f16 times an integer of at most 6 bits),
// so the 8-bit codes with those factors hold the file's values exactly.
#include "kernels/weight_i8m.h"

#include <cstring>

#include "base/status.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd/matmul_simd.h"

namespace geist::i8m {
namespace {

using quant_detail::load_u16;
using quant_detail::load_u32;

constexpr int64_t kGroup = 16;

float h2f(const uint8_t* p) { return fp16_to_fp32(load_u16(p)); }

// Q4_1 / Q5_1: value = q * d + m.
void legacy_block(bool five, const uint8_t* blk, Block* out) {
  out->s = h2f(blk);
  out->m = -h2f(blk + 2);
  out->m0 = out->m1 = 1;
  const uint8_t* qs = blk + (five ? 8 : 4);
  const uint32_t qh = five ? load_u32(blk + 4) : 0;
  for (int j = 0; j < 16; ++j) {
    out->w[j] = static_cast<int8_t>((qs[j] & 15) | (((qh >> j) & 1) << 4));
    out->w[j + 16] = static_cast<int8_t>((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
  }
}

// Q5_K sub-block k (0..7) of the super-block at sb: value = d * sc_k * q - dmin * m_k.
void q5_k_block(const uint8_t* sb, int k, Block* out) {
  uint8_t sc, mn;
  quant_detail::k_scale_min(sb + 4, k, &sc, &mn);
  out->s = h2f(sb) * static_cast<float>(sc);
  out->m = h2f(sb + 2) * static_cast<float>(mn);
  out->m0 = out->m1 = 1;
  const int c = k / 2, hi = k % 2;
  const uint8_t* qh = sb + 16;
  const uint8_t* qs = sb + 48 + 32 * c;
  for (int l = 0; l < 32; ++l) {
    out->w[l] =
        static_cast<int8_t>(((qs[l] >> (4 * hi)) & 15) | (((qh[l] >> (2 * c + hi)) & 1) << 4));
  }
}

// Q2_K 32-block k of the super-block at sb: halves 2k, 2k + 1 of 16 elements, value =
// d * sc_h * q - dmin * m_h = d * (sc_h * q) - dmin * m_h.
void q2_k_block(const uint8_t* sb, int k, Block* out) {
  out->s = h2f(sb + 80);
  out->m = h2f(sb + 82);
  out->m0 = static_cast<int16_t>(sb[2 * k] >> 4);
  out->m1 = static_cast<int16_t>(sb[2 * k + 1] >> 4);
  const int h = k / 4, j = k % 4;
  for (int l = 0; l < 32; ++l) {
    const int code = (sb[16 + 32 * h + l] >> (2 * j)) & 3;
    out->w[l] = static_cast<int8_t>((sb[2 * k + l / 16] & 15) * code);
  }
}

// IQ4_XS 32-block k of the super-block at sb: value = d * (ls - 32) * kIq4Values[q].
void iq4_xs_block(const uint8_t* sb, int k, Block* out) {
  out->s = h2f(sb) * static_cast<float>(quant_detail::iq4_xs_scale(sb, k) - 32);
  out->m = 0.0f;
  out->m0 = out->m1 = 0;
  const uint8_t* qs = sb + 8 + 16 * k;
  for (int j = 0; j < 16; ++j) {
    out->w[j] = quant_detail::kIq4Values[qs[j] & 15];
    out->w[j + 16] = quant_detail::kIq4Values[qs[j] >> 4];
  }
}

}  // namespace

void file_block(GgmlType t, const uint8_t* row, int64_t b, Block* out) {
  switch (t) {
    case GgmlType::Q4_1:
      legacy_block(false, row + b * quant_detail::kQ4_1Bytes, out);
      return;
    case GgmlType::Q5_1:
      legacy_block(true, row + b * quant_detail::kQ5_1Bytes, out);
      return;
    case GgmlType::Q5_K:
      q5_k_block(row + b / 8 * quant_detail::kQ5_KBytes, static_cast<int>(b % 8), out);
      return;
    case GgmlType::Q2_K:
      q2_k_block(row + b / 8 * quant_detail::kQ2_KBytes, static_cast<int>(b % 8), out);
      return;
    case GgmlType::IQ4_XS:
      iq4_xs_block(row + b / 8 * ggml_type_traits(GgmlType::IQ4_XS).type_size,
                   static_cast<int>(b % 8), out);
      return;
    default:
      GEIST_CHECK(false, "i8m::file_block: not an I8M type");
  }
}

namespace {

// The 4-bit index of IQ4_XS value v (kIq4Values holds 16 distinct values).
uint8_t iq4_index(int8_t v) {
  for (int i = 0; i < 16; ++i) {
    if (quant_detail::kIq4Values[i] == v) return static_cast<uint8_t>(i);
  }
  GEIST_CHECK(false, "i8m: not an IQ4 value");
  return 0;
}

// Block b's row r in the group block at blk (matmul_simd.h's I8M forms).
void store_block(simd::I8mForm f, const Block& v, int64_t r, uint8_t* blk) {
  const int64_t codes = simd::i8m_codes_at(f);
  std::memcpy(blk + simd::kI8mScaleAt + 4 * r, &v.s, 4);
  if (f != simd::I8mForm::IQ4) std::memcpy(blk + simd::kI8mMinAt + 4 * r, &v.m, 4);
  if (f == simd::I8mForm::CODES8) {
    std::memcpy(blk + simd::kI8mWeightsAt + 4 * r, &v.m0, 2);
    std::memcpy(blk + simd::kI8mWeightsAt + 4 * r + 2, &v.m1, 2);
    for (int i = 0; i < 32; ++i) {
      blk[codes + ((i / 4) * kGroup + r) * 4 + i % 4] =
          static_cast<uint8_t>(static_cast<uint8_t>(v.w[i]) ^ 0x80u);
    }
    return;
  }
  for (int i = 0; i < 16; ++i) {
    const bool iq4 = f == simd::I8mForm::IQ4;
    const uint8_t lo = iq4 ? iq4_index(v.w[i]) : static_cast<uint8_t>(v.w[i]);
    const uint8_t hi = iq4 ? iq4_index(v.w[i + 16]) : static_cast<uint8_t>(v.w[i + 16]);
    blk[codes + ((i / 4) * kGroup + r) * 4 + i % 4] = static_cast<uint8_t>(lo | hi << 4);
  }
}

// Row r of the group block at blk, back as a Block.
void load_block(simd::I8mForm f, const uint8_t* blk, int64_t r, Block* v) {
  const int64_t codes = simd::i8m_codes_at(f);
  std::memcpy(&v->s, blk + simd::kI8mScaleAt + 4 * r, 4);
  v->m = 0.0f;
  v->m0 = v->m1 = f == simd::I8mForm::NIBBLES ? 1 : 0;
  if (f != simd::I8mForm::IQ4) std::memcpy(&v->m, blk + simd::kI8mMinAt + 4 * r, 4);
  if (f == simd::I8mForm::CODES8) {
    std::memcpy(&v->m0, blk + simd::kI8mWeightsAt + 4 * r, 2);
    std::memcpy(&v->m1, blk + simd::kI8mWeightsAt + 4 * r + 2, 2);
    for (int i = 0; i < 32; ++i) {
      v->w[i] = static_cast<int8_t>(blk[codes + ((i / 4) * kGroup + r) * 4 + i % 4] ^ 0x80u);
    }
    return;
  }
  for (int i = 0; i < 16; ++i) {
    const uint8_t byte = blk[codes + ((i / 4) * kGroup + r) * 4 + i % 4];
    const bool iq4 = f == simd::I8mForm::IQ4;
    v->w[i] = iq4 ? quant_detail::kIq4Values[byte & 15] : static_cast<int8_t>(byte & 15);
    v->w[i + 16] = iq4 ? quant_detail::kIq4Values[byte >> 4] : static_cast<int8_t>(byte >> 4);
  }
}

}  // namespace

void to_groups16(const WeightMatrix& w, uint8_t* dst) {
  const simd::I8mForm f = simd::i8m_form(w.type);
  const int64_t gb = simd::i8m_group_block(f);
  const int64_t nb = w.n_in / 32;
  const int64_t groups = (w.n_out + kGroup - 1) / kGroup;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = dst + (g * nb + b) * gb;
      for (int64_t r = 0; r < kGroup; ++r) {
        const int64_t row = g * kGroup + r;
        Block v;  // padding rows: scale and min 0
        if (row < w.n_out) {
          file_block(w.type, w.data + static_cast<size_t>(row) * w.row_bytes, b, &v);
        } else if (f == simd::I8mForm::IQ4) {
          v.w.fill(quant_detail::kIq4Values[8]);  // any valid index
        }
        store_block(f, v, r, blk);
      }
    }
  }
}

void get_row(const WeightMatrix& w, int64_t row, float* dst) {
  const simd::I8mForm f = simd::i8m_form(w.type);
  const int64_t gb = simd::i8m_group_block(f);
  const int64_t nb = w.n_in / 32, r = row % kGroup;
  const uint8_t* grp = w.data + static_cast<size_t>(row / kGroup) * kGroup * w.row_bytes;
  for (int64_t b = 0; b < nb; ++b) {
    Block v;
    load_block(f, grp + b * gb, r, &v);
    // Both products are exact in f32, so this is the file's dequantized value, bit for bit.
    const float ml[2] = {v.m * static_cast<float>(v.m0), v.m * static_cast<float>(v.m1)};
    for (int i = 0; i < 32; ++i) dst[b * 32 + i] = v.s * static_cast<float>(v.w[i]) - ml[i / 16];
  }
}

}  // namespace geist::i8m
