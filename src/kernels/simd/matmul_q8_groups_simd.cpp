// The Q8_0 / Q4_0 decode kernel on GROUPS16 weights (kernels/matmul.h), behind dot_q8_rows where
// AVX-512 VNNI is present (matmul_q8_simd.cpp): weight rows in the lanes, up to 4 tokens per
// weight load. foreach_target.h re-includes this file once per SIMD target; the HWY_ONCE part
// at the end holds the dispatcher.
//
// Every output follows the Q8 formula of matmul_simd.h (exact int32 block sums, then one fused
// multiply-add per block in block order), so it is bitwise what the panel kernel and the
// portable loops give, whatever the number of tokens.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/matmul_q8_groups_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target must come first.
#include "hwy/highway.h"

#ifndef GEIST_KERNELS_SIMD_MATMUL_Q8_GROUPS_SIMD_ONCE
#define GEIST_KERNELS_SIMD_MATMUL_Q8_GROUPS_SIMD_ONCE
#include <cstring>

#include "base/status.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd/matmul_simd.h"
#include "kernels/simd/stream_prefetch.h"

#if HWY_ARCH_X86
#include <immintrin.h>
#endif
#endif  // GEIST_KERNELS_SIMD_MATMUL_Q8_GROUPS_SIMD_ONCE

HWY_BEFORE_NAMESPACE();
namespace geist::simd {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// GCC 12's _mm512_undefined_* self-initialise, which -Wmaybe-uninitialized flags in inlined
// intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define GEIST_Q8G_VNNI_ATTR \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512vnni,avx2,fma,f16c")))

// Decode on GROUPS16 weights: one 64-byte load is a quant unit of 16 rows, the activation
// bytes are broadcast, so each vpdpbusd adds 4 products to each of 16 rows' block sums: no
// horizontal adds. Up to kGroupTileMax tokens share each weight load (a decode step of several
// sessions reads the weights once). For few tokens two accumulators per plane keep the
// dependency chains short; more tokens are independent chains themselves (and need the
// registers). The sums are exact, so their order does not matter.
// Tokens per register tile (5 zmm each for Q8_0). GCC 12 unrolls the token loops fully up to 4
// and keeps the tile in registers; at 5-8 it leaves them rolled, with the sums on the stack.
// More tokens take several tiles, the later ones reading the group's rows from L1 / L2.
constexpr int kGroupTileMax = 4;

// T tokens from t0 (row layout: q [n_tok][2][n_in], dx / sx [n_tok][n_in / 32]) against the 16
// rows of group grp, stored to out[(t0 + j) * out_stride + r] for the group's real rows (keep).
template <bool kQ4, int T>
GEIST_Q8G_VNNI_ATTR void GroupTileVnni(const uint8_t* grp, int64_t nb, int64_t n_in,
                                       const int8_t* q_all, const float* dx_all,
                                       const int32_t* sx_all, int64_t t0, __mmask16 keep,
                                       float* out, int64_t out_stride) {
  const int8_t* q = q_all + t0 * 2 * n_in;
  const float* dx = dx_all + t0 * nb;
  const int32_t* sx = sx_all + t0 * nb;
  __m512 acc[T];
  constexpr int64_t kStride = 16 * (kQ4 ? quant_detail::kQ4_0Bytes : quant_detail::kQ8_0Bytes);
  // Chains per token and plane: enough independent multiply-add chains to hide their latency.
  constexpr int kChains = T <= 2 || (kQ4 && T <= 4) ? 2 : 1;
  const __m512i m4 = _mm512_set1_epi8(15);
  const __m512i fine = _mm512_set1_epi32(kQ8Fine);
  const __m512i offset = _mm512_set1_epi32(kQ4 ? 8 : 128);  // the quants' bias
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * kStride;
    prefetch_stream(blk, kStride, /*near=*/true);  // each weight byte is read once
    __m512i s1[T][kChains], s2[T][kChains];        // [token][chain]: coarse and fine plane sums
    for (int t = 0; t < T; ++t) {
      for (int c = 0; c < kChains; ++c) s1[t][c] = s2[t][c] = _mm512_setzero_si512();
    }
    auto bcast = [&](int t, int plane, int at) {
      int32_t v;
      std::memcpy(&v, q + t * 2 * n_in + plane * n_in + b * 32 + at, 4);
      return _mm512_set1_epi32(v);
    };
    if constexpr (kQ4) {  // one plane (q8_planes)
      for (int u = 0; u < 4; ++u) {
        const __m512i v = _mm512_loadu_si512(blk + 32 + u * 64);
        const __m512i lo = _mm512_and_si512(v, m4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        for (int t = 0; t < T; ++t) {
          s1[t][0] = _mm512_dpbusd_epi32(s1[t][0], lo, bcast(t, 0, 4 * u));
          s1[t][kChains - 1] = _mm512_dpbusd_epi32(s1[t][kChains - 1], hi, bcast(t, 0, 16 + 4 * u));
        }
      }
    } else {
      for (int u = 0; u < 8; ++u) {
        const __m512i w = _mm512_loadu_si512(blk + 32 + u * 64);
        const int c = kChains == 2 ? (u & 1) : 0;
        for (int t = 0; t < T; ++t) {
          s1[t][c] = _mm512_dpbusd_epi32(s1[t][c], w, bcast(t, 0, 4 * u));
          s2[t][c] = _mm512_dpbusd_epi32(s2[t][c], w, bcast(t, 1, 4 * u));
        }
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    for (int t = 0; t < T; ++t) {
      __m512i isum = s1[t][0];
      if constexpr (kChains == 2) isum = _mm512_add_epi32(isum, s1[t][1]);
      if constexpr (!kQ4) {
        __m512i fsum = s2[t][0];
        if constexpr (kChains == 2) fsum = _mm512_add_epi32(fsum, s2[t][1]);
        isum = _mm512_add_epi32(_mm512_mullo_epi32(isum, fine), fsum);
      }
      isum = _mm512_sub_epi32(isum, _mm512_mullo_epi32(_mm512_set1_epi32(sx[t * nb + b]), offset));
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(dx[t * nb + b]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(out + (t0 + t) * out_stride, keep, acc[t]);
}

template <bool kQ4>
GEIST_Q8G_VNNI_ATTR void DotQ8GroupsVnni(const uint8_t* src, size_t row_bytes, int count,
                                         int64_t n_in, const int8_t* q, const float* dx,
                                         const int32_t* sx, int64_t n_tok, float* out,
                                         int64_t out_stride) {
  using Tile = void (*)(const uint8_t*, int64_t, int64_t, const int8_t*, const float*,
                        const int32_t*, int64_t, __mmask16, float*, int64_t);
  static constexpr Tile kTiles[kGroupTileMax] = {GroupTileVnni<kQ4, 1>, GroupTileVnni<kQ4, 2>,
                                                 GroupTileVnni<kQ4, 3>, GroupTileVnni<kQ4, 4>};
  const int64_t nb = n_in / 32;
  for (int r0 = 0; r0 < count; r0 += 16) {
    const uint8_t* grp = src + static_cast<size_t>(r0) * row_bytes;  // group r0 / 16
    const __mmask16 keep = count - r0 >= 16 ? static_cast<__mmask16>(0xffff)
                                            : static_cast<__mmask16>((1u << (count - r0)) - 1u);
    float* o = out + r0;
    for (int64_t t = 0; t < n_tok;) {
      const int64_t left = n_tok - t;
      const int tile = static_cast<int>(left < kGroupTileMax ? left : kGroupTileMax);
      kTiles[tile - 1](grp, nb, n_in, q, dx, sx, t, keep, o, out_stride);
      t += tile;
    }
  }
}

#pragma GCC diagnostic pop
#endif

void Q8GroupRows(bool q4, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                 const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok, float* out,
                 int64_t out_stride) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  (q4 ? DotQ8GroupsVnni<true> : DotQ8GroupsVnni<false>)(src, row_bytes, count, n_in, q, dx, sx,
                                                        n_tok, out, out_stride);
#else
  (void)q4, (void)src, (void)row_bytes, (void)count, (void)n_in, (void)q, (void)dx, (void)sx;
  (void)n_tok, (void)out, (void)out_stride;
  GEIST_CHECK(false, "dot_q8_group_rows: only the AVX-512 VNNI kernels call it");
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace geist::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace geist::simd {

HWY_EXPORT(Q8GroupRows);

void dot_q8_group_rows(bool q4, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                       const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok,
                       float* out, int64_t out_stride) {
  HWY_DYNAMIC_DISPATCH(Q8GroupRows)
  (q4, src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
}

}  // namespace geist::simd
#endif  // HWY_ONCE
