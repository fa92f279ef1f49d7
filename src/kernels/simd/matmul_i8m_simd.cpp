// 8-bit activation kernels for the I8M form of the GROUPS16 layout (Q4_1, Q5_1, Q5_K, Q2_K, Q3_K
// and IQ4_XS weights repacked at load: kernels/matmul.h, matmul_simd.h "I8M"): the portable loops
// of the formula, Q4_1's and Q5_1's decode (the 16 rows of a group in the lanes, one 64-byte load
// a 4-byte code unit of 16 rows, as the Q8_0 kernels of matmul_q8_simd.cpp do; the packed codes
// unpacked in registers) and the dispatchers. foreach_target.h re-includes this file once per SIMD
// target; the HWY_ONCE part holds the dispatchers.
//
// Every output is the scalar formula of matmul_simd.h: exact int32 block sums, then the fmas
// per block in block order; so decode, prefill and the portable loops give the same bits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/matmul_i8m_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target must come first.
#include "hwy/highway.h"

#ifndef GEIST_KERNELS_SIMD_MATMUL_I8M_SIMD_ONCE
#define GEIST_KERNELS_SIMD_MATMUL_I8M_SIMD_ONCE
#include <cmath>
#include <cstring>

#include "base/status.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd/f16.h"
#include "kernels/simd/matmul_i8m_packed.h"
#include "kernels/simd/matmul_simd.h"
#include "kernels/simd/stream_prefetch.h"

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

namespace geist::simd::i8m_detail {

// Block b of lane `lane` of the group at grp (I8M layout, matmul_simd.h).
struct I8mBlock {
  float s, m;
  int32_t m0, m1;
  int16_t w[32];  // Q3K's reach 128
};

// Q2K: block b of lane `lane` (w = sc * q, S = d, M = dmin, m_h the 16-element mins).
inline void read_q2k_block(const uint8_t* grp, int64_t lane, int64_t b, I8mBlock* out) {
  const uint8_t* sb = grp + b / 8 * kI8mQ2kGroupSuper;
  auto byte = [&](int off) { return sb[(off / 4 * 16 + lane) * 4 + off % 4]; };
  const int k = static_cast<int>(b % 8);
  out->s = f16_to_f32(static_cast<uint16_t>(byte(80) | byte(81) << 8));
  out->m = f16_to_f32(static_cast<uint16_t>(byte(82) | byte(83) << 8));
  const int sc[2] = {byte(2 * k), byte(2 * k + 1)};
  out->m0 = sc[0] >> 4;
  out->m1 = sc[1] >> 4;
  for (int l = 0; l < 32; ++l) {
    const int code = (byte(16 + 32 * (k / 4) + l) >> (2 * (k % 4))) & 3;
    out->w[l] = static_cast<int16_t>((sc[l / 16] & 15) * code);
  }
}

// Q3K: block b of lane `lane` (w = (s_h - 32) * code, S = d, no min).
inline void read_q3k_block(const uint8_t* grp, int64_t lane, int64_t b, I8mBlock* out) {
  const uint8_t* sb = grp + b / 8 * kI8mQ3kGroupSuper;
  auto byte = [&](int off) { return sb[(off / 4 * 16 + lane) * 4 + off % 4]; };  // off < 108
  const int k = static_cast<int>(b % 8);
  const uint8_t* dp = sb + kI8mQ3kD + 2 * lane;
  out->s = f16_to_f32(static_cast<uint16_t>(dp[0] | dp[1] << 8));
  out->m = 0.0f;
  out->m0 = out->m1 = 0;
  uint8_t scales[12];
  for (int i = 0; i < 12; ++i) scales[i] = byte(96 + i);
  for (int l = 0; l < 32; ++l) {
    const int low = (byte(32 + 32 * (k / 4) + l) >> (2 * (k % 4))) & 3;
    const int code = low - 4 + 4 * ((byte(l) >> k) & 1);
    out->w[l] =
        static_cast<int16_t>((quant_detail::q3_k_scale(scales, 2 * k + l / 16) - 32) * code);
  }
}

// Q5K: block b of lane `lane` (w = the 5-bit code, S = d * sc_j, M = dmin * m_j, m0 = m1 = 1).
inline void read_q5k_block(const uint8_t* grp, int64_t lane, int64_t b, I8mBlock* out) {
  const uint8_t* sb = grp + b / 8 * kI8mQ5kGroupSuper;
  auto byte = [&](int off) { return sb[(off / 4 * 16 + lane) * 4 + off % 4]; };
  const int k = static_cast<int>(b % 8);
  uint8_t scales[12], sc, mn;
  for (int i = 0; i < 12; ++i) scales[i] = byte(4 + i);
  quant_detail::k_scale_min(scales, k, &sc, &mn);
  out->s = f16_to_f32(static_cast<uint16_t>(byte(0) | byte(1) << 8)) * static_cast<float>(sc);
  out->m = f16_to_f32(static_cast<uint16_t>(byte(2) | byte(3) << 8)) * static_cast<float>(mn);
  out->m0 = out->m1 = 1;
  for (int l = 0; l < 32; ++l) {
    const int nib = (byte(48 + 32 * (k / 2) + l) >> (4 * (k % 2))) & 15;
    out->w[l] = static_cast<int16_t>(nib | ((byte(16 + l) >> k) & 1) << 4);
  }
}

// IQ4K: block b of lane `lane` (w = kIq4Values[q], S = d * (ls - 32), no min).
inline void read_iq4k_block(const uint8_t* grp, int64_t lane, int64_t b, I8mBlock* out) {
  const uint8_t* sb = grp + b / 8 * kI8mIq4kGroupSuper;
  auto byte = [&](int off) { return sb[(off / 4 * 16 + lane) * 4 + off % 4]; };
  const int k = static_cast<int>(b % 8);
  const int ls =
      ((byte(4 + k / 2) >> (4 * (k % 2))) & 15) | (((byte(2) | byte(3) << 8) >> (2 * k)) & 3) << 4;
  out->s = f16_to_f32(static_cast<uint16_t>(byte(0) | byte(1) << 8)) * static_cast<float>(ls - 32);
  out->m = 0.0f;
  out->m0 = out->m1 = 0;
  for (int i = 0; i < 16; ++i) {
    const int v = byte(8 + 16 * k + i);
    out->w[i] = quant_detail::kIq4Values[v & 15];
    out->w[i + 16] = quant_detail::kIq4Values[v >> 4];
  }
}

inline void read_block(I8mForm f, const uint8_t* grp, int64_t lane, int64_t b, I8mBlock* out) {
  if (f == I8mForm::Q5K) {
    read_q5k_block(grp, lane, b, out);
    return;
  }
  if (f == I8mForm::Q2K) {
    read_q2k_block(grp, lane, b, out);
    return;
  }
  if (f == I8mForm::Q3K) {
    read_q3k_block(grp, lane, b, out);
    return;
  }
  if (f == I8mForm::IQ4K) {
    read_iq4k_block(grp, lane, b, out);
    return;
  }
  const uint8_t* blk = grp + b * i8m_group_block(f);
  const uint8_t* codes = blk + i8m_codes_at(f);
  out->s = f16_to_f32(quant_detail::load_u16(blk + kI8mScaleAt + 2 * lane));
  out->m = f16_to_f32(quant_detail::load_u16(blk + kI8mMinAt + 2 * lane));
  out->m0 = out->m1 = 1;
  uint32_t high = 0;  // NIBBLES5's high bits (matmul_simd.h)
  if (f == I8mForm::NIBBLES5) std::memcpy(&high, blk + kI8mHighAt + 4 * lane, 4);
  for (int i = 0; i < 16; ++i) {
    const uint8_t byte = codes[((i / 4) * 16 + lane) * 4 + i % 4];
    const int k = i % 4, u = i / 4;
    out->w[i] = static_cast<int16_t>((byte & 15) | ((high >> (8 * k + u)) & 1) << 4);
    out->w[i + 16] = static_cast<int16_t>((byte >> 4) | ((high >> (8 * k + 4 + u)) & 1) << 4);
  }
}

// The formula for one (row, token): act(b, i) the q1 code of element i of block b, hs(b, h) the
// sum of q1 over half h of block b, dxb(b) its step.
template <class Act, class Hs, class Dx>
float dot_formula(I8mForm f, const uint8_t* grp, int64_t lane, int64_t nb, Act act, Hs hs, Dx dxb) {
  const bool has_min = i8m_has_min(f);
  float acc = 0.0f;
  I8mBlock blk;
  for (int64_t b = 0; b < nb; ++b) {
    read_block(f, grp, lane, b, &blk);
    int32_t isum = 0;
    for (int i = 0; i < 32; ++i) isum += int32_t{blk.w[i]} * act(b, i);
    const float dx = dxb(b);
    acc = std::fma(static_cast<float>(isum), blk.s * dx, acc);
    if (has_min) {
      const int32_t ms = blk.m0 * hs(b, 0) + blk.m1 * hs(b, 1);
      acc = std::fma(blk.m, -(static_cast<float>(ms) * dx), acc);
    }
  }
  return acc;
}

inline const uint8_t* group_of(const uint8_t* src, size_t row_bytes, int r) {
  return src + static_cast<size_t>(r / 16) * 16 * row_bytes;
}

}  // namespace geist::simd::i8m_detail
#endif  // GEIST_KERNELS_SIMD_MATMUL_I8M_SIMD_ONCE

HWY_BEFORE_NAMESPACE();
namespace geist::simd {
namespace HWY_NAMESPACE {

// Portable forms (targets without VNNI, and the tails): rows layout activations.
void I8mRowsGeneric(I8mForm f, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                    const int8_t* q, const float* dx, int64_t n_tok, float* out,
                    int64_t out_stride) {
  const int64_t nb = n_in / 32;
  for (int r = 0; r < count; ++r) {
    const uint8_t* grp = i8m_detail::group_of(src, row_bytes, r);
    for (int64_t t = 0; t < n_tok; ++t) {
      const int8_t* qt = q + t * 2 * n_in;
      auto act = [&](int64_t b, int i) { return int32_t{qt[b * 32 + i]}; };
      auto hs = [&](int64_t b, int h) {
        int32_t v;
        std::memcpy(&v, qt + n_in + b * 8 + h * 4, 4);
        return v;
      };
      auto dxb = [&](int64_t b) { return dx[t * nb + b]; };
      out[t * out_stride + r] = i8m_detail::dot_formula(f, grp, r % 16, nb, act, hs, dxb);
    }
  }
}

void I8mPanelsGeneric(I8mForm f, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                      const int8_t* pq, const float* pdx, int64_t n_tok, float* out,
                      int64_t out_stride) {
  const int64_t nb = n_in / 32;
  for (int r = 0; r < count; ++r) {
    const uint8_t* grp = i8m_detail::group_of(src, row_bytes, r);
    for (int64_t t = 0; t < n_tok; ++t) {
      const int64_t p = t / kQ8Panel, lane = t % kQ8Panel;
      const int8_t* base = pq + p * nb * 1024;
      auto act = [&](int64_t b, int i) {
        return int32_t{base[((b * 8 + i / 4) * 16 + lane) * 4 + i % 4]};
      };
      auto hs = [&](int64_t b, int h) {
        int32_t v;
        std::memcpy(&v, base + nb * 512 + ((b * 2 + h) * 16 + lane) * 4, 4);
        return v;
      };
      auto dxb = [&](int64_t b) { return pdx[(p * nb + b) * 16 + lane]; };
      out[t * out_stride + r] = i8m_detail::dot_formula(f, grp, r % 16, nb, act, hs, dxb);
    }
  }
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// AVX-512 VNNI (vpdpbusd: 4 u8 x s8 products per int32 lane), checked at run time: the per-block
// forms' decode, the codes the unsigned operand. The super-block forms' decode and every form's
// prefill are in matmul_i8m_packed_simd.cpp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define GEIST_I8M_VNNI_ATTR \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512vnni,avx2,fma,f16c")))

// The unsigned operands of one 4-byte nibble unit u (16 lanes' or one broadcast): low and high
// nibbles as codes (NIBBLES5 with their high bits from `high`, the rows' high-bit words: bit u of
// a byte for the low element, bit 4 + u for the high one).
template <I8mForm kForm>
GEIST_I8M_VNNI_ATTR inline void Nibbles(__m512i v, __m512i high, int u, __m512i* lo, __m512i* hi) {
  const __m512i m4 = _mm512_set1_epi8(15);
  *lo = _mm512_and_si512(v, m4);
  *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  if constexpr (kForm == I8mForm::NIBBLES5) {
    const __m512i b4 = _mm512_set1_epi8(16);
    *lo = _mm512_or_si512(*lo,
                          _mm512_and_si512(_mm512_sll_epi32(high, _mm_cvtsi32_si128(4 - u)), b4));
    *hi = _mm512_or_si512(*hi, _mm512_and_si512(_mm512_srl_epi32(high, _mm_cvtsi32_si128(u)), b4));
  }
}

// Decode: T tokens (rows layout) against the 16 rows of the group at grp (per-block forms).
template <I8mForm kForm, int T>
GEIST_I8M_VNNI_ATTR void I8mGroupTile(const uint8_t* grp, int64_t nb, int64_t n_in, const int8_t* q,
                                      const float* dx, const int32_t* sx, __m512 acc_out[T]) {
  constexpr int64_t kBlock = i8m_group_block(kForm), kCodes = i8m_codes_at(kForm);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * kBlock;
    prefetch_stream(blk, kBlock);
    auto bcast = [&](int t, int at) {
      int32_t v;
      std::memcpy(&v, q + t * 2 * n_in + b * 32 + at, 4);
      return _mm512_set1_epi32(v);
    };
    __m512i s[T][2];
    for (int t = 0; t < T; ++t) s[t][0] = s[t][1] = _mm512_setzero_si512();
    const __m512i high =
        kForm == I8mForm::NIBBLES5 ? _mm512_loadu_si512(blk + kI8mHighAt) : _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      __m512i lo, hi;
      Nibbles<kForm>(_mm512_loadu_si512(blk + kCodes + u * 64), high, u, &lo, &hi);
      for (int t = 0; t < T; ++t) {
        s[t][0] = _mm512_dpbusd_epi32(s[t][0], lo, bcast(t, 4 * u));
        s[t][1] = _mm512_dpbusd_epi32(s[t][1], hi, bcast(t, 16 + 4 * u));
      }
    }
    // f16 S and M: exact conversions.
    const __m512 sv =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kI8mScaleAt)));
    const __m512 mv =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kI8mMinAt)));
    for (int t = 0; t < T; ++t) {
      const __m512i isum = _mm512_add_epi32(s[t][0], s[t][1]);
      const __m512 d = _mm512_set1_ps(dx[t * nb + b]);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(sv, d), acc[t]);
      // m0 * hs0 + m1 * hs1 with m0 = m1 = 1: the block sum, exact.
      const __m512 ms = _mm512_set1_ps(static_cast<float>(sx[t * nb + b]));
      acc[t] = _mm512_fnmadd_ps(mv, _mm512_mul_ps(ms, d), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) acc_out[t] = acc[t];
}

template <I8mForm kForm>
GEIST_I8M_VNNI_ATTR void I8mRowsVnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                                     const int8_t* q, const float* dx, const int32_t* sx,
                                     int64_t n_tok, float* out, int64_t out_stride) {
  const int64_t nb = n_in / 32;
  for (int r0 = 0; r0 < count; r0 += 16) {
    const uint8_t* grp = src + static_cast<size_t>(r0) * row_bytes;  // group r0 / 16
    const __mmask16 keep = count - r0 >= 16 ? static_cast<__mmask16>(0xffff)
                                            : static_cast<__mmask16>((1u << (count - r0)) - 1u);
    for (int64_t t = 0; t < n_tok; t += 2) {
      __m512 acc[2];
      if (n_tok - t >= 2) {
        I8mGroupTile<kForm, 2>(grp, nb, n_in, q + t * 2 * n_in, dx + t * nb, sx + t * nb, acc);
        _mm512_mask_storeu_ps(out + (t + 1) * out_stride + r0, keep, acc[1]);
      } else {
        I8mGroupTile<kForm, 1>(grp, nb, n_in, q + t * 2 * n_in, dx + t * nb, sx + t * nb, acc);
      }
      _mm512_mask_storeu_ps(out + t * out_stride + r0, keep, acc[0]);
    }
  }
}

bool I8mHasVnni() { return __builtin_cpu_supports("avx512vnni"); }
#pragma GCC diagnostic pop
#endif

void I8mRows(I8mForm f, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
             const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok, float* out,
             int64_t out_stride) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (I8mHasVnni()) {
    if (i8m_super_form(f)) {
      auto* kernel = f == I8mForm::Q2K   ? i8m_packed::q2k_rows_vnni
                     : f == I8mForm::Q3K ? i8m_packed::q3k_rows_vnni
                     : f == I8mForm::Q5K ? i8m_packed::q5k_rows_vnni
                                         : i8m_packed::iq4k_rows_vnni;
      kernel(src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
      return;
    }
    auto* kernel =
        f == I8mForm::NIBBLES5 ? I8mRowsVnni<I8mForm::NIBBLES5> : I8mRowsVnni<I8mForm::NIBBLES>;
    kernel(src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
    return;
  }
#endif
  (void)sx;
  I8mRowsGeneric(f, src, row_bytes, count, n_in, q, dx, n_tok, out, out_stride);
}

void I8mPanels(I8mForm f, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
               const int8_t* pq, const float* pdx, const int32_t* psx, int64_t n_tok, float* out,
               int64_t out_stride) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (I8mHasVnni()) {
    i8m_packed::unpacked_panels_vnni(f, src, row_bytes, count, n_in, pq, pdx, psx, n_tok, out,
                                     out_stride);
    return;
  }
#endif
  (void)psx;
  I8mPanelsGeneric(f, src, row_bytes, count, n_in, pq, pdx, n_tok, out, out_stride);
}

}  // namespace HWY_NAMESPACE
}  // namespace geist::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace geist::simd {

HWY_EXPORT(I8mRows);
HWY_EXPORT(I8mPanels);

bool i8m_type(GgmlType t) {
  return t == GgmlType::Q4_1 || t == GgmlType::Q5_1 || t == GgmlType::Q5_K || t == GgmlType::Q2_K ||
         t == GgmlType::Q3_K || t == GgmlType::IQ4_XS;
}

void dot_i8m_rows(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                  const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok, float* out,
                  int64_t out_stride) {
  GEIST_CHECK(i8m_type(t) && n_in % 32 == 0 && row_bytes == i8m_row_bytes(t, n_in),
              "dot_i8m_rows: I8M rows (Q4_1 / Q5_1 / Q5_K / Q2_K / Q3_K / IQ4_XS in GROUPS16)");
  HWY_DYNAMIC_DISPATCH(I8mRows)
  (i8m_form(t), src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
}

void dot_i8m_panels(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                    const int8_t* pq, const float* pdx, const int32_t* psx, int64_t n_tok,
                    float* out, int64_t out_stride) {
  GEIST_CHECK(i8m_type(t) && n_in % 32 == 0 && row_bytes == i8m_row_bytes(t, n_in),
              "dot_i8m_panels: I8M rows (Q4_1 / Q5_1 / Q5_K / Q2_K / Q3_K / IQ4_XS in GROUPS16)");
  HWY_DYNAMIC_DISPATCH(I8mPanels)
  (i8m_form(t), src, row_bytes, count, n_in, pq, pdx, psx, n_tok, out, out_stride);
}

}  // namespace geist::simd
#endif  // HWY_ONCE
