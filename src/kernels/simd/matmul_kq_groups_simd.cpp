// Decode kernels for Q4_K and Q6_K weights in the GROUPS16 layout (kernels/matmul.h): weight rows
// in the lanes, like the Q4_0 group kernel (matmul_q8_groups_simd.cpp). One 64-byte load is a
// 4-byte quant unit of 16 rows, the activation bytes are broadcast, so each vpdpbusd adds 4
// products to each of 16 rows' block sums and no horizontal reduction is needed; the 16 rows' d,
// dmin and packed scales are 64-byte loads too (Q6_K's d a 32-byte one). Up to kKqTileMax tokens
// share each weight load (register tiles of 1-4 tokens, as the Q8_0 / Q4_0 kernel), so a decode
// step of several sessions streams the weights once. foreach_target.h re-includes this file once
// per SIMD target; the HWY_ONCE part holds the dispatcher.
//
// Every output follows the formula of matmul_simd.h (exact int32 block sums, then the type's
// fmas per block in block order), so it is bitwise what the ROWS kernels give.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/matmul_kq_groups_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target must come first.
#include "hwy/highway.h"

#ifndef GEIST_KERNELS_SIMD_MATMUL_KQ_GROUPS_SIMD_ONCE
#define GEIST_KERNELS_SIMD_MATMUL_KQ_GROUPS_SIMD_ONCE
#include <cstring>

#include "kernels/simd/matmul_kq_detail.h"
#include "kernels/simd/matmul_simd.h"
#include "kernels/simd/stream_prefetch.h"

#if HWY_ARCH_X86
#include <immintrin.h>
#endif
#endif  // GEIST_KERNELS_SIMD_MATMUL_KQ_GROUPS_SIMD_ONCE

HWY_BEFORE_NAMESPACE();
namespace geist::simd {
namespace HWY_NAMESPACE {

using kq_detail::kSuper;

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// Bytes of one super-block of a 16-row group (only the VNNI kernels below use them: clang
// flags unused constants in the other targets' copies of this file).
constexpr int64_t kQ4KGroupSuper = kq_detail::kq_group_super(false);
constexpr int64_t kQ6KGroupSuper = kq_detail::kq_group_super(true);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define GEIST_KQG_VNNI_ATTR \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512vnni,avx2,fma,f16c")))

// Tokens per register tile; more tokens take several tiles, the later ones reading the group's
// rows from L1 / L2 (a group's super-block is 2.3 / 3.4 KiB).
constexpr int kKqTileMax = 4;

// T tokens (row layout: q [T][2][n_in], dx / sx [T][n_in / 32]) against the 16 rows of group
// grp; acc_out[t] lane r = output of row r for token t. Two chains per sum for up to 2 tokens
// (short dependency chains); more tokens are independent chains themselves and need the
// registers (5 zmm a token with two chains, 3 with one).
template <int T>
GEIST_KQG_VNNI_ATTR void KqGroupTile(const uint8_t* grp, int64_t n_in, const int8_t* q,
                                     const float* dx, const int32_t* sx, __m512 acc_out[T]) {
  const int64_t nb = n_in / 32;
  const __m512i nib = _mm512_set1_epi8(15);
  const __m512i m6 = _mm512_set1_epi32(63), m4 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3);
  __m512 acc[T];  // in registers: acc_out may alias dx (vector types may alias floats)
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  constexpr int kChains = T <= 2 ? 2 : 1;
  for (int64_t s = 0; s < n_in / kSuper; ++s) {
    const uint8_t* sb = grp + s * kQ4KGroupSuper;
    prefetch_stream(sb, kQ4KGroupSuper);
    // Header units of 16 rows: d | dmin << 16, then the 12 packed scale bytes as three words.
    const __m512i w0 = _mm512_loadu_si512(sb);
    const __m512i w1 = _mm512_loadu_si512(sb + 64);
    const __m512i w2 = _mm512_loadu_si512(sb + 128);
    const __m512i w3 = _mm512_loadu_si512(sb + 192);
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(w0));
    const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(w0, 16)));
    for (int c = 0; c < 4; ++c) {  // quant chunk c: sub-blocks 2c (low nibbles), 2c + 1 (high)
      __m512i lo[T][kChains], hi[T][kChains];  // [token][chain]; exact sums: the split is free
      for (int t = 0; t < T; ++t) {
        for (int ch = 0; ch < kChains; ++ch) lo[t][ch] = hi[t][ch] = _mm512_setzero_si512();
      }
      for (int g = 0; g < 8; ++g) {
        const __m512i v = _mm512_loadu_si512(sb + (4 + 8 * c + g) * 64);
        const __m512i wl = _mm512_and_si512(v, nib);
        const __m512i wh = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
        for (int t = 0; t < T; ++t) {
          const int8_t* xs = q + t * 2 * n_in + s * kSuper + 64 * c + 4 * g;
          int32_t xl, xh;
          std::memcpy(&xl, xs, 4);
          std::memcpy(&xh, xs + 32, 4);
          const int ch = kChains == 2 ? (g & 1) : 0;
          lo[t][ch] = _mm512_dpbusd_epi32(lo[t][ch], wl, _mm512_set1_epi32(xl));
          hi[t][ch] = _mm512_dpbusd_epi32(hi[t][ch], wh, _mm512_set1_epi32(xh));
        }
      }
      for (int half = 0; half < 2; ++half) {
        const int j = 2 * c + half;
        __m512i sc, m;  // quant_detail::k_scale_min for 16 rows
        if (j < 4) {
          sc = _mm512_and_si512(_mm512_srli_epi32(w1, 8 * j), m6);
          m = _mm512_and_si512(_mm512_srli_epi32(w2, 8 * j), m6);
        } else {
          const int sh = 8 * (j - 4);
          sc = _mm512_or_si512(
              _mm512_and_si512(_mm512_srli_epi32(w3, sh), m4),
              _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, sh + 6), m3), 4));
          m = _mm512_or_si512(
              _mm512_and_si512(_mm512_srli_epi32(w3, sh + 4), m4),
              _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w2, sh + 6), m3), 4));
        }
        const __m512 dsc = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc));
        const __m512 dmm = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(m));
        for (int t = 0; t < T; ++t) {
          __m512i isum = half == 0 ? lo[t][0] : hi[t][0];
          if constexpr (kChains == 2) {
            isum = _mm512_add_epi32(isum, half == 0 ? lo[t][1] : hi[t][1]);
          }
          const int64_t b = t * nb + s * 8 + j;
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                   _mm512_mul_ps(dsc, _mm512_set1_ps(dx[b])), acc[t]);
          acc[t] =
              _mm512_fmadd_ps(dmm, _mm512_set1_ps(-(static_cast<float>(sx[b]) * dx[b])), acc[t]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t) acc_out[t] = acc[t];
}

// Q6_K: per 32-block, the exact sums of each 16-element half (4 units), each times its int8
// scale after taking off 32 * the activations' half sum (q8_half_sums_row at q + n_in): the
// block's isum exactly, then acc = fma(isum, d * dx_b, acc).
template <int T>
GEIST_KQG_VNNI_ATTR void KqGroupTileQ6(const uint8_t* grp, int64_t n_in, const int8_t* q,
                                       const float* dx, __m512 acc_out[T]) {
  const int64_t nb = n_in / 32;
  const __m512i nib = _mm512_set1_epi8(15), two = _mm512_set1_epi8(3);
  // Blocks summed per pass over a half super-block's units (8 zmm of sums a token for 4): all
  // four for up to 2 tokens (each unit loaded once), two for more (their sums in registers; the
  // units are read twice, from L1).
  constexpr int kPass = T <= 2 ? 4 : T == 3 ? 2 : 1;
  __m512 acc[T];  // in registers: acc_out may alias dx (vector types may alias floats)
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t s = 0; s < n_in / kSuper; ++s) {
    const uint8_t* sb = grp + s * kQ6KGroupSuper;
    prefetch_stream(sb, kQ6KGroupSuper);
    // Units: ql 0-31, qh 32-47, the 16 int8 scales 48-51; then d [16] (f16).
    const __m512 d = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + kq_detail::kQ6KGroupD)));
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
      for (int k0 = 0; k0 < 4; k0 += kPass) {  // blocks 4h + k0 .. 4h + k0 + kPass - 1
        __m512i half[T][kPass][2];             // [token][block 4h + k0 + i][half]
        for (int t = 0; t < T; ++t) {
          for (int i = 0; i < kPass; ++i) half[t][i][0] = half[t][i][1] = _mm512_setzero_si512();
        }
        // Unrolled (and the pass loop above) so that half[][][g / 4] is a register and each code
        // a constant shift: GCC 12 leaves the loops rolled otherwise and keeps the sums on the
        // stack (a store-forwarding chain per multiply-add).
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          const __m512i ql0 = _mm512_loadu_si512(sb + (16 * h + g) * 64);
          const __m512i ql1 = _mm512_loadu_si512(sb + (16 * h + 8 + g) * 64);
          const __m512i qh = _mm512_loadu_si512(sb + (32 + 8 * h + g) * 64);
          for (int i = 0; i < kPass; ++i) {
            const int kk = k0 + i;
            const __m512i ql = kk % 2 ? ql1 : ql0;
            const __m512i lo = _mm512_and_si512(kk / 2 ? _mm512_srli_epi16(ql, 4) : ql, nib);
            const __m512i hi = _mm512_slli_epi16(
                _mm512_and_si512(_mm512_srli_epi16(qh, 2 * kk), two), 4);  // bytes <= 0x30
            const __m512i code = _mm512_or_si512(lo, hi);
            for (int t = 0; t < T; ++t) {
              int32_t xv;
              std::memcpy(&xv, q + t * 2 * n_in + (s * 8 + 4 * h + kk) * 32 + 4 * g, 4);
              half[t][i][g / 4] =
                  _mm512_dpbusd_epi32(half[t][i][g / 4], code, _mm512_set1_epi32(xv));
            }
          }
        }
        for (int i = 0; i < kPass; ++i) {
          const int k = 4 * h + k0 + i;
          __m512i sc[2];  // int8 scales of sub-blocks 2k, 2k + 1 (unit 48 + k / 2), 16 rows
          const __m512i sw = _mm512_loadu_si512(sb + (48 + k / 2) * 64);
          for (int e = 0; e < 2; ++e) {
            const int byte = 2 * (k % 2) + e;
            sc[e] = _mm512_srai_epi32(_mm512_slli_epi32(sw, 24 - 8 * byte), 24);
          }
          for (int t = 0; t < T; ++t) {
            const int64_t b = s * 8 + k;
            const auto* hs = reinterpret_cast<const int32_t*>(q + t * 2 * n_in + n_in) + b * 2;
            __m512i isum = _mm512_setzero_si512();
            for (int e = 0; e < 2; ++e) {
              const __m512i dot = _mm512_sub_epi32(half[t][i][e], _mm512_set1_epi32(32 * hs[e]));
              isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(dot, sc[e]));
            }
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                     _mm512_mul_ps(d, _mm512_set1_ps(dx[t * nb + b])), acc[t]);
          }
        }
      }
    }
  }
  for (int t = 0; t < T; ++t) acc_out[t] = acc[t];
}

// T tokens from t0 against group grp, stored to out[(t0 + j) * out_stride + r] for the group's
// real rows (keep).
template <bool kQ6, int T>
GEIST_KQG_VNNI_ATTR void KqGroupTileStore(const uint8_t* grp, int64_t n_in, const int8_t* q,
                                          const float* dx, const int32_t* sx, int64_t t0,
                                          __mmask16 keep, float* out, int64_t out_stride) {
  const int64_t nb = n_in / 32;
  __m512 acc[T];
  if constexpr (kQ6) {
    KqGroupTileQ6<T>(grp, n_in, q + t0 * 2 * n_in, dx + t0 * nb, acc);
  } else {
    KqGroupTile<T>(grp, n_in, q + t0 * 2 * n_in, dx + t0 * nb, sx + t0 * nb, acc);
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(out + (t0 + t) * out_stride, keep, acc[t]);
}

template <bool kQ6>
GEIST_KQG_VNNI_ATTR void KqGroupRowsVnni(const uint8_t* src, size_t row_bytes, int count,
                                         int64_t n_in, const int8_t* q, const float* dx,
                                         const int32_t* sx, int64_t n_tok, float* out,
                                         int64_t out_stride) {
  using Tile = void (*)(const uint8_t*, int64_t, const int8_t*, const float*, const int32_t*,
                        int64_t, __mmask16, float*, int64_t);
  static constexpr Tile kTiles[kKqTileMax] = {KqGroupTileStore<kQ6, 1>, KqGroupTileStore<kQ6, 2>,
                                              KqGroupTileStore<kQ6, 3>, KqGroupTileStore<kQ6, 4>};
  for (int r0 = 0; r0 < count; r0 += 16) {
    const uint8_t* grp = src + static_cast<size_t>(r0) * row_bytes;  // group r0 / 16
    const __mmask16 keep = count - r0 >= 16 ? static_cast<__mmask16>(0xffff)
                                            : static_cast<__mmask16>((1u << (count - r0)) - 1u);
    for (int64_t t = 0; t < n_tok;) {
      const int64_t left = n_tok - t;
      const int tile = static_cast<int>(left < kKqTileMax ? left : kKqTileMax);
      kTiles[tile - 1](grp, n_in, q, dx, sx, t, keep, out + r0, out_stride);
      t += tile;
    }
  }
}

bool KqGroupHasVnni() { return __builtin_cpu_supports("avx512vnni"); }
#pragma GCC diagnostic pop
#endif

void KqGroupRows(bool q6, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                 const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok, float* out,
                 int64_t out_stride) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (KqGroupHasVnni()) {
    (q6 ? KqGroupRowsVnni<true> : KqGroupRowsVnni<false>)(src, row_bytes, count, n_in, q, dx, sx,
                                                          n_tok, out, out_stride);
    return;
  }
#endif
  kq_detail::kq_rows_generic(q6, true, src, row_bytes, count, n_in, q, dx, sx, n_tok, out,
                             out_stride);
}

}  // namespace HWY_NAMESPACE
}  // namespace geist::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace geist::simd {

HWY_EXPORT(KqGroupRows);

void kq_detail::dot_kq_group_rows(bool q6, const uint8_t* src, size_t row_bytes, int count,
                                  int64_t n_in, const int8_t* q, const float* dx, const int32_t* sx,
                                  int64_t n_tok, float* out, int64_t out_stride) {
  HWY_DYNAMIC_DISPATCH(KqGroupRows)
  (q6, src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
}

}  // namespace geist::simd
#endif  // HWY_ONCE
