// 8-bit activation kernels for Q8_0 and Q4_0 weights (see matmul_simd.h, "Q8 path"; their
// GROUPS16 decode kernel is in matmul_q8_groups_simd.cpp); Q4_K and Q6_K have theirs in
// matmul_kq_simd.cpp, reached through the dispatchers here.
// foreach_target.h re-includes this file once per SIMD target; the HWY_ONCE part at the end
// holds the dispatchers and the target-independent quantizers.
//
// Every output is defined by one scalar formula (q8_dot_reference in matmul_simd.h): exact int32
// block sums, then one fused multiply-add per block in block order. The integer part may be
// computed in any order and lane layout, so the decode kernel (weight rows in lanes) and the
// prefill kernel (tokens in lanes) give the same bits, on every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/matmul_q8_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target must come first.
#include "hwy/highway.h"

#ifndef GEIST_KERNELS_SIMD_MATMUL_Q8_SIMD_ONCE
#define GEIST_KERNELS_SIMD_MATMUL_Q8_SIMD_ONCE
#include <cmath>
#include <cstring>

#include "base/status.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd/f16.h"
#include "kernels/simd/matmul_q8_packed.h"
#include "kernels/simd/matmul_simd.h"

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

namespace geist::simd::q8_detail {

// Where one weight row's bytes lie, in either layout (kernels/matmul.h): block b's f16 scale at
// scale + b * stride, its 4-byte quant unit u at quants + b * stride + u * unit.
struct RowRef {
  const uint8_t* scale;
  const uint8_t* quants;
  int64_t stride;  // bytes from one block to the next
  int64_t unit;    // bytes from one 4-byte unit to the next
  bool biased;     // Q8_0 quants stored as w + 128 (GROUPS16)
};

inline RowRef row_ref(bool q4, bool groups, const uint8_t* src, size_t row_bytes, int r) {
  const int64_t bb = q4 ? quant_detail::kQ4_0Bytes : quant_detail::kQ8_0Bytes;
  if (!groups) {
    const uint8_t* row = src + static_cast<size_t>(r) * row_bytes;
    return {row, row + 2, bb, 4, false};
  }
  const uint8_t* grp = src + static_cast<size_t>(r / 16) * 16 * row_bytes;
  const int lane = r % 16;
  return {grp + 2 * lane, grp + 32 + 4 * lane, 16 * bb, 64, !q4};
}

// Signed weight values of block b of a Q8_0 / Q4_0 row, and its scale. Q4_0 unit u holds
// elements 4u..4u+3 in its low nibbles and 16+4u.. in its high ones.
inline float unpack_block(bool q4, const RowRef& row, int64_t b, int8_t* w) {
  const uint8_t* qs = row.quants + b * row.stride;
  for (int u = 0; u < (q4 ? 4 : 8); ++u) {
    const uint8_t* p = qs + u * row.unit;
    for (int k = 0; k < 4; ++k) {
      if (q4) {
        w[4 * u + k] = static_cast<int8_t>((p[k] & 15) - 8);
        w[16 + 4 * u + k] = static_cast<int8_t>((p[k] >> 4) - 8);
      } else {
        w[4 * u + k] = static_cast<int8_t>(row.biased ? p[k] ^ 0x80 : p[k]);
      }
    }
  }
  return f16_to_f32(quant_detail::load_u16(row.scale + b * row.stride));
}

}  // namespace geist::simd::q8_detail
#endif  // GEIST_KERNELS_SIMD_MATMUL_Q8_SIMD_ONCE

HWY_BEFORE_NAMESPACE();
namespace geist::simd {
namespace HWY_NAMESPACE {

// Portable form of the contract, used on targets without the 8-bit multiply-add below and for
// their tails: per (row, token) the exact block sums and the fused multiply-add chain.
void DotQ8Generic(bool q4, bool groups, const uint8_t* src, size_t row_bytes, int count,
                  int64_t n_in, const int8_t* q, const float* dx, int64_t n_tok, float* out,
                  int64_t out_stride) {
  const int64_t nb = n_in / 32;
  int8_t w[32];
  for (int r = 0; r < count; ++r) {
    const q8_detail::RowRef row = q8_detail::row_ref(q4, groups, src, row_bytes, r);
    for (int64_t t = 0; t < n_tok; ++t) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const float dw = q8_detail::unpack_block(q4, row, b, w);
        const int8_t* qb = q + t * 2 * n_in + b * 32;  // coarse plane, fine plane n_in later
        int32_t i1 = 0, i2 = 0;
        for (int i = 0; i < 32; ++i) {
          i1 += int32_t{w[i]} * qb[i];
          if (!q4) i2 += int32_t{w[i]} * qb[n_in + i];
        }
        const int32_t isum = q4 ? i1 : kQ8Fine * i1 + i2;
        acc = std::fma(static_cast<float>(isum), dw * dx[t * nb + b], acc);
      }
      out[t * out_stride + r] = acc;
    }
  }
}

// The same contract read from the panel layout (non-VNNI targets).
void DotQ8PanelsGeneric(bool q4, bool groups, const uint8_t* src, size_t row_bytes, int count,
                        int64_t n_in, const int8_t* pq, const float* pdx, int64_t n_tok, float* out,
                        int64_t out_stride) {
  const int64_t nb = n_in / 32;
  int8_t w[32];
  for (int r = 0; r < count; ++r) {
    const q8_detail::RowRef row = q8_detail::row_ref(q4, groups, src, row_bytes, r);
    for (int64_t t = 0; t < n_tok; ++t) {
      const int64_t p = t / kQ8Panel, lane = t % kQ8Panel;
      const int8_t* base = pq + p * nb * 1024;
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const float dw = q8_detail::unpack_block(q4, row, b, w);
        int32_t i1 = 0, i2 = 0;
        for (int i = 0; i < 32; ++i) {
          const int64_t at = ((b * 8 + i / 4) * 16 + lane) * 4 + i % 4;
          i1 += int32_t{w[i]} * base[at];
          if (!q4) i2 += int32_t{w[i]} * base[nb * 512 + at];
        }
        const int32_t isum = q4 ? i1 : kQ8Fine * i1 + i2;
        acc = std::fma(static_cast<float>(isum), dw * pdx[(p * nb + b) * 16 + lane], acc);
      }
      out[t * out_stride + r] = acc;
    }
  }
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// AVX-512 VNNI (vpdpbusd: 4 u8 x s8 products per int32 lane), checked at run time: Highway
// 1.0.3's AVX3 target does not assume it. The unsigned operand is the weight: Q4_0 nibbles as
// they are (w + 8), Q8_0 bytes xor 0x80 (w + 128); the offset times the activation block sum
// sx comes off the exact int32 sum.
// GCC 12's _mm512_undefined_* self-initialise, which -Wmaybe-uninitialized flags in inlined
// intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define GEIST_VNNI_ATTR \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512vnni,avx2,fma,f16c")))

// Tokens in lanes: 4 weight rows x 2 panels of 16 tokens per register tile; each broadcast of 4
// weight bytes serves 32 tokens, each activation load 4 rows. Row r's block b: f16 scale at
// scale[r] + b * kStride, quant unit u at quants[r] + b * kStride + u * kUnit (q8_detail::RowRef;
// GROUPS16 stores Q8_0 quants already biased, the file's need the xor).
template <bool kQ4, int P, bool kGroups>
GEIST_VNNI_ATTR void PanelTileVnni(const uint8_t* const scale[4], const uint8_t* const quants[4],
                                   int64_t nb, const int8_t* pq, const float* pdx,
                                   const int32_t* psx, float acc_out[4][P][16]) {
  constexpr int64_t kBB = kQ4 ? quant_detail::kQ4_0Bytes : quant_detail::kQ8_0Bytes;
  constexpr int64_t kStride = kGroups ? 16 * kBB : kBB;
  constexpr int64_t kUnit = kGroups ? 64 : 4;
  const __m512i m4 = _mm512_set1_epi8(15);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[4][P];
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  }
  const int64_t panel_q = nb * 1024;  // bytes of one panel's activations (two planes)
  const __m512i fine = _mm512_set1_epi32(kQ8Fine);
  for (int64_t b = 0; b < nb; ++b) {
    __m512i s[4][P];                  // exact block sums kQ8Fine * dot(w, q1) + dot(w, q2)
    const int8_t* a1 = pq + b * 512;  // coarse plane of block b, panel 0
    const int8_t* a2 = pq + nb * 512 + b * 512;  // fine plane
    if constexpr (kQ4) {
      // One plane (q8_planes): each nibble unpack serves the low and the high half-block.
      for (int r = 0; r < 4; ++r) {
        for (int p = 0; p < P; ++p) s[r][p] = _mm512_setzero_si512();
      }
      for (int g = 0; g < 4; ++g) {
        __m512i xlo[P], xhi[P];
        for (int p = 0; p < P; ++p) {
          xlo[p] = _mm512_loadu_si512(a1 + p * panel_q + g * 64);
          xhi[p] = _mm512_loadu_si512(a1 + p * panel_q + (g + 4) * 64);
        }
        for (int r = 0; r < 4; ++r) {
          int32_t bits;
          std::memcpy(&bits, quants[r] + b * kStride + g * kUnit, 4);
          const __m512i v = _mm512_set1_epi32(bits);
          const __m512i lo = _mm512_and_si512(v, m4);
          const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
          for (int p = 0; p < P; ++p) {
            s[r][p] = _mm512_dpbusd_epi32(s[r][p], lo, xlo[p]);
            s[r][p] = _mm512_dpbusd_epi32(s[r][p], hi, xhi[p]);
          }
        }
      }
    } else {
      for (int r = 0; r < 4; ++r) {
        for (int p = 0; p < P; ++p) s[r][p] = _mm512_setzero_si512();
      }
      // Coarse plane, times kQ8Fine, then the fine plane into the same exact sums.
      for (int plane = 0; plane < 2; ++plane) {
        const int8_t* a = plane == 0 ? a1 : a2;
        if (plane == 1) {
          for (int r = 0; r < 4; ++r) {
            for (int p = 0; p < P; ++p) s[r][p] = _mm512_mullo_epi32(s[r][p], fine);
          }
        }
        for (int g = 0; g < 8; ++g) {
          __m512i x[P];
          for (int p = 0; p < P; ++p) x[p] = _mm512_loadu_si512(a + p * panel_q + g * 64);
          for (int r = 0; r < 4; ++r) {
            int32_t bits;
            std::memcpy(&bits, quants[r] + b * kStride + g * kUnit, 4);
            const __m512i w =
                kGroups ? _mm512_set1_epi32(bits) : _mm512_xor_si512(_mm512_set1_epi32(bits), flip);
            for (int p = 0; p < P; ++p) s[r][p] = _mm512_dpbusd_epi32(s[r][p], w, x[p]);
          }
        }
      }
    }
    __m512i corr[P];
    __m512 dxv[P];
    for (int p = 0; p < P; ++p) {
      const __m512i sx = _mm512_loadu_si512(psx + p * nb * 16 + b * 16);
      corr[p] = kQ4 ? _mm512_slli_epi32(sx, 3) : _mm512_slli_epi32(sx, 7);
      dxv[p] = _mm512_loadu_ps(pdx + p * nb * 16 + b * 16);
    }
    for (int r = 0; r < 4; ++r) {
      const __m512 dw = _mm512_set1_ps(f16_to_f32(quant_detail::load_u16(scale[r] + b * kStride)));
      for (int p = 0; p < P; ++p) {
        const __m512 fs = _mm512_cvtepi32_ps(_mm512_sub_epi32(s[r][p], corr[p]));
        acc[r][p] = _mm512_fmadd_ps(fs, _mm512_mul_ps(dw, dxv[p]), acc[r][p]);
      }
    }
  }
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(acc_out[r][p], acc[r][p]);
  }
}

template <bool kQ4, bool kGroups>
GEIST_VNNI_ATTR void DotQ8PanelsVnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                                     const int8_t* pq, const float* pdx, const int32_t* psx,
                                     int64_t n_tok, float* out, int64_t out_stride) {
  const int64_t nb = n_in / 32;
  const int64_t n_panels = (n_tok + kQ8Panel - 1) / kQ8Panel;
  // Panels per register tile. 4 for Q8_0 (each weight broadcast serving 64 tokens) measured
  // 25 % slower than 2 on this machine, as did sharing broadcasts across planes for Q8_0.
  constexpr int kTileP = 2;
  for (int r0 = 0; r0 < count; r0 += 4) {
    const int nr = count - r0 < 4 ? count - r0 : 4;
    const uint8_t* scale[4];
    const uint8_t* quants[4];
    // Missing rows of a tail repeat the first (GROUPS16: its padding rows); their outputs are
    // dropped.
    for (int r = 0; r < 4; ++r) {
      const q8_detail::RowRef ref =
          q8_detail::row_ref(kQ4, kGroups, src, row_bytes, r0 + (r < nr || kGroups ? r : 0));
      scale[r] = ref.scale;
      quants[r] = ref.quants;
    }
    for (int64_t p0 = 0; p0 < n_panels; p0 += kTileP) {
      alignas(64) float res[4][kTileP][16];
      const int np = static_cast<int>(n_panels - p0 >= kTileP ? kTileP : n_panels - p0);
      const int8_t* q = pq + p0 * nb * 1024;
      const float* d = pdx + p0 * nb * 16;
      const int32_t* sx = psx + p0 * nb * 16;
      if (np == kTileP) {
        PanelTileVnni<kQ4, kTileP, kGroups>(scale, quants, nb, q, d, sx, res);
      } else {
        // Fewer panels left: one-panel tiles (same bits, panels are independent).
        for (int p = 0; p < np; ++p) {
          float res1[4][1][16];
          PanelTileVnni<kQ4, 1, kGroups>(scale, quants, nb, q + p * nb * 1024, d + p * nb * 16,
                                         sx + p * nb * 16, res1);
          for (int r = 0; r < 4; ++r) std::memcpy(res[r][p], res1[r][0], sizeof(res1[r][0]));
        }
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

// Weight rows in lanes (decode): per block, eight rows' 8-lane vpdpbusd sums folded into one
// vector of eight block sums by a horizontal-add tree.
template <bool kQ4>
GEIST_VNNI_ATTR void DotQ8RowsVnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                                   const int8_t* q, const float* dx, const int32_t* sx,
                                   int64_t n_tok, float* out, int64_t out_stride) {
  constexpr int64_t kBB = kQ4 ? quant_detail::kQ4_0Bytes : quant_detail::kQ8_0Bytes;
  const int64_t nb = n_in / 32;
  const __m256i m4 = _mm256_set1_epi8(15);
  const __m256i nib_shift = _mm256_setr_epi64x(0, 0, 4, 4);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i fine = _mm256_set1_epi32(kQ8Fine);
  for (int r0 = 0; r0 < count; r0 += 8) {
    const int nr = count - r0 < 8 ? count - r0 : 8;
    const uint8_t* rows[8];
    for (int r = 0; r < 8; ++r)
      rows[r] = src + static_cast<size_t>(r0 + (r < nr ? r : 0)) * row_bytes;
    for (int64_t t = 0; t < n_tok; ++t) {
      const int8_t* qt = q + t * 2 * n_in;  // coarse plane, fine plane n_in later
      __m256 acc = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const __m256i xs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qt + b * 32));
        const __m256i xf =
            kQ4 ? xs : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qt + n_in + b * 32));
        __m256i p[8];
        uint16_t dh[8];
        for (int r = 0; r < 8; ++r) {
          const uint8_t* blk = rows[r] + b * kBB;
          dh[r] = quant_detail::load_u16(blk);
          __m256i w;
          if constexpr (kQ4) {
            // Both halves hold the 16 bytes; the high half shifted by 4: its nibbles.
            const __m256i v = _mm256_broadcastsi128_si256(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)));
            w = _mm256_and_si256(_mm256_srlv_epi64(v, nib_shift), m4);
          } else {
            w = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)),
                                 flip);
          }
          p[r] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, xs);
          if constexpr (!kQ4) p[r] = _mm256_dpbusd_epi32(_mm256_mullo_epi32(p[r], fine), w, xf);
        }
        const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]), h23 = _mm256_hadd_epi32(p[2], p[3]);
        const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]), h67 = _mm256_hadd_epi32(p[6], p[7]);
        const __m256i h03 = _mm256_hadd_epi32(h01, h23), h47 = _mm256_hadd_epi32(h45, h67);
        __m256i isum = _mm256_add_epi32(_mm256_permute2x128_si256(h03, h47, 0x20),
                                        _mm256_permute2x128_si256(h03, h47, 0x31));
        isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(sx[t * nb + b] * (kQ4 ? 8 : 128)));
        __m128i hv;
        std::memcpy(&hv, dh, sizeof(hv));
        const __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(hv), _mm256_set1_ps(dx[t * nb + b]));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc);
      }
      alignas(32) float res[8];
      _mm256_store_ps(res, acc);
      for (int r = 0; r < nr; ++r) out[t * out_stride + r0 + r] = res[r];
    }
  }
}

bool HasVnni() { return __builtin_cpu_supports("avx512vnni"); }

// q8_detail::quantize_block_q8 on 16 lanes, bitwise: the same scalar scales, one IEEE multiply
// per step, round-to-nearest-even as nearbyint in the default mode, and max / min (equal to
// the scalar comparisons for NaN-free input). The empty asm keeps d * v rounded to f32 on its
// own, as the scalar code does: GCC would otherwise fuse it into the subtraction (fp-contract).
template <int kPlanes>
int32_t QuantizeBlockQ8Avx3(const float* x, int8_t* q1, int8_t* q2, float* dx_out) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
  const float amax =
      _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(x0, abs_mask), _mm512_and_ps(x1, abs_mask)));
  const float d = amax / 127.0f;
  const float dx = d / static_cast<float>(kQ8Fine);
  const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
  const float idx = amax > 0.0f ? 1.0f / dx : 0.0f;
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  const __m512 vd = _mm512_set1_ps(d), vid = _mm512_set1_ps(id), vidx = _mm512_set1_ps(idx);
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  __m512i sum = _mm512_setzero_si512();
  for (int h = 0; h < 2; ++h) {
    const __m512 xh = h == 0 ? x0 : x1;
    __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(xh, vid), kNearest);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    if constexpr (kPlanes == 1) {
      const __m512i vi = _mm512_cvtps_epi32(v);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q1 + 16 * h), _mm512_cvtepi32_epi8(vi));
      sum = _mm512_add_epi32(sum, vi);
      continue;
    }
    __m512 dv = _mm512_mul_ps(vd, v);
    __asm__("" : "+v"(dv));
    __m512 f = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_sub_ps(xh, dv), vidx), kNearest);
    f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
    const __m512i vi = _mm512_cvtps_epi32(v), fi = _mm512_cvtps_epi32(f);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q1 + 16 * h), _mm512_cvtepi32_epi8(vi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q2 + 16 * h), _mm512_cvtepi32_epi8(fi));
    sum = _mm512_add_epi32(
        sum, _mm512_add_epi32(_mm512_mullo_epi32(vi, _mm512_set1_epi32(kQ8Fine)), fi));
  }
  *dx_out = kPlanes == 1 ? d : dx;
  return _mm512_reduce_add_epi32(sum);
}
#pragma GCC diagnostic pop
#else
bool HasVnni() { return false; }
#endif

// Row layout: q1 plane at q, q2 plane at q + n_in. Targets without the AVX-512 quantizer call
// the scalar definition out of line: inlined here, GCC would contract d * v into an FMA on the
// FMA-capable targets and change the bits.
void QuantizeRowQ8(const float* x, int64_t n_in, int planes, int8_t* q, float* dx, int32_t* sx) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  auto* block = planes == 1 ? QuantizeBlockQ8Avx3<1> : QuantizeBlockQ8Avx3<2>;
  for (int64_t b = 0; b < n_in / 32; ++b) {
    sx[b] = block(x + b * 32, q + b * 32, q + n_in + b * 32, dx + b);
  }
#else
  quantize_row_q8_reference(x, n_in, planes, q, dx, sx);
#endif
}

void DotQ8Rows(GgmlType t, bool groups, const uint8_t* src, size_t row_bytes, int count,
               int64_t n_in, const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok,
               float* out, int64_t out_stride) {
  const bool q4 = t == GgmlType::Q4_0;
  GEIST_CHECK(q4 || t == GgmlType::Q8_0, "dot_q8_rows: Q8_0 or Q4_0 only");
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (HasVnni()) {
    if (groups) {
      dot_q8_group_rows(q4, src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
    } else {
      (q4 ? DotQ8RowsVnni<true> : DotQ8RowsVnni<false>)(src, row_bytes, count, n_in, q, dx, sx,
                                                        n_tok, out, out_stride);
    }
    return;
  }
#endif
  (void)sx;
  DotQ8Generic(q4, groups, src, row_bytes, count, n_in, q, dx, n_tok, out, out_stride);
}

void DotQ8Panels(GgmlType t, bool groups, const uint8_t* src, size_t row_bytes, int count,
                 int64_t n_in, const int8_t* pq, const float* pdx, const int32_t* psx,
                 int64_t n_tok, float* out, int64_t out_stride) {
  const bool q4 = t == GgmlType::Q4_0;
  GEIST_CHECK(q4 || t == GgmlType::Q8_0, "dot_q8_panels: Q8_0 or Q4_0 only");
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (HasVnni()) {
    auto* kernel = q4 ? (groups ? DotQ8PanelsVnni<true, true> : DotQ8PanelsVnni<true, false>)
                      : (groups ? DotQ8PanelsVnni<false, true> : DotQ8PanelsVnni<false, false>);
    kernel(src, row_bytes, count, n_in, pq, pdx, psx, n_tok, out, out_stride);
    return;
  }
#endif
  (void)psx;
  DotQ8PanelsGeneric(q4, groups, src, row_bytes, count, n_in, pq, pdx, n_tok, out, out_stride);
}

bool Q8Fast() { return HasVnni(); }

}  // namespace HWY_NAMESPACE
}  // namespace geist::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace geist::simd {

HWY_EXPORT(DotQ8Rows);
HWY_EXPORT(DotQ8Panels);
HWY_EXPORT(Q8Fast);
HWY_EXPORT(QuantizeRowQ8);

bool q8_path_supported(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_K || t == GgmlType::Q6_K;
}

bool q8_panels_fast() { return HWY_DYNAMIC_DISPATCH(Q8Fast)(); }

int64_t q8_rows_max(GgmlType t, bool groups) {
  if (!groups || !q8_panels_fast()) return 2;
  // Measured with bench/matmul_speed's layouts forced (`compare`) on matrices cold in cache, as a
  // decode step's are (RING_MB; docs/BENCHMARKS.md, "Batched decode at B = 16" and "Session 24"):
  // the largest token count at which the decode kernel's tiles still beat the panels, with a
  // margin, on both the 2048 x 8192 and the 8192 x 2048 shapes.
  switch (t) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_K:
      return 64;
    case GgmlType::Q4_1:
    case GgmlType::Q6_K:
      return 48;
    case GgmlType::IQ4_NL:
      return 24;
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::IQ4_XS:
    case GgmlType::Q2_K:
      return 16;
    case GgmlType::Q3_K:
    case GgmlType::Q5_K:
      return 8;
    default:
      return 2;
  }
}

void quantize_row_q8(const float* x, int64_t n_in, int planes, int8_t* q, float* dx, int32_t* sx) {
  GEIST_CHECK(n_in % 32 == 0 && (planes == 1 || planes == 2),
              "quantize_row_q8: n_in must be a multiple of 32, planes 1 or 2");
  HWY_DYNAMIC_DISPATCH(QuantizeRowQ8)(x, n_in, planes, q, dx, sx);
}

void dot_q8_rows(GgmlType t, bool groups, const uint8_t* src, size_t row_bytes, int count,
                 int64_t n_in, const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok,
                 float* out, int64_t out_stride) {
  if (groups && i8m_type(t)) {
    dot_i8m_rows(t, src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
    return;
  }
  if (groups && q8p_type(t)) {
    dot_q8p_rows(t, src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
    return;
  }
  if (t == GgmlType::Q4_K || t == GgmlType::Q6_K) {
    dot_kq_rows(t, groups, src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
    return;
  }
  HWY_DYNAMIC_DISPATCH(DotQ8Rows)
  (t, groups, src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
}

void dot_q8_panels(GgmlType t, bool groups, const uint8_t* src, size_t row_bytes, int count,
                   int64_t n_in, const int8_t* pq, const float* pdx, const int32_t* psx,
                   int64_t n_tok, float* out, int64_t out_stride) {
  if (groups && i8m_type(t)) {
    dot_i8m_panels(t, src, row_bytes, count, n_in, pq, pdx, psx, n_tok, out, out_stride);
    return;
  }
  if (groups && q8p_type(t)) {
    dot_q8p_panels(t, src, row_bytes, count, n_in, pq, pdx, psx, n_tok, out, out_stride);
    return;
  }
  if (t == GgmlType::Q4_K || t == GgmlType::Q6_K) {
    dot_kq_panels(t, groups, src, row_bytes, count, n_in, pq, pdx, psx, n_tok, out, out_stride);
    return;
  }
  HWY_DYNAMIC_DISPATCH(DotQ8Panels)
  (t, groups, src, row_bytes, count, n_in, pq, pdx, psx, n_tok, out, out_stride);
}

}  // namespace geist::simd
#endif  // HWY_ONCE
