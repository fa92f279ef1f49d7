// AVX-512 VNNI prefill kernel of the I8M forms (matmul_i8m_packed.h, matmul_simd.h "I8M"): 16
// tokens of a panel in the lanes, 4 weight rows x 2 panels per register tile, from 8-bit code
// words that a row quad's blocks are unpacked to once for all its token tiles (so the broadcast
// weight operand costs one load, as for 8-bit codes).
//
// Every output is the I8M formula of matmul_simd.h, the same integers and the same float
// operations in the same order as the portable loops (matmul_i8m_simd.cpp), so the bits agree:
// isum = dot(w, q1) exact in int32, ms = m0 * hs0 + m1 * hs1 exact, then
// acc = fma(float(isum), S * dx_b, acc) and acc = fma(M, -(float(ms) * dx_b), acc) (not Q3K,
// IQ4K) per block in block order.
#include "kernels/simd/matmul_i8m_packed.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "kernels/quant_blocks.h"
#include "kernels/simd/f16.h"
#include "kernels/simd/matmul_i8m_vnni.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace geist::simd::i8m_packed {
namespace {

using quant_detail::load_u32;

constexpr int64_t kQ2kDUnit = 80 / 4;  // Q2K: the unit of d | dmin << 16

// A row quad's blocks [b0, b0 + n) as unsigned 8-bit code words (unit g: elements 4g..4g+3;
// Q3K: w + 124, in 0..252) with S, M and the min weights m0 | m1 << 16.
constexpr int64_t kPieceBlocks = 32;  // a multiple of 8 (Q2K's super-blocks)
struct QuadBlocks {
  uint32_t w[kPieceBlocks][8][4];  // [block][unit][row]
  float s[kPieceBlocks][4];
  float m[kPieceBlocks][4];
  int32_t mh[kPieceBlocks][4];
};

// rows[r]: row r's first byte in its group (group start + 4 * lane), lanes[r] its place there.
// NIBBLES (kHigh false) and NIBBLES5: f16 S and M, the nibbles (and high bits).
template <bool kHigh>
void unpack_nibbles(const uint8_t* const rows[4], const int64_t lanes[4], int64_t b0, int64_t n,
                    QuadBlocks* qb) {
  constexpr int64_t kBlock = i8m_group_block(kHigh ? I8mForm::NIBBLES5 : I8mForm::NIBBLES);
  constexpr int64_t kCodes = i8m_codes_at(I8mForm::NIBBLES);
  for (int64_t i = 0; i < n; ++i) {
    for (int r = 0; r < 4; ++r) {
      const uint8_t* blk = rows[r] + (b0 + i) * kBlock;
      const uint8_t* blk0 = blk - 4 * lanes[r];  // the group's block
      qb->s[i][r] = f16_to_f32(quant_detail::load_u16(blk0 + kI8mScaleAt + 2 * lanes[r]));
      qb->m[i][r] = f16_to_f32(quant_detail::load_u16(blk0 + kI8mMinAt + 2 * lanes[r]));
      qb->mh[i][r] = pack_halves(1, 1);
      const uint32_t high = kHigh ? load_u32(blk + kI8mHighAt) : 0;
      for (int u = 0; u < 4; ++u) {
        const uint32_t v = load_u32(blk + kCodes + u * 64);
        qb->w[i][u][r] = (v & 0x0F0F0F0Fu) | ((high << (4 - u)) & 0x10101010u);
        qb->w[i][u + 4][r] = ((v >> 4) & 0x0F0F0F0Fu) | ((high >> u) & 0x10101010u);
      }
    }
  }
}

// IQ4K: kIq4Values + 128 (unsigned) per byte, S = d * (ls - 32).
void unpack_iq4k(const uint8_t* const rows[4], int64_t b0, int64_t n, QuadBlocks* qb) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = b0 + i;
    const int k = static_cast<int>(b % 8);
    for (int r = 0; r < 4; ++r) {
      const uint8_t* sb = rows[r] + b / 8 * kI8mIq4kGroupSuper;
      auto unit = [&](int64_t u) { return load_u32(sb + u * kGroup * 4); };
      const uint32_t u0 = unit(0), u1 = unit(1);
      const int ls = static_cast<int>(((u1 >> (8 * (k / 2) + 4 * (k % 2))) & 15) |
                                      (((u0 >> 16) >> (2 * k)) & 3) << 4);
      qb->s[i][r] = f16_to_f32(static_cast<uint16_t>(u0 & 0xFFFFu)) * static_cast<float>(ls - 32);
      qb->m[i][r] = 0.0f;
      qb->mh[i][r] = 0;
      for (int u = 0; u < 4; ++u) {
        const uint32_t v = unit(2 + 4 * k + u);
        uint32_t lo = 0, hi = 0;
        for (int e = 0; e < 4; ++e) {
          const uint32_t byte = (v >> (8 * e)) & 0xFF;
          const auto lv = static_cast<uint8_t>(quant_detail::kIq4Values[byte & 15] + 128);
          const auto hv = static_cast<uint8_t>(quant_detail::kIq4Values[byte >> 4] + 128);
          lo |= uint32_t{lv} << (8 * e);
          hi |= uint32_t{hv} << (8 * e);
        }
        qb->w[i][u][r] = lo;
        qb->w[i][u + 4][r] = hi;
      }
    }
  }
}

// rows[r] as above, lanes[r] its place in the group (Q3K's d of row r is at kI8mQ3kD + 2 * lane).
void unpack_q3k(const uint8_t* const rows[4], const int64_t lanes[4], int64_t b0, int64_t n,
                QuadBlocks* qb) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = b0 + i;
    const int k = static_cast<int>(b % 8), h = k / 4, j = k % 4;
    for (int r = 0; r < 4; ++r) {
      const uint8_t* sb = rows[r] + b / 8 * kI8mQ3kGroupSuper;
      auto unit = [&](int64_t u) { return load_u32(sb + u * kGroup * 4); };
      const uint8_t* dp = sb - 4 * lanes[r] + kI8mQ3kD + 2 * lanes[r];
      qb->s[i][r] = f16_to_f32(static_cast<uint16_t>(dp[0] | dp[1] << 8));
      qb->m[i][r] = 0.0f;
      qb->mh[i][r] = 0;
      uint8_t scales[12];
      for (int u = 0; u < 3; ++u) {
        const uint32_t v = unit(24 + u);
        std::memcpy(scales + 4 * u, &v, 4);
      }
      uint8_t table[2][8];  // [half][c = code + 4] -> w + 124
      for (int e = 0; e < 2; ++e) {
        const int sc = quant_detail::q3_k_scale(scales, 2 * k + e) - 32;
        for (int c = 0; c < 8; ++c) table[e][c] = static_cast<uint8_t>(sc * (c - 4) + 124);
      }
      for (int g = 0; g < 8; ++g) {
        const uint32_t low = (unit(8 + 8 * h + g) >> (2 * j)) & 0x03030303u;
        const uint32_t c = low | (((unit(g) >> k) & 0x01010101u) << 2);
        uint32_t w = 0;
        for (int e = 0; e < 4; ++e) w |= uint32_t{table[g / 4][(c >> (8 * e)) & 7]} << (8 * e);
        qb->w[i][g][r] = w;
      }
    }
  }
}

void unpack_q5k(const uint8_t* const rows[4], int64_t b0, int64_t n, QuadBlocks* qb) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = b0 + i;
    const int k = static_cast<int>(b % 8);
    for (int r = 0; r < 4; ++r) {
      const uint8_t* sb = rows[r] + b / 8 * kI8mQ5kGroupSuper;
      auto unit = [&](int64_t u) { return load_u32(sb + u * kGroup * 4); };
      const uint32_t dd = unit(0);
      uint8_t scales[12], sc, mn;
      for (int u = 0; u < 3; ++u) {
        const uint32_t v = unit(1 + u);
        std::memcpy(scales + 4 * u, &v, 4);
      }
      quant_detail::k_scale_min(scales, k, &sc, &mn);
      qb->s[i][r] = f16_to_f32(static_cast<uint16_t>(dd & 0xFFFFu)) * static_cast<float>(sc);
      qb->m[i][r] = f16_to_f32(static_cast<uint16_t>(dd >> 16)) * static_cast<float>(mn);
      qb->mh[i][r] = pack_halves(1, 1);
      for (int g = 0; g < 8; ++g) {
        const uint32_t v = (unit(12 + 8 * (k / 2) + g) >> (4 * (k % 2))) & 0x0F0F0F0Fu;
        qb->w[i][g][r] = v | (((unit(4 + g) >> k) & 0x01010101u) << 4);
      }
    }
  }
}

void unpack_q2k(const uint8_t* const rows[4], int64_t b0, int64_t n, QuadBlocks* qb) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = b0 + i;
    const int k = static_cast<int>(b % 8), h = k / 4, j = k % 4;
    for (int r = 0; r < 4; ++r) {
      const uint8_t* sb = rows[r] + b / 8 * kI8mQ2kGroupSuper;
      auto unit = [&](int64_t u) { return load_u32(sb + u * kGroup * 4); };
      const uint32_t dd = unit(kQ2kDUnit);
      qb->s[i][r] = f16_to_f32(static_cast<uint16_t>(dd & 0xFFFFu));
      qb->m[i][r] = f16_to_f32(static_cast<uint16_t>(dd >> 16));
      const uint32_t sv = unit(k / 2) >> (16 * (k % 2));  // the block's two scale bytes
      const uint32_t sc0 = sv & 15, sc1 = (sv >> 8) & 15;
      qb->mh[i][r] =
          pack_halves(static_cast<int32_t>((sv >> 4) & 15), static_cast<int32_t>((sv >> 12) & 15));
      for (int g = 0; g < 8; ++g) {
        const uint32_t codes = (unit(4 + 8 * h + g) >> (2 * j)) & 0x03030303u;
        qb->w[i][g][r] = codes * (g < 4 ? sc0 : sc1);  // bytewise: each at most 45
      }
    }
  }
}

// P panels of 16 tokens x the quad's 4 rows over blocks [b0, b0 + n) of the unpacked quad;
// acc_io carries the accumulators in and out (first: start from 0).
// kBias: the words are w + kBias (Q3K 124, IQ4K 128: kBias times the block sum comes off), and
// those forms have no min term.
template <int P, int kBias>
GEIST_I8MP_ATTR void quad_tile(const QuadBlocks& qb, int64_t nb, int64_t b0, int64_t n,
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
        const __m512i w = _mm512_set1_epi32(static_cast<int32_t>(qb.w[i][g][r]));
        for (int p = 0; p < P; ++p) s[r][p] = _mm512_dpbusd_epi32(s[r][p], w, x[p]);
      }
    }
    __m512i hp[P], corr[P];
    __m512 dxv[P];
    for (int p = 0; p < P; ++p) {
      dxv[p] = _mm512_loadu_ps(pdx + p * nb * 16 + b * 16);
      if constexpr (kBias != 0) {
        corr[p] = _mm512_mullo_epi32(_mm512_loadu_si512(psx + p * nb * 16 + b * 16),
                                     _mm512_set1_epi32(kBias));
      } else {
        const auto* hs = reinterpret_cast<const int32_t*>(pq + p * panel_q + nb * 512) + b * 32;
        const __m512i h0 = _mm512_loadu_si512(hs), h1 = _mm512_loadu_si512(hs + 16);
        hp[p] = _mm512_or_si512(_mm512_and_si512(h0, _mm512_set1_epi32(0xFFFF)),
                                _mm512_slli_epi32(h1, 16));
      }
    }
    for (int r = 0; r < 4; ++r) {
      const __m512 sv = _mm512_set1_ps(qb.s[i][r]);
      const __m512 mv = _mm512_set1_ps(qb.m[i][r]);
      const __m512i mh = _mm512_set1_epi32(qb.mh[i][r]);
      for (int p = 0; p < P; ++p) {
        const __m512i isum = kBias != 0 ? _mm512_sub_epi32(s[r][p], corr[p]) : s[r][p];
        acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(sv, dxv[p]), acc[r][p]);
        if constexpr (kBias == 0) {
          const __m512 ms = _mm512_cvtepi32_ps(_mm512_madd_epi16(hp[p], mh));
          acc[r][p] = _mm512_fnmadd_ps(mv, _mm512_mul_ps(ms, dxv[p]), acc[r][p]);
        }
      }
    }
  }
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(acc_io[r][p], acc[r][p]);
  }
}

GEIST_I8MP_ATTR void panels(I8mForm f, const uint8_t* src, size_t row_bytes, int count,
                            int64_t n_in, const int8_t* pq, const float* pdx, const int32_t* psx,
                            int64_t n_tok, float* out, int64_t out_stride) {
  const int64_t nb = n_in / 32;
  const int64_t n_panels = (n_tok + kQ8Panel - 1) / kQ8Panel;
  constexpr int kTileP = 2;
  QuadBlocks qb;
  for (int r0 = 0; r0 < count; r0 += 4) {
    const int nr = count - r0 < 4 ? count - r0 : 4;
    const uint8_t* rows[4];
    int64_t lanes[4];
    for (int r = 0; r < 4; ++r) {  // a tail's missing rows are the group's (padding) rows
      const int o = r0 + r;
      lanes[r] = o % kGroup;
      rows[r] = src + static_cast<size_t>(o / kGroup) * kGroup * row_bytes + 4 * lanes[r];
    }
    // The blocks in pieces unpacked once for all token tiles; a piece after the first carries
    // the accumulators through out (an exact f32 round trip).
    for (int64_t b0 = 0; b0 < nb; b0 += kPieceBlocks) {
      const int64_t n = nb - b0 < kPieceBlocks ? nb - b0 : kPieceBlocks;
      const bool first = b0 == 0;
      if (f == I8mForm::Q2K) {
        unpack_q2k(rows, b0, n, &qb);
      } else if (f == I8mForm::Q3K) {
        unpack_q3k(rows, lanes, b0, n, &qb);
      } else if (f == I8mForm::Q5K) {
        unpack_q5k(rows, b0, n, &qb);
      } else if (f == I8mForm::IQ4K) {
        unpack_iq4k(rows, b0, n, &qb);
      } else if (f == I8mForm::NIBBLES5) {
        unpack_nibbles<true>(rows, lanes, b0, n, &qb);
      } else {
        unpack_nibbles<false>(rows, lanes, b0, n, &qb);
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
        const int bias = f == I8mForm::Q3K ? 124 : f == I8mForm::IQ4K ? 128 : 0;
        if (np == kTileP) {
          auto* tile = bias == 124   ? quad_tile<kTileP, 124>
                       : bias == 128 ? quad_tile<kTileP, 128>
                                     : quad_tile<kTileP, 0>;
          tile(qb, nb, b0, n, q, d, sx, first, res);
        } else {
          alignas(64) float res1[4][1][16];
          for (int r = 0; r < 4; ++r) std::memcpy(res1[r][0], res[r][0], sizeof(res1[r][0]));
          auto* tile = bias == 124   ? quad_tile<1, 124>
                       : bias == 128 ? quad_tile<1, 128>
                                     : quad_tile<1, 0>;
          tile(qb, nb, b0, n, q, d, sx, first, res1);
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

}  // namespace

void unpacked_panels_vnni(I8mForm f, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                          const int8_t* pq, const float* pdx, const int32_t* psx, int64_t n_tok,
                          float* out, int64_t out_stride) {
  panels(f, src, row_bytes, count, n_in, pq, pdx, psx, n_tok, out, out_stride);
}

}  // namespace geist::simd::i8m_packed

#pragma GCC diagnostic pop
#endif  // __x86_64__
