// 8-bit activation prefill kernels for Q4_K and Q6_K weights (see matmul_simd.h, "Q8 path",
// K-quants), reading the file's super-blocks or the GROUPS16 layout; the decode kernels are in
// matmul_kq_groups_simd.cpp (GROUPS16) and kq_detail::kq_rows_generic (file rows: the CPU
// backend repacks every K-quant matrix where the 8-bit kernels exist). foreach_target.h
// re-includes this file once per SIMD target; the HWY_ONCE part at the end holds the
// dispatchers and the half-sum writers.
//
// Every output follows the per-block formula of matmul_simd.h: exact int32 block sums, then
// a fixed chain of fused multiply-adds in block order, so the decode kernels (weight rows in
// lanes) and the prefill kernel (tokens in lanes) give the same bits, on every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/matmul_kq_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target must come first.
#include "hwy/highway.h"

#ifndef GEIST_KERNELS_SIMD_MATMUL_KQ_SIMD_ONCE
#define GEIST_KERNELS_SIMD_MATMUL_KQ_SIMD_ONCE
#include <cstring>

#include "base/status.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd/f16.h"
#include "kernels/simd/matmul_kq_detail.h"
#include "kernels/simd/matmul_simd.h"

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

#endif  // GEIST_KERNELS_SIMD_MATMUL_KQ_SIMD_ONCE

HWY_BEFORE_NAMESPACE();
namespace geist::simd {
namespace HWY_NAMESPACE {

using kq_detail::kSuper;
using quant_detail::kQ4_KBytes;
using quant_detail::kQ6_KBytes;
using quant_detail::load_u16;
using quant_detail::load_u32;

// Portable form of the formula for panels (targets without VNNI, and the tests' oracle through
// them); kq_detail::kq_rows_generic is the one for rows.
void KqPanelsGeneric(bool q6, bool groups, const uint8_t* src, size_t row_bytes, int count,
                     int64_t n_in, const int8_t* pq, const float* pdx, const int32_t* psx,
                     int64_t n_tok, float* out, int64_t out_stride) {
  const int64_t nb = n_in / 32;
  for (int r = 0; r < count; ++r) {
    const kq_detail::KqRowBlocks row = kq_detail::kq_row_blocks(q6, groups, src, row_bytes, r);
    for (int64_t t = 0; t < n_tok; ++t) {
      const int64_t p = t / kQ8Panel, lane = t % kQ8Panel;
      const int8_t* base = pq + p * nb * 1024;
      auto act = [&](int64_t b, int i) {
        return int32_t{base[((b * 8 + i / 4) * 16 + lane) * 4 + i % 4]};
      };
      out[t * out_stride + r] = kq_detail::dot_generic(q6, row, n_in, act, pdx + p * nb * 16 + lane,
                                                       psx + p * nb * 16 + lane, 16);
    }
  }
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// AVX-512 VNNI (vpdpbusd: 4 u8 x s8 products per int32 lane), checked at run time. The
// unsigned operand is the weight code; Q6_K's -32 comes off through the activations' half sums.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define GEIST_KQ_VNNI_ATTR \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512vnni,avx2,fma,f16c")))

// Byte `off` (< 208 for Q6_K: not its d) of super-block s of one weight row: `row` is the row
// (ROWS) or, in a GROUPS16 group, the row's first byte (group start + lane * 4); its 4-byte
// units are 64 bytes apart.
template <bool kQ6, bool kGroups>
inline const uint8_t* KqAt(const uint8_t* row, int64_t s, int64_t off) {
  if constexpr (kGroups) {
    return row + s * kq_detail::kq_group_super(kQ6) + (off / 4) * kq_detail::kGroupRows * 4 +
           off % 4;
  } else {
    return row + s * (kQ6 ? kQ6_KBytes : kQ4_KBytes) + off;
  }
}

// A row quad's super-blocks [s0, s1) decoded once for all its token tiles (they were decoded
// again for every 32-token tile). Q4_K (up to kKqScaleSupers): the per-block factors d * sc_j
// and dmin * m_j. Q6_K (up to kKqQ6Supers, so that the codes stay in L1 next to the
// activations): the 6-bit codes assembled from their low and high bits, 4 a word, and the
// 16-element scales.
constexpr int64_t kKqScaleSupers = 32;
constexpr int64_t kKqQ6Supers = 8;
struct KqScales {
  float dsc[kKqScaleSupers][4][8];  // [super-block][row][sub-block]
  float dmm[kKqScaleSupers][4][8];
  uint32_t q6[kKqQ6Supers][8][8][4];  // [super-block][32-block][4-byte unit][row]
  float q6sc[kKqQ6Supers][4][16];     // [super-block][row][16-element half]
};

// Q6_K super-block s of a row quad: code words (code = low nibble | high 2 bits << 4, as in
// kq_detail::block_codes) and the int8 16-element scales as floats. GROUPS16 keeps a quad's
// 4-byte units side by side, so 16-byte vectors assemble all four rows at once.
template <bool kGroups>
GEIST_KQ_VNNI_ATTR void Q6Unpack(const uint8_t* const rows[4], int64_t s, uint32_t codes[8][8][4],
                                 float sc[4][16]) {
  for (int k = 0; k < 8; ++k) {
    const int h = k / 4, kk = k % 4;
    for (int g = 0; g < 8; ++g) {
      if constexpr (kGroups) {
        const __m128i ql = _mm_loadu_si128(reinterpret_cast<const __m128i*>(
            KqAt<true, true>(rows[0], s, 64 * h + 32 * (kk % 2) + 4 * g)));
        const __m128i qh = _mm_loadu_si128(
            reinterpret_cast<const __m128i*>(KqAt<true, true>(rows[0], s, 128 + 32 * h + 4 * g)));
        const __m128i lo =
            _mm_and_si128(_mm_srl_epi32(ql, _mm_cvtsi32_si128(4 * (kk / 2))), _mm_set1_epi8(15));
        const __m128i hi = _mm_slli_epi32(
            _mm_and_si128(_mm_srl_epi32(qh, _mm_cvtsi32_si128(2 * kk)), _mm_set1_epi8(3)), 4);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(codes[k][g]), _mm_or_si128(lo, hi));
      } else {
        for (int r = 0; r < 4; ++r) {
          const uint32_t ql =
              load_u32(KqAt<true, false>(rows[r], s, 64 * h + 32 * (kk % 2) + 4 * g));
          const uint32_t qh = load_u32(KqAt<true, false>(rows[r], s, 128 + 32 * h + 4 * g));
          codes[k][g][r] =
              ((ql >> (4 * (kk / 2))) & 0x0F0F0F0Fu) | (((qh >> (2 * kk)) & 0x03030303u) << 4);
        }
      }
    }
  }
  for (int r = 0; r < 4; ++r) {
    for (int j = 0; j < 16; ++j) {
      sc[r][j] = static_cast<float>(static_cast<int8_t>(*KqAt<true, kGroups>(rows[r], s, 192 + j)));
    }
  }
}

// Prefill: tokens in lanes, 4 weight rows x P panels of 16 tokens per register tile, like the
// Q4_0 panel kernel; each broadcast of 4 code bytes serves P * 16 tokens. Per 32-block: the
// exact sums (Q6_K: one per 16-element half, combined exactly in f32), then the formula's fmas.
// kGroups: rows[] in a GROUPS16 group (lanes[] their places in it), read a 4-byte unit at a
// time (KqAt).
template <bool kQ6, bool kGroups, int P>
GEIST_KQ_VNNI_ATTR void KqPanelTile(const uint8_t* const rows[4], const int64_t lanes[4],
                                    int64_t nb, int64_t s0, int64_t s1, const KqScales& scales,
                                    const int8_t* pq, const float* pdx, const int32_t* psx,
                                    bool first, float acc_io[4][P][16]) {
  constexpr int64_t kBytes = kQ6 ? kQ6_KBytes : kQ4_KBytes;
  const int64_t panel_q = nb * 1024;  // bytes of one panel (q1 plane, then the half sums)
  const __m512i m4 = _mm512_set1_epi8(15);
  __m512 acc[4][P];
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < P; ++p) {
      acc[r][p] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc_io[r][p]);
    }
  }
  for (int64_t s = s0; s < s1; ++s) {
    const float(*dsc)[8] = nullptr;  // [row][sub-block]
    const float(*dmm)[8] = nullptr;
    float d6[4];
    if constexpr (kQ6) {
      for (int r = 0; r < 4; ++r) {
        const uint8_t* dp = kGroups ? rows[r] - 4 * lanes[r] + s * kq_detail::kq_group_super(true) +
                                          kq_detail::kQ6KGroupD + 2 * lanes[r]
                                    : rows[r] + s * kBytes + 208;
        d6[r] = f16_to_f32(load_u16(dp));
      }
    } else {
      dsc = scales.dsc[s - s0];
      dmm = scales.dmm[s - s0];
    }
    if constexpr (!kQ6) {
      // Sub-blocks 2c and 2c + 1 share their bytes (low / high nibbles): one broadcast feeds
      // both blocks' sums, which then enter the chain in block order. The high nibbles stay in
      // place (v & 0xF0 is 16 x the code, so the sum is 16 x the exact one and an arithmetic
      // shift recovers it) to spare a shift per broadcast. The g loop is unrolled: left as a
      // loop, GCC shuffles the 16 sums between registers every iteration (measured 20 % slower).
      for (int k = 0; k < 8; k += 2) {
        const int64_t b = s * 8 + k;
        const int8_t* a = pq + b * 512;
        __m512 dxv[2][P], nsx[2][P];  // [block k / k + 1][panel]; nsx = -(float(sx) * dx)
        for (int h = 0; h < 2; ++h) {
          for (int p = 0; p < P; ++p) {
            dxv[h][p] = _mm512_loadu_ps(pdx + p * nb * 16 + (b + h) * 16);
            const __m512 fsx =
                _mm512_cvtepi32_ps(_mm512_loadu_si512(psx + p * nb * 16 + (b + h) * 16));
            nsx[h][p] = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(fsx, dxv[h][p]));
          }
        }
        __m512i sum[2][4][P];  // [block k / k + 1][row][panel]
        for (int h = 0; h < 2; ++h) {
          for (int r = 0; r < 4; ++r) {
            for (int p = 0; p < P; ++p) sum[h][r][p] = _mm512_setzero_si512();
          }
        }
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          __m512i xl[P], xh[P];
          for (int p = 0; p < P; ++p) {
            xl[p] = _mm512_loadu_si512(a + p * panel_q + g * 64);
            xh[p] = _mm512_loadu_si512(a + 512 + p * panel_q + g * 64);
          }
          for (int r = 0; r < 4; ++r) {
            const __m512i v = _mm512_set1_epi32(static_cast<int32_t>(
                load_u32(KqAt<kQ6, kGroups>(rows[r], s, 16 + 32 * (k / 2) + 4 * g))));
            const __m512i lo = _mm512_and_si512(v, m4);
            const __m512i hi16 = _mm512_andnot_si512(m4, v);
            for (int p = 0; p < P; ++p) {
              sum[0][r][p] = _mm512_dpbusd_epi32(sum[0][r][p], lo, xl[p]);
              sum[1][r][p] = _mm512_dpbusd_epi32(sum[1][r][p], hi16, xh[p]);
            }
          }
        }
        for (int r = 0; r < 4; ++r) {
          for (int p = 0; p < P; ++p) {
            for (int h = 0; h < 2; ++h) {
              const __m512 sc = _mm512_set1_ps(dsc[r][k + h]);
              const __m512 mm = _mm512_set1_ps(dmm[r][k + h]);
              const __m512i isum = h == 0 ? sum[0][r][p] : _mm512_srai_epi32(sum[1][r][p], 4);
              acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(sc, dxv[h][p]),
                                          acc[r][p]);
              acc[r][p] = _mm512_fmadd_ps(mm, nsx[h][p], acc[r][p]);
            }
          }
        }
      }
    } else {
      for (int k = 0; k < 8; ++k) {
        const int64_t b = s * 8 + k;
        const int8_t* a = pq + b * 512;
        __m512 dxv[P];
        for (int p = 0; p < P; ++p) dxv[p] = _mm512_loadu_ps(pdx + p * nb * 16 + b * 16);
        __m512 part[4][P];  // sc_s * (dot16 - 32 * half sum), exact
        for (int half = 0; half < 2; ++half) {
          __m512i sum[4][P];
          for (int r = 0; r < 4; ++r) {
            for (int p = 0; p < P; ++p) sum[r][p] = _mm512_setzero_si512();
          }
          for (int g = 4 * half; g < 4 * half + 4; ++g) {
            __m512i x[P];
            for (int p = 0; p < P; ++p) x[p] = _mm512_loadu_si512(a + p * panel_q + g * 64);
            for (int r = 0; r < 4; ++r) {
              const __m512i w = _mm512_set1_epi32(static_cast<int32_t>(scales.q6[s - s0][k][g][r]));
              for (int p = 0; p < P; ++p) sum[r][p] = _mm512_dpbusd_epi32(sum[r][p], w, x[p]);
            }
          }
          __m512i corr[P];
          for (int p = 0; p < P; ++p) {
            const int32_t* hs =
                reinterpret_cast<const int32_t*>(pq + p * panel_q + nb * 512) + (b * 2 + half) * 16;
            corr[p] = _mm512_slli_epi32(_mm512_loadu_si512(hs), 5);
          }
          for (int r = 0; r < 4; ++r) {
            const __m512 sc = _mm512_set1_ps(scales.q6sc[s - s0][r][2 * k + half]);
            for (int p = 0; p < P; ++p) {
              const __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(sum[r][p], corr[p]));
              part[r][p] = half == 0 ? _mm512_mul_ps(f, sc) : _mm512_fmadd_ps(f, sc, part[r][p]);
            }
          }
        }
        for (int r = 0; r < 4; ++r) {
          const __m512 d = _mm512_set1_ps(d6[r]);
          for (int p = 0; p < P; ++p) {
            acc[r][p] = _mm512_fmadd_ps(part[r][p], _mm512_mul_ps(d, dxv[p]), acc[r][p]);
          }
        }
      }
    }
  }
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(acc_io[r][p], acc[r][p]);
  }
}

template <bool kQ6, bool kGroups>
GEIST_KQ_VNNI_ATTR void KqPanelsVnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                                     const int8_t* pq, const float* pdx, const int32_t* psx,
                                     int64_t n_tok, float* out, int64_t out_stride) {
  const int64_t nb = n_in / 32, n_super = nb / 8;
  const int64_t n_panels = (n_tok + kQ8Panel - 1) / kQ8Panel;
  constexpr int kTileP = 2;
  KqScales scales;
  for (int r0 = 0; r0 < count; r0 += 4) {
    const int nr = count - r0 < 4 ? count - r0 : 4;
    // A tail's missing rows repeat the first (GROUPS16: its padding rows); outputs dropped.
    const uint8_t* rows[4];
    int64_t lanes[4];
    for (int r = 0; r < 4; ++r) {
      lanes[r] = (r0 + r) % kq_detail::kGroupRows;
      if constexpr (kGroups) {
        const int64_t o = r0 + r;
        rows[r] =
            src +
            static_cast<size_t>(o / kq_detail::kGroupRows) * kq_detail::kGroupRows * row_bytes +
            o % kq_detail::kGroupRows * 4;
      } else {
        rows[r] = src + static_cast<size_t>(r0 + (r < nr ? r : 0)) * row_bytes;
      }
    }
    // The k range in pieces whose Q4_K scales fit KqScales, decoded once for all token tiles;
    // a piece after the first carries the accumulators through out (exact f32 round trip).
    constexpr int64_t kPiece = kQ6 ? kKqQ6Supers : kKqScaleSupers;
    for (int64_t s0 = 0; s0 < n_super; s0 += kPiece) {
      const int64_t s1 = n_super - s0 < kPiece ? n_super : s0 + kPiece;
      const bool first = s0 == 0;
      if constexpr (kQ6) {
        for (int64_t s = s0; s < s1; ++s)
          Q6Unpack<kGroups>(rows, s, scales.q6[s - s0], scales.q6sc[s - s0]);
      } else {
        for (int64_t s = s0; s < s1; ++s) {
          for (int r = 0; r < 4; ++r) {
            uint8_t head[16];  // d, dmin, the 12 scale bytes
            for (int u = 0; u < 4; ++u)
              std::memcpy(head + 4 * u, KqAt<kQ6, kGroups>(rows[r], s, 4 * u), 4);
            kq_detail::q4k_scales(head, scales.dsc[s - s0][r], scales.dmm[s - s0][r]);
          }
        }
      }
      for (int64_t p0 = 0; p0 < n_panels; p0 += kTileP) {
        alignas(64) float res[4][kTileP][16] = {};
        const int np = static_cast<int>(n_panels - p0 >= kTileP ? kTileP : n_panels - p0);
        if (!first) {
          for (int p = 0; p < np; ++p) {
            for (int j = 0; j < 16; ++j) {
              const int64_t t = (p0 + p) * kQ8Panel + j;
              if (t >= n_tok) break;
              for (int r = 0; r < nr; ++r) res[r][p][j] = out[t * out_stride + r0 + r];
            }
          }
        }
        const int8_t* q = pq + p0 * nb * 1024;
        const float* d = pdx + p0 * nb * 16;
        const int32_t* sx = psx + p0 * nb * 16;
        if (np == kTileP) {
          KqPanelTile<kQ6, kGroups, kTileP>(rows, lanes, nb, s0, s1, scales, q, d, sx, first, res);
        } else {
          float res1[4][1][16];
          for (int r = 0; r < 4; ++r) std::memcpy(res1[r][0], res[r][0], sizeof(res1[r][0]));
          KqPanelTile<kQ6, kGroups, 1>(rows, lanes, nb, s0, s1, scales, q, d, sx, first, res1);
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
}

bool KqHasVnni() { return __builtin_cpu_supports("avx512vnni"); }
#pragma GCC diagnostic pop
#endif

void KqPanels(GgmlType t, bool groups, const uint8_t* src, size_t row_bytes, int count,
              int64_t n_in, const int8_t* pq, const float* pdx, const int32_t* psx, int64_t n_tok,
              float* out, int64_t out_stride) {
  const bool q6 = t == GgmlType::Q6_K;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (KqHasVnni()) {
    auto* kernel = q6 ? (groups ? KqPanelsVnni<true, true> : KqPanelsVnni<true, false>)
                      : (groups ? KqPanelsVnni<false, true> : KqPanelsVnni<false, false>);
    kernel(src, row_bytes, count, n_in, pq, pdx, psx, n_tok, out, out_stride);
    return;
  }
#endif
  KqPanelsGeneric(q6, groups, src, row_bytes, count, n_in, pq, pdx, psx, n_tok, out, out_stride);
}

}  // namespace HWY_NAMESPACE
}  // namespace geist::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace geist::simd {

HWY_EXPORT(KqPanels);

void q8_half_sums_row(int8_t* q, int64_t n_in) {
  GEIST_CHECK(n_in % 32 == 0, "q8_half_sums_row: n_in must be a multiple of 32");
  for (int64_t b = 0; b < n_in / 32; ++b) {
    int32_t hs[2] = {0, 0};
    for (int i = 0; i < 32; ++i) hs[i / 16] += q[b * 32 + i];
    std::memcpy(q + n_in + b * 8, hs, sizeof(hs));
  }
}

void q8_half_sums_panel(int8_t* pq, int64_t nb, int64_t lane) {
  GEIST_CHECK(lane >= 0 && lane < kQ8Panel, "q8_half_sums_panel: bad lane");
  for (int64_t b = 0; b < nb; ++b) {
    int32_t hs[2] = {0, 0};
    for (int i = 0; i < 32; ++i) hs[i / 16] += pq[((b * 8 + i / 4) * 16 + lane) * 4 + i % 4];
    for (int h = 0; h < 2; ++h) {
      std::memcpy(pq + nb * 512 + ((b * 2 + h) * 16 + lane) * 4, &hs[h], sizeof(int32_t));
    }
  }
}

void dot_kq_rows(GgmlType t, bool groups, const uint8_t* src, size_t row_bytes, int count,
                 int64_t n_in, const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok,
                 float* out, int64_t out_stride) {
  GEIST_CHECK((t == GgmlType::Q4_K || t == GgmlType::Q6_K) && n_in % 256 == 0,
              "dot_kq_rows: Q4_K or Q6_K rows of whole super-blocks");
  if (groups) {
    kq_detail::dot_kq_group_rows(t == GgmlType::Q6_K, src, row_bytes, count, n_in, q, dx, sx, n_tok,
                                 out, out_stride);
    return;
  }
  // File-layout rows on any target: the CPU backend repacks every K-quant matrix to GROUPS16
  // where the 8-bit kernels exist (weight_groups16_useful), so these are the tests' and the
  // off-VNNI machines' rows, and one portable kernel serves them.
  kq_detail::kq_rows_generic(t == GgmlType::Q6_K, false, src, row_bytes, count, n_in, q, dx, sx,
                             n_tok, out, out_stride);
}

void dot_kq_panels(GgmlType t, bool groups, const uint8_t* src, size_t row_bytes, int count,
                   int64_t n_in, const int8_t* pq, const float* pdx, const int32_t* psx,
                   int64_t n_tok, float* out, int64_t out_stride) {
  GEIST_CHECK((t == GgmlType::Q4_K || t == GgmlType::Q6_K) && n_in % 256 == 0,
              "dot_kq_panels: Q4_K or Q6_K rows of whole super-blocks");
  HWY_DYNAMIC_DISPATCH(KqPanels)
  (t, groups, src, row_bytes, count, n_in, pq, pdx, psx, n_tok, out, out_stride);
}

}  // namespace geist::simd
#endif  // HWY_ONCE
