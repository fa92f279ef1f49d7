// 8-bit activation kernels for the I8M form of the GROUPS16 layout (Q4_1, Q5_1, Q5_K, Q2_K and
// IQ4_XS weights re-encoded at load: kernels/matmul.h, matmul_simd.h "I8M"). Decode puts the
// 16 rows of a group in the lanes (one 64-byte load is a 4-byte code unit of 16 rows), prefill
// puts 16 tokens of a panel in the lanes, as the Q8_0 kernels of matmul_q8_simd.cpp do.
// foreach_target.h re-includes this file once per SIMD target; the HWY_ONCE part holds the
// dispatchers.
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
#include "kernels/simd/matmul_simd.h"

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

namespace geist::simd::i8m_detail {

// Block b of lane `lane` of the group at grp (I8M layout, matmul_simd.h).
struct I8mBlock {
  float s, m;
  int32_t m0, m1;
  int8_t w[32];
};

inline void read_block(I8mForm f, const uint8_t* grp, int64_t lane, int64_t b, I8mBlock* out) {
  const uint8_t* blk = grp + b * i8m_group_block(f);
  const uint8_t* codes = blk + i8m_codes_at(f);
  std::memcpy(&out->s, blk + kI8mScaleAt + 4 * lane, 4);
  out->m = 0.0f;
  out->m0 = out->m1 = f == I8mForm::NIBBLES ? 1 : 0;
  if (f != I8mForm::IQ4) std::memcpy(&out->m, blk + kI8mMinAt + 4 * lane, 4);
  if (f == I8mForm::CODES8) {
    int16_t mh[2];
    std::memcpy(mh, blk + kI8mWeightsAt + 4 * lane, 4);
    out->m0 = mh[0];
    out->m1 = mh[1];
    for (int i = 0; i < 32; ++i) {
      out->w[i] = static_cast<int8_t>(codes[((i / 4) * 16 + lane) * 4 + i % 4] ^ 0x80);
    }
    return;
  }
  for (int i = 0; i < 16; ++i) {
    const uint8_t byte = codes[((i / 4) * 16 + lane) * 4 + i % 4];
    const int lo = byte & 15, hi = byte >> 4;
    out->w[i] = static_cast<int8_t>(f == I8mForm::IQ4 ? quant_detail::kIq4Values[lo] : lo);
    out->w[i + 16] = static_cast<int8_t>(f == I8mForm::IQ4 ? quant_detail::kIq4Values[hi] : hi);
  }
}

// The formula for one (row, token): act(b, i) the q1 code of element i of block b, hs(b, h) the
// sum of q1 over half h of block b, dxb(b) its step.
template <class Act, class Hs, class Dx>
float dot_formula(I8mForm f, const uint8_t* grp, int64_t lane, int64_t nb, Act act, Hs hs, Dx dxb) {
  const bool has_min = f != I8mForm::IQ4;
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
// AVX-512 VNNI (vpdpbusd: 4 u8 x s8 products per int32 lane), checked at run time. The codes are
// stored w + 128 (unsigned); 128 times the activation block sum comes off the exact int32 sum.
// The min weights are int16 pairs (m0, m1) and the half sums fit int16 (|hs| <= 16 * 127), so
// one vpmaddwd gives m0 * hs0 + m1 * hs1 exactly.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define GEIST_I8M_VNNI_ATTR \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512vnni,avx2,fma,f16c")))

constexpr int64_t kI8mPrefetchBlocks = 12;  // decode's software prefetch distance, in blocks

inline int32_t PackHalves(int32_t h0, int32_t h1) {
  return static_cast<int32_t>((static_cast<uint32_t>(h0) & 0xFFFFu) |
                              (static_cast<uint32_t>(h1) << 16));
}

// The 16-byte table of kIq4Values + 128 (unsigned, for vpdpbusd) in every 128-bit lane.
GEIST_I8M_VNNI_ATTR inline __m512i Iq4Table() {
  alignas(16) uint8_t t[16];
  for (int i = 0; i < 16; ++i) t[i] = static_cast<uint8_t>(quant_detail::kIq4Values[i] + 128);
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(t)));
}

// The unsigned operands of one 4-byte nibble unit (16 lanes' or one broadcast): low and high
// nibbles, as codes (NIBBLES) or looked up to kIq4Values + 128 (IQ4).
template <I8mForm kForm>
GEIST_I8M_VNNI_ATTR inline void Nibbles(__m512i v, __m512i table, __m512i* lo, __m512i* hi) {
  const __m512i m4 = _mm512_set1_epi8(15);
  *lo = _mm512_and_si512(v, m4);
  *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  if constexpr (kForm == I8mForm::IQ4) {
    *lo = _mm512_shuffle_epi8(table, *lo);
    *hi = _mm512_shuffle_epi8(table, *hi);
  }
}

// Decode: T tokens (rows layout) against the 16 rows of the group at grp.
template <I8mForm kForm, int T>
GEIST_I8M_VNNI_ATTR void I8mGroupTile(const uint8_t* grp, int64_t nb, int64_t n_in, const int8_t* q,
                                      const float* dx, const int32_t* sx, __m512 acc_out[T]) {
  constexpr int64_t kBlock = i8m_group_block(kForm), kCodes = i8m_codes_at(kForm);
  constexpr bool kMin = kForm != I8mForm::IQ4;
  constexpr int32_t kBias = kForm == I8mForm::NIBBLES ? 0 : 128;  // the unsigned codes' offset
  const __m512i table = kForm == I8mForm::IQ4 ? Iq4Table() : _mm512_setzero_si512();
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * kBlock;
    for (int64_t l = 0; l < kBlock; l += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(blk + kI8mPrefetchBlocks * kBlock + l),
                   _MM_HINT_T0);
    }
    auto bcast = [&](int t, int at) {
      int32_t v;
      std::memcpy(&v, q + t * 2 * n_in + b * 32 + at, 4);
      return _mm512_set1_epi32(v);
    };
    __m512i s[T][2];
    for (int t = 0; t < T; ++t) s[t][0] = s[t][1] = _mm512_setzero_si512();
    if constexpr (kForm == I8mForm::CODES8) {
      for (int u = 0; u < 8; ++u) {
        const __m512i w = _mm512_loadu_si512(blk + kCodes + u * 64);
        for (int t = 0; t < T; ++t)
          s[t][u & 1] = _mm512_dpbusd_epi32(s[t][u & 1], w, bcast(t, 4 * u));
      }
    } else {
      for (int u = 0; u < 4; ++u) {
        __m512i lo, hi;
        Nibbles<kForm>(_mm512_loadu_si512(blk + kCodes + u * 64), table, &lo, &hi);
        for (int t = 0; t < T; ++t) {
          s[t][0] = _mm512_dpbusd_epi32(s[t][0], lo, bcast(t, 4 * u));
          s[t][1] = _mm512_dpbusd_epi32(s[t][1], hi, bcast(t, 16 + 4 * u));
        }
      }
    }
    const __m512 sv = _mm512_loadu_ps(blk + kI8mScaleAt);
    __m512 mv = _mm512_setzero_ps();
    __m512i mh = _mm512_setzero_si512();
    if constexpr (kMin) mv = _mm512_loadu_ps(blk + kI8mMinAt);
    if constexpr (kForm == I8mForm::CODES8) mh = _mm512_loadu_si512(blk + kI8mWeightsAt);
    for (int t = 0; t < T; ++t) {
      __m512i isum = _mm512_add_epi32(s[t][0], s[t][1]);
      if constexpr (kBias != 0) {
        isum = _mm512_sub_epi32(isum, _mm512_set1_epi32(sx[t * nb + b] * kBias));
      }
      const __m512 d = _mm512_set1_ps(dx[t * nb + b]);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(sv, d), acc[t]);
      if constexpr (kMin) {
        __m512 ms;  // m0 * hs0 + m1 * hs1, exact (NIBBLES: m0 = m1 = 1, so the block sum)
        if constexpr (kForm == I8mForm::CODES8) {
          int32_t hs[2];
          std::memcpy(hs, q + t * 2 * n_in + n_in + b * 8, 8);
          ms = _mm512_cvtepi32_ps(
              _mm512_madd_epi16(mh, _mm512_set1_epi32(PackHalves(hs[0], hs[1]))));
        } else {
          ms = _mm512_set1_ps(static_cast<float>(sx[t * nb + b]));
        }
        acc[t] = _mm512_fnmadd_ps(mv, _mm512_mul_ps(ms, d), acc[t]);
      }
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

// Prefill: 4 weight rows x P panels of 16 tokens per register tile; rows[r] is row r's first
// byte in its group (group start + 4 * lane), so its block b's scale is at rows[r] + b *
// i8m_group_block and its code unit u 64 * u further than the codes' start.
template <I8mForm kForm, int P>
GEIST_I8M_VNNI_ATTR void I8mPanelTile(const uint8_t* const rows[4], int64_t nb, const int8_t* pq,
                                      const float* pdx, const int32_t* psx,
                                      float acc_out[4][P][16]) {
  constexpr int64_t kBlock = i8m_group_block(kForm), kCodes = i8m_codes_at(kForm);
  constexpr bool kMin = kForm != I8mForm::IQ4;
  constexpr int kBiasShift = kForm == I8mForm::NIBBLES ? -1 : 7;  // codes' offset 128 = 1 << 7
  const __m512i table = kForm == I8mForm::IQ4 ? Iq4Table() : _mm512_setzero_si512();
  const int64_t panel_q = nb * 1024;
  __m512 acc[4][P];
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    __m512i s[4][P];
    for (int r = 0; r < 4; ++r) {
      for (int p = 0; p < P; ++p) s[r][p] = _mm512_setzero_si512();
    }
    const int8_t* a = pq + b * 512;
    if constexpr (kForm == I8mForm::CODES8) {
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        __m512i x[P];
        for (int p = 0; p < P; ++p) x[p] = _mm512_loadu_si512(a + p * panel_q + g * 64);
        for (int r = 0; r < 4; ++r) {
          int32_t bits;
          std::memcpy(&bits, rows[r] + b * kBlock + kCodes + g * 64, 4);
          const __m512i w = _mm512_set1_epi32(bits);
          for (int p = 0; p < P; ++p) s[r][p] = _mm512_dpbusd_epi32(s[r][p], w, x[p]);
        }
      }
    } else {
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        __m512i xl[P], xh[P];
        for (int p = 0; p < P; ++p) {
          xl[p] = _mm512_loadu_si512(a + p * panel_q + g * 64);
          xh[p] = _mm512_loadu_si512(a + p * panel_q + (g + 4) * 64);
        }
        for (int r = 0; r < 4; ++r) {
          int32_t bits;
          std::memcpy(&bits, rows[r] + b * kBlock + kCodes + g * 64, 4);
          __m512i lo, hi;
          Nibbles<kForm>(_mm512_set1_epi32(bits), table, &lo, &hi);
          for (int p = 0; p < P; ++p) {
            s[r][p] = _mm512_dpbusd_epi32(s[r][p], lo, xl[p]);
            s[r][p] = _mm512_dpbusd_epi32(s[r][p], hi, xh[p]);
          }
        }
      }
    }
    __m512i corr[P], hp[P];
    __m512 dxv[P], fsx[P];
    for (int p = 0; p < P; ++p) {
      const __m512i sxv = _mm512_loadu_si512(psx + p * nb * 16 + b * 16);
      corr[p] = kBiasShift < 0 ? _mm512_setzero_si512() : _mm512_slli_epi32(sxv, 7);
      dxv[p] = _mm512_loadu_ps(pdx + p * nb * 16 + b * 16);
      fsx[p] = _mm512_cvtepi32_ps(sxv);
      if constexpr (kForm == I8mForm::CODES8) {
        const auto* hs = reinterpret_cast<const int32_t*>(pq + p * panel_q + nb * 512) + b * 32;
        const __m512i h0 = _mm512_loadu_si512(hs), h1 = _mm512_loadu_si512(hs + 16);
        hp[p] = _mm512_or_si512(_mm512_and_si512(h0, _mm512_set1_epi32(0xFFFF)),
                                _mm512_slli_epi32(h1, 16));
      }
    }
    for (int r = 0; r < 4; ++r) {
      const uint8_t* blk = rows[r] + b * kBlock;
      float sc, mn = 0.0f;
      int32_t mh = 0;
      std::memcpy(&sc, blk + kI8mScaleAt, 4);
      if constexpr (kMin) std::memcpy(&mn, blk + kI8mMinAt, 4);
      if constexpr (kForm == I8mForm::CODES8) std::memcpy(&mh, blk + kI8mWeightsAt, 4);
      const __m512 sv = _mm512_set1_ps(sc);
      for (int p = 0; p < P; ++p) {
        const __m512 fs = _mm512_cvtepi32_ps(_mm512_sub_epi32(s[r][p], corr[p]));
        acc[r][p] = _mm512_fmadd_ps(fs, _mm512_mul_ps(sv, dxv[p]), acc[r][p]);
        if constexpr (kMin) {
          // m0 * hs0 + m1 * hs1, exact (NIBBLES: m0 = m1 = 1, so the block sum).
          const __m512 ms =
              kForm == I8mForm::CODES8
                  ? _mm512_cvtepi32_ps(_mm512_madd_epi16(hp[p], _mm512_set1_epi32(mh)))
                  : fsx[p];
          acc[r][p] = _mm512_fnmadd_ps(_mm512_set1_ps(mn), _mm512_mul_ps(ms, dxv[p]), acc[r][p]);
        }
      }
    }
  }
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(acc_out[r][p], acc[r][p]);
  }
}

template <I8mForm kForm>
GEIST_I8M_VNNI_ATTR void I8mPanelsVnni(const uint8_t* src, size_t row_bytes, int count,
                                       int64_t n_in, const int8_t* pq, const float* pdx,
                                       const int32_t* psx, int64_t n_tok, float* out,
                                       int64_t out_stride) {
  const int64_t nb = n_in / 32;
  const int64_t n_panels = (n_tok + kQ8Panel - 1) / kQ8Panel;
  constexpr int kTileP = 2;
  for (int r0 = 0; r0 < count; r0 += 4) {
    const int nr = count - r0 < 4 ? count - r0 : 4;
    const uint8_t* rows[4];
    for (int r = 0; r < 4; ++r) {  // a tail's missing rows are the group's (padding) rows
      const int o = r0 + r;
      rows[r] = i8m_detail::group_of(src, row_bytes, o) + 4 * (o % 16);
    }
    for (int64_t p0 = 0; p0 < n_panels; p0 += kTileP) {
      alignas(64) float res[4][kTileP][16];
      const int np = static_cast<int>(n_panels - p0 >= kTileP ? kTileP : n_panels - p0);
      const int8_t* q = pq + p0 * nb * 1024;
      const float* d = pdx + p0 * nb * 16;
      const int32_t* sx = psx + p0 * nb * 16;
      if (np == kTileP) {
        I8mPanelTile<kForm, kTileP>(rows, nb, q, d, sx, res);
      } else {
        float res1[4][1][16];
        I8mPanelTile<kForm, 1>(rows, nb, q, d, sx, res1);
        for (int r = 0; r < 4; ++r) std::memcpy(res[r][0], res1[r][0], sizeof(res1[r][0]));
      }
      for (int p = 0; p < np; ++p) {
        for (int j = 0; j < 16; ++j) {
          const int64_t t = (p0 + p) * kQ8Panel + j;
          if (t >= n_tok) break;
          for (int r = 0; r < nr; ++r) out[t * out_stride + r0 + r] = res[r][p][j];
        }
      }
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
    auto* kernel = f == I8mForm::CODES8    ? I8mRowsVnni<I8mForm::CODES8>
                   : f == I8mForm::NIBBLES ? I8mRowsVnni<I8mForm::NIBBLES>
                                           : I8mRowsVnni<I8mForm::IQ4>;
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
    auto* kernel = f == I8mForm::CODES8    ? I8mPanelsVnni<I8mForm::CODES8>
                   : f == I8mForm::NIBBLES ? I8mPanelsVnni<I8mForm::NIBBLES>
                                           : I8mPanelsVnni<I8mForm::IQ4>;
    kernel(src, row_bytes, count, n_in, pq, pdx, psx, n_tok, out, out_stride);
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
         t == GgmlType::IQ4_XS;
}

void dot_i8m_rows(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                  const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok, float* out,
                  int64_t out_stride) {
  GEIST_CHECK(i8m_type(t) && n_in % 32 == 0 && row_bytes == i8m_row_bytes(t, n_in),
              "dot_i8m_rows: I8M rows (Q4_1 / Q5_1 / Q5_K / Q2_K / IQ4_XS in GROUPS16)");
  HWY_DYNAMIC_DISPATCH(I8mRows)
  (i8m_form(t), src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
}

void dot_i8m_panels(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                    const int8_t* pq, const float* pdx, const int32_t* psx, int64_t n_tok,
                    float* out, int64_t out_stride) {
  GEIST_CHECK(i8m_type(t) && n_in % 32 == 0 && row_bytes == i8m_row_bytes(t, n_in),
              "dot_i8m_panels: I8M rows (Q4_1 / Q5_1 / Q5_K / Q2_K / IQ4_XS in GROUPS16)");
  HWY_DYNAMIC_DISPATCH(I8mPanels)
  (i8m_form(t), src, row_bytes, count, n_in, pq, pdx, psx, n_tok, out, out_stride);
}

}  // namespace geist::simd
#endif  // HWY_ONCE
