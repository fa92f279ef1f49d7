// 8-bit activation kernels for Q4_K and Q6_K weights, read in the file's super-blocks (see
// matmul_simd.h, "Q8 path", K-quants); the prefill kernel also reads their GROUPS16 layout,
// whose decode kernels are in matmul_kq_groups_simd.cpp. foreach_target.h re-includes this file
// once per SIMD target; the HWY_ONCE part at the end holds the dispatchers and the half-sum
// writers.
//
// Every output follows the per-block formula of matmul_simd.h: exact int32 block sums, then
// a fixed chain of fused multiply-adds in block order, so the decode kernel (weight rows in
// lanes) and the prefill kernel (tokens in lanes) give the same bits, on every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/matmul_kq_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target must come first.
#include "hwy/highway.h"

#ifndef GEIST_KERNELS_SIMD_MATMUL_KQ_SIMD_ONCE
#define GEIST_KERNELS_SIMD_MATMUL_KQ_SIMD_ONCE
#include <cmath>
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

// Two vectors of 16 int32 lanes -> lanes 0-7: a's adjacent pairs summed, 8-15: b's.
GEIST_KQ_VNNI_ATTR inline __m512i PairSum(__m512i a, __m512i b, __m512i even, __m512i odd) {
  return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b),
                          _mm512_permutex2var_epi32(a, odd, b));
}

// Decode: 16 weight rows in the lanes of the f32 accumulator. Per row and super-block four
// vpdpbusd give z[k] = [block first(k) | block second(k)] in 8 lanes each (4 products per
// lane); three PairSum levels over the 16 rows and one final split leave, per block, one
// vector of its 16 rows' exact sums. Row r's accumulator chain runs in lane r.
//   Q4_K: z[0] = [sub 0 | sub 2], z[1] = [1 | 3], z[2] = [4 | 6], z[3] = [5 | 7] (a 64-byte
//         load holds two chunks: low nibbles sub 2c, high nibbles sub 2c + 1).
//   Q6_K: z[k] = [block 2k | block 2k + 1], each lane times its 16-element scale first.
constexpr int kFirst[2][4] = {{0, 1, 4, 5}, {0, 2, 4, 6}};   // [q6][k]
constexpr int kSecond[2][4] = {{2, 3, 6, 7}, {1, 3, 5, 7}};  // [q6][k]
constexpr int64_t kPrefetchSupers = 6;                       // super-blocks ahead, per row

template <bool kQ6>
GEIST_KQ_VNNI_ATTR inline void RowDots(const uint8_t* blk, const __m512i x[4], const __m512i c[4],
                                       __m512i z[4]) {
  const __m512i m4 = _mm512_set1_epi8(15);
  constexpr int64_t kBytes = kQ6 ? kQ6_KBytes : kQ4_KBytes;
  for (int64_t l = 0; l < kBytes; l += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchSupers * kBytes + l), _MM_HINT_T0);
  }
  if constexpr (!kQ6) {
    for (int h = 0; h < 2; ++h) {
      const __m512i v = _mm512_loadu_si512(blk + 16 + 64 * h);
      const __m512i lo = _mm512_and_si512(v, m4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      z[2 * h] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, x[2 * h]);
      z[2 * h + 1] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi, x[2 * h + 1]);
    }
  } else {
    const __m512i m30 = _mm512_set1_epi8(0x30);
    const __m512i shl_lo = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2);
    const __m512i shr_hi = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
    for (int h = 0; h < 2; ++h) {
      const __m512i v = _mm512_loadu_si512(blk + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h)));
      // code = nibble | (two high bits << 4); 0xEC: (a & c) | b
      const __m512i lo = _mm512_ternarylogic_epi32(
          v, _mm512_and_si512(_mm512_sllv_epi64(qh, shl_lo), m30), m4, 0xEC);
      const __m512i hi = _mm512_ternarylogic_epi32(
          _mm512_srli_epi16(v, 4), _mm512_and_si512(_mm512_srlv_epi64(qh, shr_hi), m30), m4, 0xEC);
      for (int k2 = 0; k2 < 2; ++k2) {
        const int k = 2 * h + k2;  // blocks 2k, 2k + 1: sub-blocks 4k .. 4k + 3
        const __m128i pat = _mm_setr_epi8(
            static_cast<char>(4 * k), static_cast<char>(4 * k), static_cast<char>(4 * k),
            static_cast<char>(4 * k), static_cast<char>(4 * k + 1), static_cast<char>(4 * k + 1),
            static_cast<char>(4 * k + 1), static_cast<char>(4 * k + 1),
            static_cast<char>(4 * k + 2), static_cast<char>(4 * k + 2),
            static_cast<char>(4 * k + 2), static_cast<char>(4 * k + 2),
            static_cast<char>(4 * k + 3), static_cast<char>(4 * k + 3),
            static_cast<char>(4 * k + 3), static_cast<char>(4 * k + 3));
        const __m512i scale = _mm512_cvtepi8_epi32(_mm_shuffle_epi8(sc, pat));
        const __m512i dot = _mm512_dpbusd_epi32(c[k], k2 == 0 ? lo : hi, x[k]);
        z[k] = _mm512_mullo_epi32(dot, scale);
      }
    }
  }
}

template <bool kQ6>
GEIST_KQ_VNNI_ATTR void KqRowsVnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                                   const int8_t* q, const float* dx, const int32_t* sx,
                                   int64_t n_tok, float* out, int64_t out_stride) {
  constexpr int64_t kBytes = kQ6 ? kQ6_KBytes : kQ4_KBytes;
  const int64_t nsb = n_in / kSuper, nb = n_in / 32;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i m6 = _mm512_set1_epi32(63);
  for (int r0 = 0; r0 < count; r0 += 16) {
    const int nr = count - r0 < 16 ? count - r0 : 16;
    const uint8_t* rows[16];
    alignas(64) int32_t off[16];
    for (int r = 0; r < 16; ++r) {
      rows[r] = src + static_cast<size_t>(r0 + (r < nr ? r : 0)) * row_bytes;
      off[r] = static_cast<int32_t>(rows[r] - rows[0]);
    }
    const __m512i offs = _mm512_load_si512(off);
    for (int64_t t = 0; t < n_tok; ++t) {
      const int8_t* qt = q + t * 2 * n_in;
      __m512 acc = _mm512_setzero_ps();
      for (int64_t s = 0; s < nsb; ++s) {
        const uint8_t* base = rows[0] + s * kBytes;
        const int8_t* xs = qt + s * kSuper;
        __m512i x[4], c[4];
        for (int k = 0; k < 4; ++k) {
          // Q4_K: [sub k' | sub k' + 2] with k' = 4 * (k / 2) + k % 2; Q6_K: 64 bytes in order.
          const int a = kQ6 ? 2 * k : kFirst[0][k];
          const int b = kQ6 ? 2 * k + 1 : kSecond[0][k];
          x[k] = _mm512_inserti64x4(
              _mm512_castsi256_si512(
                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs + 32 * a))),
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs + 32 * b)), 1);
          if constexpr (kQ6) {
            // -32 * (half sums) in the first lane of each 16-element half.
            const int32_t* hs = reinterpret_cast<const int32_t*>(qt + n_in) + (s * 8 + 2 * k) * 2;
            c[k] = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_setzero_si512(),
                                                      _mm512_maskz_expandloadu_epi32(0x1111, hs)),
                                     5);
          } else {
            c[k] = _mm512_setzero_si512();
          }
        }
        __m512i f[2][4];  // [rows 0-7 / 8-15][k]: lane 2r + i = row r, block first/second
        for (int h8 = 0; h8 < 2; ++h8) {
          __m512i l3[4];
          for (int h4 = 0; h4 < 2; ++h4) {
            __m512i l2[4];
            for (int h2 = 0; h2 < 2; ++h2) {
              const int r = 8 * h8 + 4 * h4 + 2 * h2;
              __m512i za[4], zb[4];
              RowDots<kQ6>(rows[r] + s * kBytes, x, c, za);
              RowDots<kQ6>(rows[r + 1] + s * kBytes, x, c, zb);
              for (int k = 0; k < 4; ++k) {
                const __m512i l1 = PairSum(za[k], zb[k], even, odd);
                l2[k] = h2 == 0 ? l1 : PairSum(l2[k], l1, even, odd);
              }
            }
            for (int k = 0; k < 4; ++k) l3[k] = h4 == 0 ? l2[k] : PairSum(l3[k], l2[k], even, odd);
          }
          for (int k = 0; k < 4; ++k) f[h8][k] = l3[k];
        }
        __m512i isum[8];
        for (int k = 0; k < 4; ++k) {
          isum[kFirst[kQ6][k]] = _mm512_permutex2var_epi32(f[0][k], even, f[1][k]);
          isum[kSecond[kQ6][k]] = _mm512_permutex2var_epi32(f[0][k], odd, f[1][k]);
        }
        if constexpr (kQ6) {
          const __m512i w = _mm512_i32gather_epi32(offs, base + 206, 1);  // d in the top half
          const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(w, 16)));
          for (int k = 0; k < 8; ++k) {
            const __m512 scale = _mm512_mul_ps(d, _mm512_set1_ps(dx[t * nb + s * 8 + k]));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[k]), scale, acc);
          }
        } else {
          const __m512i w0 = _mm512_i32gather_epi32(offs, base, 1);
          const __m512i w1 = _mm512_i32gather_epi32(offs, base + 4, 1);
          const __m512i w2 = _mm512_i32gather_epi32(offs, base + 8, 1);
          const __m512i w3 = _mm512_i32gather_epi32(offs, base + 12, 1);
          const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(w0));
          const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(w0, 16)));
          const __m512i m4 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3);
          for (int j = 0; j < 8; ++j) {
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
            const int64_t b = t * nb + s * 8 + j;
            const __m512 dsc = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc));
            const __m512 dmm = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(m));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]),
                                  _mm512_mul_ps(dsc, _mm512_set1_ps(dx[b])), acc);
            acc = _mm512_fmadd_ps(dmm, _mm512_set1_ps(-(static_cast<float>(sx[b]) * dx[b])), acc);
          }
        }
      }
      alignas(64) float res[16];
      _mm512_store_ps(res, acc);
      for (int r = 0; r < nr; ++r) out[t * out_stride + r0 + r] = res[r];
    }
  }
}

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

// Prefill: tokens in lanes, 4 weight rows x P panels of 16 tokens per register tile, like the
// Q4_0 panel kernel; each broadcast of 4 code bytes serves P * 16 tokens. Per 32-block: the
// exact sums (Q6_K: one per 16-element half, combined exactly in f32), then the formula's fmas.
// kGroups: rows[] in a GROUPS16 group (lanes[] their places in it), read a 4-byte unit at a
// time (KqAt).
template <bool kQ6, bool kGroups, int P>
GEIST_KQ_VNNI_ATTR void KqPanelTile(const uint8_t* const rows[4], const int64_t lanes[4],
                                    int64_t nb, const int8_t* pq, const float* pdx,
                                    const int32_t* psx, float acc_out[4][P][16]) {
  constexpr int64_t kBytes = kQ6 ? kQ6_KBytes : kQ4_KBytes;
  const int64_t panel_q = nb * 1024;  // bytes of one panel (q1 plane, then the half sums)
  const __m512i m4 = _mm512_set1_epi8(15);
  __m512 acc[4][P];
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  }
  for (int64_t s = 0; s < nb / 8; ++s) {
    float dsc[4][8], dmm[4][8], d6[4];
    for (int r = 0; r < 4; ++r) {
      if constexpr (kQ6) {
        const uint8_t* dp = kGroups ? rows[r] - 4 * lanes[r] + s * kq_detail::kq_group_super(true) +
                                          kq_detail::kQ6KGroupD + 2 * lanes[r]
                                    : rows[r] + s * kBytes + 208;
        d6[r] = f16_to_f32(load_u16(dp));
      } else {
        uint8_t head[16];  // d, dmin, the 12 scale bytes
        for (int u = 0; u < 4; ++u)
          std::memcpy(head + 4 * u, KqAt<kQ6, kGroups>(rows[r], s, 4 * u), 4);
        kq_detail::q4k_scales(head, dsc[r], dmm[r]);
      }
    }
    if constexpr (!kQ6) {
      // Sub-blocks 2c and 2c + 1 share their bytes (low / high nibbles): one broadcast feeds
      // both blocks' sums, which then enter the chain in block order.
      for (int k = 0; k < 8; k += 2) {
        const int64_t b = s * 8 + k;
        const int8_t* a = pq + b * 512;
        __m512i sum[2][4][P];  // [block k / k + 1][row][panel]
        for (int h = 0; h < 2; ++h) {
          for (int r = 0; r < 4; ++r) {
            for (int p = 0; p < P; ++p) sum[h][r][p] = _mm512_setzero_si512();
          }
        }
        for (int g = 0; g < 8; ++g) {
          __m512i xl[P], xh[P];
          for (int p = 0; p < P; ++p) {
            xl[p] = _mm512_loadu_si512(a + p * panel_q + g * 64);
            xh[p] = _mm512_loadu_si512(a + 512 + p * panel_q + g * 64);
          }
          for (int r = 0; r < 4; ++r) {
            int32_t bits;
            std::memcpy(&bits, KqAt<kQ6, kGroups>(rows[r], s, 16 + 32 * (k / 2) + 4 * g), 4);
            const __m512i v = _mm512_set1_epi32(bits);
            const __m512i lo = _mm512_and_si512(v, m4);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            for (int p = 0; p < P; ++p) {
              sum[0][r][p] = _mm512_dpbusd_epi32(sum[0][r][p], lo, xl[p]);
              sum[1][r][p] = _mm512_dpbusd_epi32(sum[1][r][p], hi, xh[p]);
            }
          }
        }
        for (int h = 0; h < 2; ++h) {
          const int64_t bh = b + h;
          __m512 dxv[P], nsx[P];  // nsx = -(float(sx) * dx)
          for (int p = 0; p < P; ++p) {
            dxv[p] = _mm512_loadu_ps(pdx + p * nb * 16 + bh * 16);
            const __m512 fsx = _mm512_cvtepi32_ps(_mm512_loadu_si512(psx + p * nb * 16 + bh * 16));
            nsx[p] = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(fsx, dxv[p]));
          }
          for (int r = 0; r < 4; ++r) {
            const __m512 sc = _mm512_set1_ps(dsc[r][k + h]), mm = _mm512_set1_ps(dmm[r][k + h]);
            for (int p = 0; p < P; ++p) {
              acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[h][r][p]),
                                          _mm512_mul_ps(sc, dxv[p]), acc[r][p]);
              acc[r][p] = _mm512_fmadd_ps(mm, nsx[p], acc[r][p]);
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
        const int h = k / 4, kk = k % 4;
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
              const uint32_t ql =
                  load_u32(KqAt<kQ6, kGroups>(rows[r], s, 64 * h + 32 * (kk % 2) + 4 * g));
              const uint32_t qh = load_u32(KqAt<kQ6, kGroups>(rows[r], s, 128 + 32 * h + 4 * g));
              const uint32_t code =
                  ((ql >> (4 * (kk / 2))) & 0x0F0F0F0Fu) | (((qh >> (2 * kk)) & 0x03030303u) << 4);
              const __m512i w = _mm512_set1_epi32(static_cast<int32_t>(code));
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
            const auto sc_s =
                static_cast<int8_t>(*KqAt<kQ6, kGroups>(rows[r], s, 192 + 2 * k + half));
            const __m512 sc = _mm512_set1_ps(static_cast<float>(sc_s));
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
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(acc_out[r][p], acc[r][p]);
  }
}

template <bool kQ6, bool kGroups>
GEIST_KQ_VNNI_ATTR void KqPanelsVnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                                     const int8_t* pq, const float* pdx, const int32_t* psx,
                                     int64_t n_tok, float* out, int64_t out_stride) {
  const int64_t nb = n_in / 32;
  const int64_t n_panels = (n_tok + kQ8Panel - 1) / kQ8Panel;
  constexpr int kTileP = 2;
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
    for (int64_t p0 = 0; p0 < n_panels; p0 += kTileP) {
      alignas(64) float res[4][kTileP][16];
      const int np = static_cast<int>(n_panels - p0 >= kTileP ? kTileP : n_panels - p0);
      const int8_t* q = pq + p0 * nb * 1024;
      const float* d = pdx + p0 * nb * 16;
      const int32_t* sx = psx + p0 * nb * 16;
      if (np == kTileP) {
        KqPanelTile<kQ6, kGroups, kTileP>(rows, lanes, nb, q, d, sx, res);
      } else {
        float res1[4][1][16];
        KqPanelTile<kQ6, kGroups, 1>(rows, lanes, nb, q, d, sx, res1);
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

bool KqHasVnni() { return __builtin_cpu_supports("avx512vnni"); }
#pragma GCC diagnostic pop
#endif

void KqRows(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
            const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok, float* out,
            int64_t out_stride) {
  const bool q6 = t == GgmlType::Q6_K;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (KqHasVnni()) {
    (q6 ? KqRowsVnni<true> : KqRowsVnni<false>)(src, row_bytes, count, n_in, q, dx, sx, n_tok, out,
                                                out_stride);
    return;
  }
#endif
  kq_detail::kq_rows_generic(q6, false, src, row_bytes, count, n_in, q, dx, sx, n_tok, out,
                             out_stride);
}

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

HWY_EXPORT(KqRows);
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
  HWY_DYNAMIC_DISPATCH(KqRows)(t, src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
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
