// Kernels of the Q8P form (matmul_q8_packed.h): Q5_0 and IQ4_NL weights with their codes packed
// (the file's bytes per block), computed by the one-plane formula of matmul_simd.h (Q4_0's): per
// block isum = dot(w, q1), exact in int32, then acc = fma(float(isum), dw * dx_b, acc) in block
// order. AVX-512 VNNI: decode with the 16 rows of a group in the lanes (IQ4_NL's nibbles looked
// up to kIq4Values + 128 by vpshufb, Q5_0's joined with their high bits in registers, the
// unsigned operand biased by 128 / 16, the bias times the activation sum taken off the exact
// sum, as the Q8_0 kernels do); prefill with 16 tokens of a panel in the lanes, from a 16-row
// group's blocks unpacked by the same vector code to biased 8-bit words once for all its row
// quads and token tiles. Elsewhere the portable loops. The same integers and float operations in
// the same order everywhere, so the bits agree on every target.
#include <cmath>
#include <cstring>
#include <memory>

#include "base/status.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd/f16.h"
#include "kernels/simd/matmul_q8_packed.h"
#include "kernels/simd/matmul_simd.h"
#include "kernels/simd/stream_prefetch.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace geist::simd {
namespace {

using quant_detail::load_u16;
using quant_detail::load_u32;

constexpr int64_t kGroup = 16;

// The portable formula, rows layout (panel == false: q [n_tok][2][n_in]) or panels.
void q8p_generic(GgmlType t, bool panel, const uint8_t* src, size_t row_bytes, int count,
                 int64_t n_in, const int8_t* q, const float* dx, int64_t n_tok, float* out,
                 int64_t out_stride) {
  const int64_t nb = n_in / 32;
  int8_t w[32];
  for (int r = 0; r < count; ++r) {
    const uint8_t* grp = src + static_cast<size_t>(r / kGroup) * kGroup * row_bytes;
    for (int64_t tk = 0; tk < n_tok; ++tk) {
      const int64_t p = tk / kQ8Panel, lane = tk % kQ8Panel;
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const float dw = f16_to_f32(q8p_block(t, grp, r % kGroup, b, w));
        int32_t isum = 0;
        for (int i = 0; i < 32; ++i) {
          const int32_t a = panel ? q[p * nb * 1024 + ((b * 8 + i / 4) * 16 + lane) * 4 + i % 4]
                                  : q[tk * 2 * n_in + b * 32 + i];
          isum += int32_t{w[i]} * a;
        }
        const float d = panel ? dx[(p * nb + b) * 16 + lane] : dx[tk * nb + b];
        acc = std::fma(static_cast<float>(isum), dw * d, acc);
      }
      out[tk * out_stride + r] = acc;
    }
  }
}

#if defined(__x86_64__)
#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC-only group; clang (no Highway header here to silence it) errs
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#define GEIST_Q8P_ATTR \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512vnni,avx2,fma,f16c")))

// kIq4Values + 128 in every 128-bit lane.
GEIST_Q8P_ATTR inline __m512i iq4_table() {
  alignas(16) uint8_t tb[16];
  for (int i = 0; i < 16; ++i) tb[i] = static_cast<uint8_t>(quant_detail::kIq4Values[i] + 128);
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(tb)));
}

// The 4 activation bytes at p in every 32-bit lane (a lambda would not get the target).
GEIST_Q8P_ATTR inline __m512i bcast(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// a | (b & c) bitwise, one instruction (Q5_0's high bits into their codes).
GEIST_Q8P_ATTR inline __m512i or_and(__m512i a, __m512i b, __m512i c) {
  return _mm512_ternarylogic_epi32(a, b, c, 0xF8);
}

// Decode: T tokens against the 16 rows of the group at grp. kQ5: Q5_0 (operand the 5-bit code,
// its value + 16), else IQ4_NL (operand kIq4Values + 128).
template <bool kQ5, int T>
GEIST_Q8P_ATTR void group_tile(const uint8_t* grp, int64_t nb, int64_t n_in, const int8_t* q,
                               const float* dx, const int32_t* sx, __m512 acc[T]) {
  constexpr int64_t kBlock = kQ5 ? 352 : 288;
  const __m512i m4 = _mm512_set1_epi8(15), b4 = _mm512_set1_epi8(16);
  const __m512i table = kQ5 ? _mm512_setzero_si512() : iq4_table();
  const __m512i offset = _mm512_set1_epi32(kQ5 ? 16 : 128);
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * kBlock;
    prefetch_stream(blk, kBlock);
    __m512i s[T][2];  // [token][low / high elements]
    for (int t = 0; t < T; ++t) s[t][0] = s[t][1] = _mm512_setzero_si512();
    const __m512i high = kQ5 ? _mm512_loadu_si512(blk + kQ8pHighAt) : _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const __m512i v = _mm512_loadu_si512(blk + 32 + u * 64);
      __m512i lo = _mm512_and_si512(v, m4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      if constexpr (kQ5) {
        lo = or_and(lo, _mm512_sll_epi32(high, _mm_cvtsi32_si128(4 - u)), b4);
        hi = or_and(hi, _mm512_srl_epi32(high, _mm_cvtsi32_si128(u)), b4);
      } else {
        lo = _mm512_shuffle_epi8(table, lo);
        hi = _mm512_shuffle_epi8(table, hi);
      }
      for (int t = 0; t < T; ++t) {
        s[t][0] = _mm512_dpbusd_epi32(s[t][0], lo, bcast(q + t * 2 * n_in + b * 32 + 4 * u));
        s[t][1] = _mm512_dpbusd_epi32(s[t][1], hi, bcast(q + t * 2 * n_in + b * 32 + 16 + 4 * u));
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    for (int t = 0; t < T; ++t) {
      const __m512i isum =
          _mm512_sub_epi32(_mm512_add_epi32(s[t][0], s[t][1]),
                           _mm512_mullo_epi32(_mm512_set1_epi32(sx[t * nb + b]), offset));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                               _mm512_mul_ps(dw, _mm512_set1_ps(dx[t * nb + b])), acc[t]);
    }
  }
}

template <bool kQ5>
GEIST_Q8P_ATTR void groups_vnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                                const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok,
                                float* out, int64_t out_stride) {
  const int64_t nb = n_in / 32;
  for (int r0 = 0; r0 < count; r0 += 16) {
    const uint8_t* grp = src + static_cast<size_t>(r0) * row_bytes;  // group r0 / 16
    const __mmask16 keep = count - r0 >= 16 ? static_cast<__mmask16>(0xffff)
                                            : static_cast<__mmask16>((1u << (count - r0)) - 1u);
    for (int64_t t = 0; t < n_tok; t += 2) {
      __m512 acc[2];
      if (n_tok - t >= 2) {
        group_tile<kQ5, 2>(grp, nb, n_in, q + t * 2 * n_in, dx + t * nb, sx + t * nb, acc);
        _mm512_mask_storeu_ps(out + (t + 1) * out_stride + r0, keep, acc[1]);
      } else {
        group_tile<kQ5, 1>(grp, nb, n_in, q + t * 2 * n_in, dx + t * nb, sx + t * nb, acc);
      }
      _mm512_mask_storeu_ps(out + t * out_stride + r0, keep, acc[0]);
    }
  }
}

// A group's blocks [b0, b0 + n) as biased words (w + 128; unit g: elements 4g..4g+3) and f32
// scales, 16 rows in the lanes, made once per group for all its row quads and token tiles (a
// piece of 64 blocks: 36 KiB, about L1).
constexpr int64_t kPieceBlocks = 64;
struct GroupPiece {
  uint32_t w[kPieceBlocks][8][kGroup];  // [block][unit][row]
  float d[kPieceBlocks][kGroup];
};

// The decode kernel's unpack (group_tile), stored: Q5_0's 5-bit code + 112 = (code - 16) + 128
// bytewise (at most 143: no carry), IQ4_NL's kIq4Values + 128 by vpshufb.
template <bool kQ5>
GEIST_Q8P_ATTR void unpack_group(const uint8_t* grp, int64_t b0, int64_t n, GroupPiece* gp) {
  constexpr int64_t kBlock = kQ5 ? 352 : 288;
  const __m512i m4 = _mm512_set1_epi8(15), b4 = _mm512_set1_epi8(16);
  const __m512i bias = _mm512_set1_epi8(112);
  const __m512i table = kQ5 ? _mm512_setzero_si512() : iq4_table();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* blk = grp + (b0 + i) * kBlock;
    _mm512_storeu_ps(gp->d[i],
                     _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk))));
    const __m512i high = kQ5 ? _mm512_loadu_si512(blk + kQ8pHighAt) : _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const __m512i v = _mm512_loadu_si512(blk + 32 + u * 64);
      __m512i lo = _mm512_and_si512(v, m4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      if constexpr (kQ5) {
        lo = or_and(lo, _mm512_sll_epi32(high, _mm_cvtsi32_si128(4 - u)), b4);
        hi = or_and(hi, _mm512_srl_epi32(high, _mm_cvtsi32_si128(u)), b4);
        lo = _mm512_add_epi8(lo, bias);
        hi = _mm512_add_epi8(hi, bias);
      } else {
        lo = _mm512_shuffle_epi8(table, lo);
        hi = _mm512_shuffle_epi8(table, hi);
      }
      _mm512_storeu_si512(gp->w[i][u], lo);
      _mm512_storeu_si512(gp->w[i][u + 4], hi);
    }
  }
}

// P panels x rows [lane0, lane0 + 4) of the unpacked piece (blocks [b0, b0 + n)); acc_io
// carries the accumulators (first: start from 0).
template <int P>
GEIST_Q8P_ATTR void quad_tile(const GroupPiece& gp, int lane0, int64_t nb, int64_t b0, int64_t n,
                              const int8_t* pq, const float* pdx, const int32_t* psx, bool first,
                              float acc_io[4][P][16]) {
  const int64_t panel_q = nb * 1024;
  __m512 acc[4][P];
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < P; ++p) {
      acc[r][p] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc_io[r][p]);
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = b0 + i;
    __m512i s[4][P];
    for (int r = 0; r < 4; ++r) {
      for (int p = 0; p < P; ++p) s[r][p] = _mm512_setzero_si512();
    }
    const int8_t* a = pq + b * 512;
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      __m512i x[P];
      for (int p = 0; p < P; ++p) x[p] = _mm512_loadu_si512(a + p * panel_q + g * 64);
      for (int r = 0; r < 4; ++r) {
        const __m512i w = _mm512_set1_epi32(static_cast<int32_t>(gp.w[i][g][lane0 + r]));
        for (int p = 0; p < P; ++p) s[r][p] = _mm512_dpbusd_epi32(s[r][p], w, x[p]);
      }
    }
    __m512i corr[P];
    __m512 dxv[P];
    for (int p = 0; p < P; ++p) {
      corr[p] = _mm512_slli_epi32(_mm512_loadu_si512(psx + p * nb * 16 + b * 16), 7);
      dxv[p] = _mm512_loadu_ps(pdx + p * nb * 16 + b * 16);
    }
    for (int r = 0; r < 4; ++r) {
      const __m512 dw = _mm512_set1_ps(gp.d[i][lane0 + r]);
      for (int p = 0; p < P; ++p) {
        const __m512 fs = _mm512_cvtepi32_ps(_mm512_sub_epi32(s[r][p], corr[p]));
        acc[r][p] = _mm512_fmadd_ps(fs, _mm512_mul_ps(dw, dxv[p]), acc[r][p]);
      }
    }
  }
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(acc_io[r][p], acc[r][p]);
  }
}

// Per group of 16 rows and piece of blocks: unpack once, then every row quad of the group
// against every token tile. A piece after the first carries the accumulators through out (an
// exact f32 round trip).
template <bool kQ5>
GEIST_Q8P_ATTR void panels_vnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                                const int8_t* pq, const float* pdx, const int32_t* psx,
                                int64_t n_tok, float* out, int64_t out_stride) {
  const int64_t nb = n_in / 32;
  const int64_t n_panels = (n_tok + kQ8Panel - 1) / kQ8Panel;
  constexpr int kTileP = 2;
  const auto gp = std::make_unique_for_overwrite<GroupPiece>();
  for (int g0 = 0; g0 < count; g0 += kGroup) {
    const uint8_t* grp = src + static_cast<size_t>(g0) * row_bytes;  // group g0 / 16
    const int g_rows = count - g0 < kGroup ? count - g0 : static_cast<int>(kGroup);
    for (int64_t b0 = 0; b0 < nb; b0 += kPieceBlocks) {
      const int64_t n = nb - b0 < kPieceBlocks ? nb - b0 : kPieceBlocks;
      const bool first = b0 == 0;
      unpack_group<kQ5>(grp, b0, n, gp.get());
      // A tail quad's missing rows are the group's padding rows; their outputs are dropped.
      for (int lane0 = 0; lane0 < g_rows; lane0 += 4) {
        const int nr = g_rows - lane0 < 4 ? g_rows - lane0 : 4;
        float* o = out + g0 + lane0;
        for (int64_t p0 = 0; p0 < n_panels; p0 += kTileP) {
          alignas(64) float res[4][kTileP][16];
          const int np = static_cast<int>(n_panels - p0 >= kTileP ? kTileP : n_panels - p0);
          if (!first) {
            for (int p = 0; p < np; ++p) {
              for (int j = 0; j < 16; ++j) {
                const int64_t tk = (p0 + p) * kQ8Panel + j;
                if (tk >= n_tok) break;
                for (int r = 0; r < nr; ++r) res[r][p][j] = o[tk * out_stride + r];
              }
            }
          }
          const int8_t* q = pq + p0 * nb * 1024;
          const float* d = pdx + p0 * nb * 16;
          const int32_t* sx = psx + p0 * nb * 16;
          if (np == kTileP) {
            quad_tile<kTileP>(*gp, lane0, nb, b0, n, q, d, sx, first, res);
          } else {
            alignas(64) float res1[4][1][16];
            for (int r = 0; r < 4; ++r) std::memcpy(res1[r][0], res[r][0], sizeof(res1[r][0]));
            quad_tile<1>(*gp, lane0, nb, b0, n, q, d, sx, first, res1);
            for (int r = 0; r < 4; ++r) std::memcpy(res[r][0], res1[r][0], sizeof(res1[r][0]));
          }
          for (int p = 0; p < np; ++p) {
            for (int j = 0; j < 16; ++j) {
              const int64_t tk = (p0 + p) * kQ8Panel + j;
              if (tk >= n_tok) break;
              for (int r = 0; r < nr; ++r) o[tk * out_stride + r] = res[r][p][j];
            }
          }
        }
      }
    }
  }
}

#pragma GCC diagnostic pop
#endif

}  // namespace

uint16_t q8p_block(GgmlType t, const uint8_t* grp, int64_t lane, int64_t b, int8_t w[32]) {
  const uint8_t* blk = grp + b * q8p_group_block(t);
  uint32_t high = 0;
  if (t == GgmlType::Q5_0) high = load_u32(blk + kQ8pHighAt + 4 * lane);
  for (int i = 0; i < 16; ++i) {
    const uint8_t byte = blk[32 + ((i / 4) * kGroup + lane) * 4 + i % 4];
    const int k = i % 4, u = i / 4;
    if (t == GgmlType::Q5_0) {
      const int h0 = static_cast<int>((high >> (8 * k + u)) & 1);
      const int h1 = static_cast<int>((high >> (8 * k + 4 + u)) & 1);
      w[i] = static_cast<int8_t>(((byte & 15) | h0 << 4) - 16);
      w[i + 16] = static_cast<int8_t>(((byte >> 4) | h1 << 4) - 16);
    } else {
      w[i] = quant_detail::kIq4Values[byte & 15];
      w[i + 16] = quant_detail::kIq4Values[byte >> 4];
    }
  }
  return load_u16(blk + 2 * lane);
}

void dot_q8p_rows(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                  const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok, float* out,
                  int64_t out_stride) {
  GEIST_CHECK(q8p_type(t) && n_in % 32 == 0 && row_bytes == ggml_row_size(t, n_in),
              "dot_q8p_rows: Q5_0 / IQ4_NL rows in GROUPS16");
#if defined(__x86_64__)
  if (q8_panels_fast()) {  // AVX-512 VNNI, through the dispatcher (tests may pin a target)
    (t == GgmlType::Q5_0 ? groups_vnni<true> : groups_vnni<false>)(src, row_bytes, count, n_in, q,
                                                                   dx, sx, n_tok, out, out_stride);
    return;
  }
#endif
  (void)sx;
  q8p_generic(t, false, src, row_bytes, count, n_in, q, dx, n_tok, out, out_stride);
}

void dot_q8p_panels(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                    const int8_t* pq, const float* pdx, const int32_t* psx, int64_t n_tok,
                    float* out, int64_t out_stride) {
  GEIST_CHECK(q8p_type(t) && n_in % 32 == 0 && row_bytes == ggml_row_size(t, n_in),
              "dot_q8p_panels: Q5_0 / IQ4_NL rows in GROUPS16");
#if defined(__x86_64__)
  if (q8_panels_fast()) {
    (t == GgmlType::Q5_0 ? panels_vnni<true> : panels_vnni<false>)(src, row_bytes, count, n_in, pq,
                                                                   pdx, psx, n_tok, out,
                                                                   out_stride);
    return;
  }
#endif
  (void)psx;
  q8p_generic(t, true, src, row_bytes, count, n_in, pq, pdx, n_tok, out, out_stride);
}

}  // namespace geist::simd
