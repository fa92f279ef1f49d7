// I8M re-encoding (weight_i8m.h). Every value of the per-block types (Q4_1, Q5_1) is an integer
// code times an f16 factor minus an f16 min, so the packed codes with those factors hold the
// file's values exactly; Q2_K, Q3_K, Q5_K and IQ4_XS keep the file's bytes.
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

}  // namespace

void file_block(GgmlType t, const uint8_t* row, int64_t b, Block* out) {
  switch (t) {
    case GgmlType::Q4_1:
      legacy_block(false, row + b * quant_detail::kQ4_1Bytes, out);
      return;
    case GgmlType::Q5_1:
      legacy_block(true, row + b * quant_detail::kQ5_1Bytes, out);
      return;
    default:
      GEIST_CHECK(false, "i8m::file_block: not a per-block I8M type");
  }
}

namespace {

// Block b's row r in the group block at blk (matmul_simd.h's per-block I8M forms).
void store_block(simd::I8mForm f, const Block& v, int64_t r, uint8_t* blk) {
  const int64_t codes = simd::i8m_codes_at(f);
  // f16 values (Q4_1 / Q5_1: d and -m), so the conversions are exact.
  const uint16_t sh = fp32_to_fp16(v.s), mh = fp32_to_fp16(v.m);
  std::memcpy(blk + simd::kI8mScaleAt + 2 * r, &sh, 2);
  std::memcpy(blk + simd::kI8mMinAt + 2 * r, &mh, 2);
  uint32_t high = 0;  // NIBBLES5: byte k, bit u: element 4u + k; bit 4 + u: element 16 + 4u + k
  for (int i = 0; i < 16; ++i) {
    const auto lo = static_cast<uint8_t>(v.w[i] & 15), hi = static_cast<uint8_t>(v.w[i + 16] & 15);
    blk[codes + ((i / 4) * kGroup + r) * 4 + i % 4] = static_cast<uint8_t>(lo | hi << 4);
    const int k = i % 4, u = i / 4;
    high |= static_cast<uint32_t>((v.w[i] >> 4) & 1) << (8 * k + u);
    high |= static_cast<uint32_t>((v.w[i + 16] >> 4) & 1) << (8 * k + 4 + u);
  }
  if (f == simd::I8mForm::NIBBLES5) std::memcpy(blk + simd::kI8mHighAt + 4 * r, &high, 4);
}

// Row r of the group block at blk, back as a Block.
void load_block(simd::I8mForm f, const uint8_t* blk, int64_t r, Block* v) {
  const int64_t codes = simd::i8m_codes_at(f);
  v->s = fp16_to_fp32(load_u16(blk + simd::kI8mScaleAt + 2 * r));
  v->m = fp16_to_fp32(load_u16(blk + simd::kI8mMinAt + 2 * r));
  v->m0 = v->m1 = 1;
  uint32_t high = 0;
  if (f == simd::I8mForm::NIBBLES5) std::memcpy(&high, blk + simd::kI8mHighAt + 4 * r, 4);
  for (int i = 0; i < 16; ++i) {
    const uint8_t byte = blk[codes + ((i / 4) * kGroup + r) * 4 + i % 4];
    const int k = i % 4, u = i / 4;
    const int h0 = static_cast<int>((high >> (8 * k + u)) & 1);
    const int h1 = static_cast<int>((high >> (8 * k + 4 + u)) & 1);
    v->w[i] = static_cast<int8_t>((byte & 15) | h0 << 4);
    v->w[i + 16] = static_cast<int8_t>((byte >> 4) | h1 << 4);
  }
}

// Q2K / Q3K / Q5K: each row's super-blocks (84 / 110 / 176 bytes) transposed over the group's 16
// rows in 4-byte units, then (Q3K) the 2 bytes left, its d, of row r at units * 64 + 2 * r; the
// file's bytes unchanged, padding rows all zero (d = 0).
void super_to_groups16(const WeightMatrix& w, uint8_t* dst) {
  const int64_t bytes = ggml_type_traits(w.type).type_size, units = bytes / 4, tail = bytes % 4;
  static const uint8_t kZero[quant_detail::kQ5_KBytes] = {};
  const int64_t nsb = w.n_in / 256;
  const int64_t groups = (w.n_out + kGroup - 1) / kGroup;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t s = 0; s < nsb; ++s) {
      uint8_t* sb = dst + (g * nsb + s) * kGroup * bytes;
      for (int64_t r = 0; r < kGroup; ++r) {
        const int64_t row = g * kGroup + r;
        const uint8_t* src =
            row < w.n_out ? w.data + static_cast<size_t>(row) * w.row_bytes + s * bytes : kZero;
        for (int64_t u = 0; u < units; ++u) std::memcpy(sb + (u * kGroup + r) * 4, src + 4 * u, 4);
        std::memcpy(sb + units * kGroup * 4 + r * tail, src + 4 * units, static_cast<size_t>(tail));
      }
    }
  }
}

}  // namespace

void to_groups16(const WeightMatrix& w, uint8_t* dst) {
  const simd::I8mForm f = simd::i8m_form(w.type);
  if (simd::i8m_super_form(f)) {
    super_to_groups16(w, dst);
    return;
  }
  const int64_t gb = simd::i8m_group_block(f);
  const int64_t nb = w.n_in / 32;
  const int64_t groups = (w.n_out + kGroup - 1) / kGroup;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = dst + (g * nb + b) * gb;
      for (int64_t r = 0; r < kGroup; ++r) {
        const int64_t row = g * kGroup + r;
        Block v;  // padding rows: scale and min 0
        if (row < w.n_out)
          file_block(w.type, w.data + static_cast<size_t>(row) * w.row_bytes, b, &v);
        store_block(f, v, r, blk);
      }
    }
  }
}

void get_row(const WeightMatrix& w, int64_t row, float* dst) {
  const simd::I8mForm f = simd::i8m_form(w.type);
  const int64_t r = row % kGroup;
  const uint8_t* grp = w.data + static_cast<size_t>(row / kGroup) * kGroup * w.row_bytes;
  if (simd::i8m_super_form(f)) {  // the file's super-blocks back
    const int64_t bytes = ggml_type_traits(w.type).type_size, units = bytes / 4, tail = bytes % 4;
    uint8_t file[quant_detail::kQ5_KBytes];
    for (int64_t s = 0; s < w.n_in / 256; ++s) {
      const uint8_t* sb = grp + s * kGroup * bytes;
      for (int64_t u = 0; u < units; ++u) std::memcpy(file + 4 * u, sb + (u * kGroup + r) * 4, 4);
      std::memcpy(file + 4 * units, sb + units * kGroup * 4 + r * tail, static_cast<size_t>(tail));
      dequantize_row(w.type, file, dst + s * 256, 256);
    }
    return;
  }
  const int64_t gb = simd::i8m_group_block(f);
  const int64_t nb = w.n_in / 32;
  for (int64_t b = 0; b < nb; ++b) {
    Block v;
    load_block(f, grp + b * gb, r, &v);
    // Both products are exact in f32, so this is the file's dequantized value, bit for bit.
    const float ml[2] = {v.m * static_cast<float>(v.m0), v.m * static_cast<float>(v.m1)};
    for (int i = 0; i < 32; ++i) dst[b * 32 + i] = v.s * static_cast<float>(v.w[i]) - ml[i / 16];
  }
}

}  // namespace geist::i8m
