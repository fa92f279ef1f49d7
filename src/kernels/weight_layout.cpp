// The GROUPS16 weight layout (matmul.h): conversion from GGUF rows, and one row back.
#include <cstring>

#include "base/status.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd/matmul_q8_packed.h"
#include "kernels/simd/matmul_simd.h"
#include "kernels/weight_i8m.h"

namespace geist {
namespace {

constexpr int64_t kGroup = 16;  // rows per group

int64_t block_bytes(GgmlType t) {
  return t == GgmlType::Q4_0 ? quant_detail::kQ4_0Bytes : quant_detail::kQ8_0Bytes;
}

// The value a GROUPS16 quant byte holds for file byte v (Q8_0 stores w + 128).
uint8_t to_group_byte(GgmlType t, uint8_t v) {
  return t == GgmlType::Q8_0 ? static_cast<uint8_t>(v ^ 0x80u) : v;
}

// Q5_0 and IQ4_NL blocks are a signed 8-bit value times an f16 scale per element, which is
// Q8_0's form: GROUPS16 keeps their codes packed (the Q8P form, kernels/simd/matmul_q8_packed.h)
// and runs them through Q4_0's one-plane formula; the exact rows for other backends are Q8_0
// rows.
bool as_q8_0(GgmlType t) { return simd::q8p_type(t); }

// Q8P: the file's scale and qs bytes of each row and block, transposed over the group's rows in
// 4-byte units; Q5_0's qh bits regrouped per unit (matmul_q8_packed.h); padding rows all zero.
void q8p_to_groups16(const WeightMatrix& w, uint8_t* dst) {
  const bool q5 = w.type == GgmlType::Q5_0;
  const int64_t gb = simd::q8p_group_block(w.type), sbb = ggml_type_traits(w.type).type_size;
  const int64_t nb = w.n_in / 32, groups = (w.n_out + kGroup - 1) / kGroup;
  std::memset(dst, 0, static_cast<size_t>(groups * nb * gb));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = dst + (g * nb + b) * gb;
      for (int64_t r = 0; r < kGroup && g * kGroup + r < w.n_out; ++r) {
        const uint8_t* src = w.data + static_cast<size_t>(g * kGroup + r) * w.row_bytes + b * sbb;
        std::memcpy(blk + 2 * r, src, 2);
        const uint8_t* qs = src + (q5 ? 6 : 2);
        for (int64_t u = 0; u < 4; ++u) std::memcpy(blk + 32 + (u * kGroup + r) * 4, qs + 4 * u, 4);
        if (!q5) continue;
        const uint32_t qh = quant_detail::load_u32(src + 2);
        uint32_t high = 0;
        for (int i = 0; i < 16; ++i) {
          high |= ((qh >> i) & 1u) << (8 * (i % 4) + i / 4);
          high |= ((qh >> (i + 16)) & 1u) << (8 * (i % 4) + 4 + i / 4);
        }
        std::memcpy(blk + simd::kQ8pHighAt + 4 * r, &high, 4);
      }
    }
  }
}

// Row `row` of a Q8P matrix: its file blocks rebuilt, dequantized as the file's.
void q8p_get_row(const WeightMatrix& w, int64_t row, float* dst) {
  const bool q5 = w.type == GgmlType::Q5_0;
  const int64_t gb = simd::q8p_group_block(w.type), r = row % kGroup;
  const uint8_t* grp = w.data + static_cast<size_t>(row / kGroup) * kGroup * w.row_bytes;
  uint8_t file[quant_detail::kQ5_0Bytes];
  for (int64_t b = 0; b < w.n_in / 32; ++b) {
    const uint8_t* blk = grp + b * gb;
    std::memcpy(file, blk + 2 * r, 2);
    uint8_t* qs = file + (q5 ? 6 : 2);
    for (int64_t u = 0; u < 4; ++u) std::memcpy(qs + 4 * u, blk + 32 + (u * kGroup + r) * 4, 4);
    if (q5) {
      const uint32_t high = quant_detail::load_u32(blk + simd::kQ8pHighAt + 4 * r);
      uint32_t qh = 0;
      for (int i = 0; i < 16; ++i) {
        qh |= ((high >> (8 * (i % 4) + i / 4)) & 1u) << i;
        qh |= ((high >> (8 * (i % 4) + 4 + i / 4)) & 1u) << (i + 16);
      }
      std::memcpy(file + 2, &qh, 4);
    }
    dequantize_row(w.type, file, dst + b * 32, 32);
  }
}

// Q3_K's values, (d * (s - 32)) * code with int 16-element scales s - 32 in [-32, 31] and codes
// in [-4, 3], are Q6_K's form (d * sc) * (q - 32): the exact rows for other backends hold them
// as Q6_K (GROUPS16 keeps Q3_K's own bytes: the I8M form).
// One Q3_K super-block (110 bytes at src) as a Q6_K one (210 bytes at dst): codes + 32 in the
// low 4 bits of ql and the top 2 bits of qh (layout in quant_blocks.h), the scales as int8, d.
void q3_k_to_q6_k(const uint8_t* src, uint8_t* dst) {
  uint8_t q[256];
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, j = e % 128 / 32, l = e % 32;
    const int low = (src[32 + 32 * h + l] >> (2 * j)) & 3;
    q[e] = static_cast<uint8_t>(low - 4 + 4 * ((src[l] >> (4 * h + j)) & 1) + 32);
  }
  for (int h = 0; h < 2; ++h) {
    uint8_t* ql = dst + 64 * h;
    uint8_t* qh = dst + 128 + 32 * h;
    const uint8_t* c = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((c[l] & 0xF) | ((c[l + 64] & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((c[l + 32] & 0xF) | ((c[l + 96] & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((c[l] >> 4) | ((c[l + 32] >> 4) << 2) | ((c[l + 64] >> 4) << 4) |
                                   ((c[l + 96] >> 4) << 6));
    }
  }
  for (int j = 0; j < 16; ++j) {
    dst[192 + j] =
        static_cast<uint8_t>(static_cast<int8_t>(quant_detail::q3_k_scale(src + 96, j) - 32));
  }
  std::memcpy(dst + 208, src + 108, 2);
}

// One Q5_0 / IQ4_NL block (22 / 18 bytes at src) as a Q8_0 block (34 bytes at dst).
void to_q8_0_block(GgmlType t, const uint8_t* src, uint8_t* dst) {
  std::memcpy(dst, src, 2);  // the f16 scale
  auto* q = reinterpret_cast<int8_t*>(dst + 2);
  if (t == GgmlType::Q5_0) {
    const uint32_t qh = quant_detail::load_u32(src + 2);
    for (int j = 0; j < 16; ++j) {
      q[j] = static_cast<int8_t>(((src[6 + j] & 0xF) | (((qh >> j) & 1) << 4)) - 16);
      q[j + 16] = static_cast<int8_t>(((src[6 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
    }
  } else {
    for (int j = 0; j < 16; ++j) {
      q[j] = quant_detail::kIq4Values[src[2 + j] & 0xF];
      q[j + 16] = quant_detail::kIq4Values[src[2 + j] >> 4];
    }
  }
}

// Q4_K / Q6_K: each super-block (144 / 210 bytes) is transposed over the group's 16 rows in
// 4-byte units, unit u of row r at (u * 16 + r) * 4, then the 2 leftover bytes of Q6_K (its d)
// of row r at units * 64 + 2 * r.
bool is_kquant(GgmlType t) { return t == GgmlType::Q4_K || t == GgmlType::Q6_K; }
int64_t kquant_bytes(GgmlType t) {
  return t == GgmlType::Q6_K ? quant_detail::kQ6_KBytes : quant_detail::kQ4_KBytes;
}

// Written in output order (whole 64-byte lines, one unit of the 16 rows each) so the stores
// stream; the 16 rows' super-blocks being read stay in L1.
void kquant_to_groups16(const WeightMatrix& w, uint8_t* dst) {
  const int64_t bytes = kquant_bytes(w.type), units = bytes / 4, tail = bytes % 4;
  const int64_t nsb = w.n_in / 256;
  const int64_t groups = (w.n_out + kGroup - 1) / kGroup;
  static const uint8_t kZeroSuper[quant_detail::kQ6_KBytes] = {};  // padding rows: d = 0
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* src[kGroup];
      for (int64_t r = 0; r < kGroup; ++r) {
        const int64_t row = g * kGroup + r;
        src[r] = row < w.n_out ? w.data + static_cast<size_t>(row) * w.row_bytes + s * bytes
                               : kZeroSuper;
      }
      uint8_t* sb = dst + (g * nsb + s) * kGroup * bytes;
      for (int64_t u = 0; u < units; ++u) {
        for (int64_t r = 0; r < kGroup; ++r) {
          std::memcpy(sb + (u * kGroup + r) * 4, src[r] + u * 4, 4);
        }
      }
      for (int64_t r = 0; r < kGroup; ++r) {
        std::memcpy(sb + units * kGroup * 4 + r * tail, src[r] + units * 4,
                    static_cast<size_t>(tail));
      }
    }
  }
}

// Whether w's type and width have a GROUPS16 form (whole blocks of the file's type).
bool groups16_typed(const WeightMatrix& w) {
  const int64_t block = ggml_type_traits(w.type).block_size;
  return ((w.type == GgmlType::Q8_0 || w.type == GgmlType::Q4_0 || as_q8_0(w.type)) &&
          w.n_in % 32 == 0) ||
         (is_kquant(w.type) && w.n_in % 256 == 0) ||
         (simd::i8m_type(w.type) && block > 0 && w.n_in % block == 0);
}

}  // namespace

bool weight_groups16_useful(const WeightMatrix& w) {
  return w.layout == WeightLayout::ROWS && groups16_typed(w) && w.n_in > 0 && w.n_out > 0 &&
         simd::q8_panels_fast();
}

size_t weight_groups16_row_bytes(GgmlType t, int64_t n_in) {
  return simd::i8m_type(t) ? simd::i8m_row_bytes(t, n_in) : ggml_row_size(t, n_in);
}

size_t weight_groups16_bytes(const WeightMatrix& w) {
  const int64_t groups = (w.n_out + kGroup - 1) / kGroup;
  return static_cast<size_t>(groups * kGroup) * weight_groups16_row_bytes(w.type, w.n_in);
}

void weight_to_groups16(const WeightMatrix& w, uint8_t* dst, WeightMatrix* out) {
  GEIST_CHECK(w.layout == WeightLayout::ROWS && groups16_typed(w),
              "weight_to_groups16: Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / IQ4_XS / Q2_K / "
              "Q3_K / Q4_K / Q5_K / Q6_K rows of whole blocks only");
  GEIST_CHECK(w.row_bytes == ggml_row_size(w.type, w.n_in), "weight_to_groups16: row_bytes");
  *out = w;
  out->data = dst;
  out->layout = WeightLayout::GROUPS16;
  if (simd::i8m_type(w.type)) {  // keeps its type: the I8M form
    out->row_bytes = simd::i8m_row_bytes(w.type, w.n_in);
    i8m::to_groups16(w, dst);
    return;
  }
  if (simd::q8p_type(w.type)) {  // keeps its type and row_bytes: the Q8P form
    q8p_to_groups16(w, dst);
    return;
  }
  const GgmlType gt = w.type;
  if (is_kquant(gt)) {
    kquant_to_groups16(w, dst);
    return;
  }
  const int64_t bb = block_bytes(gt);
  const int64_t units = (bb - 2) / 4;  // 4-byte units per row and block
  const int64_t nb = w.n_in / 32;
  const int64_t groups = (w.n_out + kGroup - 1) / kGroup;
  const uint8_t zero = to_group_byte(gt, gt == GgmlType::Q8_0 ? 0x00 : 0x88);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = dst + (g * nb + b) * kGroup * bb;  // == g * 16 * row_bytes + b * 16 * bb
      for (int64_t r = 0; r < kGroup; ++r) {
        const int64_t row = g * kGroup + r;
        if (row >= w.n_out) {  // padding row: scale 0, quants of value 0
          std::memset(blk + 2 * r, 0, 2);
          for (int64_t u = 0; u < units; ++u) std::memset(blk + 32 + (u * kGroup + r) * 4, zero, 4);
          continue;
        }
        const uint8_t* src = w.data + static_cast<size_t>(row) * w.row_bytes + b * bb;
        std::memcpy(blk + 2 * r, src, 2);
        for (int64_t u = 0; u < units; ++u) {
          uint8_t* d = blk + 32 + (u * kGroup + r) * 4;
          for (int k = 0; k < 4; ++k) d[k] = to_group_byte(gt, src[2 + 4 * u + k]);
        }
      }
    }
  }
}

GgmlType weight_exact_rows_type(GgmlType t) {
  return as_q8_0(t) ? GgmlType::Q8_0 : t == GgmlType::Q3_K ? GgmlType::Q6_K : t;
}

void weight_to_exact_rows(const WeightMatrix& w, uint8_t* dst, WeightMatrix* out) {
  const GgmlType to = weight_exact_rows_type(w.type);
  GEIST_CHECK(w.layout == WeightLayout::ROWS && to != w.type && w.n_in > 0 &&
                  w.row_bytes == ggml_row_size(w.type, w.n_in) && ggml_row_size(to, w.n_in) > 0,
              "weight_to_exact_rows: Q5_0 / IQ4_NL / Q3_K rows of whole blocks only");
  *out = w;
  out->type = to;
  out->data = dst;
  out->row_bytes = ggml_row_size(to, w.n_in);
  const int64_t src_block = ggml_type_traits(w.type).type_size;
  const int64_t dst_block = ggml_type_traits(to).type_size;
  const int64_t nb = w.n_in / ggml_type_traits(w.type).block_size;
  for (int64_t r = 0; r < w.n_out; ++r) {
    const uint8_t* src = w.data + static_cast<size_t>(r) * w.row_bytes;
    uint8_t* d = dst + static_cast<size_t>(r) * out->row_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      if (to == GgmlType::Q6_K) {
        q3_k_to_q6_k(src + b * src_block, d + b * dst_block);
      } else {
        to_q8_0_block(w.type, src + b * src_block, d + b * dst_block);
      }
    }
  }
}

namespace {

// Rebuilds the row's file blocks one at a time and dequantizes them as the ROWS layout does.
void get_row_groups16(const WeightMatrix& w, int64_t row, float* dst) {
  if (is_kquant(w.type)) {  // one super-block at a time, back in file order
    const int64_t bytes = kquant_bytes(w.type), units = bytes / 4, tail = bytes % 4;
    const int64_t r = row % kGroup;
    const uint8_t* grp = w.data + static_cast<size_t>(row / kGroup) * kGroup * w.row_bytes;
    uint8_t file_block[quant_detail::kQ6_KBytes];
    for (int64_t s = 0; s < w.n_in / 256; ++s) {
      const uint8_t* sb = grp + s * kGroup * bytes;
      for (int64_t u = 0; u < units; ++u) {
        std::memcpy(file_block + u * 4, sb + (u * kGroup + r) * 4, 4);
      }
      std::memcpy(file_block + units * 4, sb + units * kGroup * 4 + r * tail,
                  static_cast<size_t>(tail));
      dequantize_row(w.type, file_block, dst + s * 256, 256);
    }
    return;
  }
  const int64_t bb = block_bytes(w.type);
  const int64_t units = (bb - 2) / 4;
  const int64_t nb = w.n_in / 32;
  const int64_t r = row % kGroup;
  const uint8_t* grp = w.data + static_cast<size_t>(row / kGroup) * kGroup * w.row_bytes;
  uint8_t file_block[quant_detail::kQ8_0Bytes];
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * kGroup * bb;
    std::memcpy(file_block, blk + 2 * r, 2);
    for (int64_t u = 0; u < units; ++u) {
      const uint8_t* s = blk + 32 + (u * kGroup + r) * 4;
      for (int k = 0; k < 4; ++k) file_block[2 + 4 * u + k] = to_group_byte(w.type, s[k]);
    }
    dequantize_row(w.type, file_block, dst + b * 32, 32);
  }
}

}  // namespace

void get_row(const WeightMatrix& w, int64_t row, float* dst) {
  GEIST_CHECK(row >= 0 && row < w.n_out, "get_row: row out of range");
  if (w.layout == WeightLayout::GROUPS16 && simd::i8m_type(w.type)) {
    i8m::get_row(w, row, dst);
    return;
  }
  if (w.layout == WeightLayout::GROUPS16 && simd::q8p_type(w.type)) {
    q8p_get_row(w, row, dst);
    return;
  }
  if (w.layout == WeightLayout::GROUPS16) {
    get_row_groups16(w, row, dst);
    return;
  }
  const uint8_t* src = w.data + static_cast<size_t>(row) * w.row_bytes;
  if (w.type == GgmlType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(w.n_in) * sizeof(float));
  } else {
    dequantize_row(w.type, src, dst, w.n_in);
  }
}

}  // namespace geist
