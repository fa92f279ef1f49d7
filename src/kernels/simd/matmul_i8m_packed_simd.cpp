// AVX-512 VNNI prefill kernel of the I8M forms (matmul_i8m_packed.h, matmul_simd.h "I8M"): 16
// tokens of a panel in the lanes, 4 weight rows x 2 panels per register tile, from 8-bit code
// words that a 16-row group's blocks are unpacked to once for all its row quads and token tiles,
// by the decode kernels' vector code with the group's rows in the lanes (so the broadcast weight
// operand costs one load, as for 8-bit codes, and the unpack a few instructions per 16 rows).
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
#include <memory>

#include "kernels/quant_blocks.h"
#include "kernels/simd/matmul_i8m_vnni.h"

#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC-only group; clang (no Highway header here to silence it) errs
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace geist::simd::i8m_packed {
namespace {

constexpr int64_t kQ2kDUnit = 80 / 4;  // Q2K: the unit of d | dmin << 16

// A group's blocks [b0, b0 + n) as unsigned 8-bit code words, 16 rows in the lanes (unit g:
// elements 4g..4g+3; Q3K: w + 124, in 0..252; IQ4K: w + 128), with S, M (the forms with a min)
// and the min weights m0 | m1 << 16 (Q2K; the others' are 1). Made once per group by the decode
// kernels' vector code (matmul_i8m_super_simd.cpp, matmul_i8m_simd.cpp) for all its row quads
// and token tiles; a piece of 64 blocks (44 KiB, about L1) keeps n_in = 2048 in one piece.
constexpr int64_t kPieceBlocks = 64;  // a multiple of 8 (the super-block forms)
struct GroupBlocks {
  uint32_t w[kPieceBlocks][8][kGroup];  // [block][unit][row]
  float s[kPieceBlocks][kGroup];
  float m[kPieceBlocks][kGroup];
  int32_t mh[kPieceBlocks][kGroup];
};

GEIST_I8MP_ATTR inline __m512i load(const uint8_t* p) { return _mm512_loadu_si512(p); }

// The f16 values in the low (high: false) or high halves of 16 32-bit lanes, as f32 (exact).
GEIST_I8MP_ATTR inline __m512 halves_f32(__m512i v, bool high) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(high ? _mm512_srli_epi32(v, 16) : v));
}

// The low (high: false) or high int16 half of each 32-bit lane in both halves.
GEIST_I8MP_ATTR inline __m512i both_halves(__m512i v, bool high) {
  const __m512i h =
      high ? _mm512_srli_epi32(v, 16) : _mm512_and_si512(v, _mm512_set1_epi32(0xFFFF));
  return _mm512_or_si512(h, _mm512_slli_epi32(h, 16));
}

// NIBBLES (kHigh false) and NIBBLES5: f16 S and M, the nibbles (and their high bits).
template <bool kHigh>
GEIST_I8MP_ATTR void unpack_nibbles(const uint8_t* grp, int64_t b0, int64_t n, GroupBlocks* gb) {
  constexpr int64_t kBlock = i8m_group_block(kHigh ? I8mForm::NIBBLES5 : I8mForm::NIBBLES);
  constexpr int64_t kCodes = i8m_codes_at(I8mForm::NIBBLES);
  const __m512i m4 = _mm512_set1_epi8(15), b4 = _mm512_set1_epi8(16);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* blk = grp + (b0 + i) * kBlock;
    _mm512_storeu_ps(
        gb->s[i],
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kI8mScaleAt))));
    _mm512_storeu_ps(
        gb->m[i],
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kI8mMinAt))));
    const __m512i high = kHigh ? load(blk + kI8mHighAt) : _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const __m512i v = load(blk + kCodes + u * 64);
      __m512i lo = _mm512_and_si512(v, m4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      if constexpr (kHigh) {
        lo = _mm512_or_si512(
            lo, _mm512_and_si512(_mm512_sll_epi32(high, _mm_cvtsi32_si128(4 - u)), b4));
        hi =
            _mm512_or_si512(hi, _mm512_and_si512(_mm512_srl_epi32(high, _mm_cvtsi32_si128(u)), b4));
      }
      _mm512_storeu_si512(gb->w[i][u], lo);
      _mm512_storeu_si512(gb->w[i][u + 4], hi);
    }
  }
}

// IQ4K: kIq4Values + 128 by vpshufb, S = d * (ls - 32).
GEIST_I8MP_ATTR void unpack_iq4k(const uint8_t* grp, int64_t b0, int64_t n, GroupBlocks* gb) {
  const __m512i nib = _mm512_set1_epi8(15), m4 = _mm512_set1_epi32(15), m2 = _mm512_set1_epi32(3);
  alignas(16) uint8_t tb[16];
  for (int i = 0; i < 16; ++i) tb[i] = static_cast<uint8_t>(quant_detail::kIq4Values[i] + 128);
  const __m512i table =
      _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(tb)));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = b0 + i;
    const int k = static_cast<int>(b % 8);
    const uint8_t* sb = grp + b / 8 * kI8mIq4kGroupSuper;
    const __m512i w0 = load(sb), w1 = load(sb + 64);
    // ls = (scales_l[k / 2] >> 4 (k % 2)) & 15 | ((scales_h >> 2k) & 3) << 4
    const __m512i ls = _mm512_or_si512(
        _mm512_and_si512(_mm512_srl_epi32(w1, _mm_cvtsi32_si128(8 * (k / 2) + 4 * (k % 2))), m4),
        _mm512_slli_epi32(_mm512_and_si512(_mm512_srl_epi32(w0, _mm_cvtsi32_si128(16 + 2 * k)), m2),
                          4));
    _mm512_storeu_ps(
        gb->s[i], _mm512_mul_ps(halves_f32(w0, false),
                                _mm512_cvtepi32_ps(_mm512_sub_epi32(ls, _mm512_set1_epi32(32)))));
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const __m512i v = load(sb + (2 + 4 * k + u) * 64);
      _mm512_storeu_si512(gb->w[i][u], _mm512_shuffle_epi8(table, _mm512_and_si512(v, nib)));
      _mm512_storeu_si512(
          gb->w[i][u + 4],
          _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), nib)));
    }
  }
}

// Q3K: c = code + 4 (0..7) as the decode kernel makes it, then w + 124 = (s - 32) * (c - 4) + 124
// bytewise by one 16-bit multiply-add per word: with both bytes in [0, 252] the 16-bit result
// c_odd * 256 * s' + c_even * s' + (124 - 4 s') * 257 (s' = s - 32) is exactly the two bytes.
GEIST_I8MP_ATTR void unpack_q3k(const uint8_t* grp, int64_t b0, int64_t n, GroupBlocks* gb) {
  const __m512i m2 = _mm512_set1_epi8(3), bit2 = _mm512_set1_epi8(4);
  const __m512i m4w = _mm512_set1_epi16(15), m2w = _mm512_set1_epi16(3);
  const __m512i k32 = _mm512_set1_epi16(32), k124 = _mm512_set1_epi16(124);
  const __m512i k257 = _mm512_set1_epi16(257);
  const __m512i pair[2] = {byte_control(0, 1), byte_control(2, 3)};
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = b0 + i;
    const int k = static_cast<int>(b % 8), h = k / 4, j = k % 4;
    const uint8_t* sb = grp + b / 8 * kI8mQ3kGroupSuper;
    _mm512_storeu_ps(
        gb->s[i],
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + kI8mQ3kD))));
    // The 6-bit scales of halves 2k, 2k + 1 (quant_detail::q3_k_scale) minus 32, as int16 pairs.
    const __m512i a = _mm512_shuffle_epi8(load(sb + (24 + (k % 4) / 2) * 64), pair[k % 2]);
    const __m512i lo = _mm512_and_si512(k < 4 ? a : _mm512_srli_epi16(a, 4), m4w);
    const __m512i hi =
        _mm512_and_si512(_mm512_srl_epi16(_mm512_shuffle_epi8(load(sb + 26 * 64), pair[k % 2]),
                                          _mm_cvtsi32_si128(2 * (k / 2))),
                         m2w);
    const __m512i scm = _mm512_sub_epi16(_mm512_or_si512(lo, _mm512_slli_epi16(hi, 4)), k32);
    __m512i sc[2], off[2];  // [half]: s' in every int16, (124 - 4 s') * 257
    for (int e = 0; e < 2; ++e) {
      sc[e] = both_halves(scm, e == 1);
      off[e] = _mm512_mullo_epi16(_mm512_sub_epi16(k124, _mm512_slli_epi16(sc[e], 2)), k257);
    }
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i low = _mm512_and_si512(
          _mm512_srl_epi16(load(sb + (8 + 8 * h + g) * 64), _mm_cvtsi32_si128(2 * j)), m2);
      const __m512i hm = load(sb + g * 64);
      const __m512i hb = k >= 2 ? _mm512_srl_epi16(hm, _mm_cvtsi32_si128(k - 2))
                                : _mm512_sll_epi16(hm, _mm_cvtsi32_si128(2 - k));
      const __m512i c = _mm512_or_si512(low, _mm512_and_si512(hb, bit2));
      _mm512_storeu_si512(gb->w[i][g],
                          _mm512_add_epi16(_mm512_mullo_epi16(c, sc[g / 4]), off[g / 4]));
    }
  }
}

// Q5K: the 5-bit codes, S = d * sc_j and M = dmin * m_j (quant_detail::k_scale_min), exact f32
// products.
GEIST_I8MP_ATTR void unpack_q5k(const uint8_t* grp, int64_t b0, int64_t n, GroupBlocks* gb) {
  const __m512i nib = _mm512_set1_epi8(15), b4 = _mm512_set1_epi8(16);
  const __m512i m6 = _mm512_set1_epi32(63), m4 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = b0 + i;
    const int k = static_cast<int>(b % 8);
    const uint8_t* sb = grp + b / 8 * kI8mQ5kGroupSuper;
    const __m512i w0 = load(sb), w1 = load(sb + 64), w2 = load(sb + 128), w3 = load(sb + 192);
    __m512i sc, m;
    if (k < 4) {
      sc = _mm512_and_si512(_mm512_srl_epi32(w1, _mm_cvtsi32_si128(8 * k)), m6);
      m = _mm512_and_si512(_mm512_srl_epi32(w2, _mm_cvtsi32_si128(8 * k)), m6);
    } else {
      const int sh = 8 * (k - 4);
      sc = _mm512_or_si512(
          _mm512_and_si512(_mm512_srl_epi32(w3, _mm_cvtsi32_si128(sh)), m4),
          _mm512_slli_epi32(_mm512_and_si512(_mm512_srl_epi32(w1, _mm_cvtsi32_si128(sh + 6)), m3),
                            4));
      m = _mm512_or_si512(
          _mm512_and_si512(_mm512_srl_epi32(w3, _mm_cvtsi32_si128(sh + 4)), m4),
          _mm512_slli_epi32(_mm512_and_si512(_mm512_srl_epi32(w2, _mm_cvtsi32_si128(sh + 6)), m3),
                            4));
    }
    _mm512_storeu_ps(gb->s[i], _mm512_mul_ps(halves_f32(w0, false), _mm512_cvtepi32_ps(sc)));
    _mm512_storeu_ps(gb->m[i], _mm512_mul_ps(halves_f32(w0, true), _mm512_cvtepi32_ps(m)));
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i v = load(sb + (12 + 8 * (k / 2) + g) * 64);
      const __m512i qh = load(sb + (4 + g) * 64);
      // Bit k of each qh byte to bit 4.
      const __m512i hb = k <= 4 ? _mm512_sll_epi16(qh, _mm_cvtsi32_si128(4 - k))
                                : _mm512_srl_epi16(qh, _mm_cvtsi32_si128(k - 4));
      const __m512i nv = k % 2 == 0 ? v : _mm512_srli_epi16(v, 4);
      _mm512_storeu_si512(gb->w[i][g],
                          _mm512_or_si512(_mm512_and_si512(nv, nib), _mm512_and_si512(hb, b4)));
    }
  }
}

// Q2K: w = sc * q bytewise by one 16-bit multiply (each byte at most 45: no carry), S = d,
// M = dmin, the min weights the scale bytes' high nibbles.
GEIST_I8MP_ATTR void unpack_q2k(const uint8_t* grp, int64_t b0, int64_t n, GroupBlocks* gb) {
  const __m512i m2 = _mm512_set1_epi8(3), m4w = _mm512_set1_epi16(15);
  const __m512i pair[2] = {byte_control(0, 1), byte_control(2, 3)};
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = b0 + i;
    const int k = static_cast<int>(b % 8), h = k / 4, j = k % 4;
    const uint8_t* sb = grp + b / 8 * kI8mQ2kGroupSuper;
    const __m512i dd = load(sb + kQ2kDUnit * 64);
    _mm512_storeu_ps(gb->s[i], halves_f32(dd, false));
    _mm512_storeu_ps(gb->m[i], halves_f32(dd, true));
    // The block's two scale bytes (unit k / 2, bytes 2 (k % 2), + 1) as int16 pairs.
    const __m512i sh = _mm512_shuffle_epi8(load(sb + (k / 2) * 64), pair[k % 2]);
    _mm512_storeu_si512(gb->mh[i], _mm512_srli_epi16(sh, 4));
    const __m512i scp = _mm512_and_si512(sh, m4w);
    const __m512i sc[2] = {both_halves(scp, false), both_halves(scp, true)};
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i codes = _mm512_and_si512(
          _mm512_srl_epi16(load(sb + (4 + 8 * h + g) * 64), _mm_cvtsi32_si128(2 * j)), m2);
      _mm512_storeu_si512(gb->w[i][g], _mm512_mullo_epi16(codes, sc[g / 4]));
    }
  }
}

GEIST_I8MP_ATTR void unpack_group(I8mForm f, const uint8_t* grp, int64_t b0, int64_t n,
                                  GroupBlocks* gb) {
  switch (f) {
    case I8mForm::Q2K:
      unpack_q2k(grp, b0, n, gb);
      return;
    case I8mForm::Q3K:
      unpack_q3k(grp, b0, n, gb);
      return;
    case I8mForm::Q5K:
      unpack_q5k(grp, b0, n, gb);
      return;
    case I8mForm::IQ4K:
      unpack_iq4k(grp, b0, n, gb);
      return;
    case I8mForm::NIBBLES5:
      unpack_nibbles<true>(grp, b0, n, gb);
      return;
    case I8mForm::NIBBLES:
      unpack_nibbles<false>(grp, b0, n, gb);
      return;
  }
}

// P panels of 16 tokens x rows [lane0, lane0 + 4) of the unpacked piece (blocks [b0, b0 + n));
// acc_io carries the accumulators in and out (first: start from 0).
// kBias: the words are w + kBias (Q3K 124, IQ4K 128: kBias times the block sum comes off), and
// those forms have no min term. kUnitMin: m0 = m1 = 1 (NIBBLES, NIBBLES5, Q5K), so ms = hs0 + hs1
// is the block sum sx, the same int32 (the min weights are then not read).
template <int P, int kBias, bool kUnitMin>
GEIST_I8MP_ATTR void quad_tile(const GroupBlocks& gb, int lane0, int64_t nb, int64_t b0, int64_t n,
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
        const __m512i w = _mm512_set1_epi32(static_cast<int32_t>(gb.w[i][g][lane0 + r]));
        for (int p = 0; p < P; ++p) s[r][p] = _mm512_dpbusd_epi32(s[r][p], w, x[p]);
      }
    }
    __m512i hp[P], corr[P];
    __m512 dxv[P], fsx[P];
    for (int p = 0; p < P; ++p) {
      dxv[p] = _mm512_loadu_ps(pdx + p * nb * 16 + b * 16);
      if constexpr (kBias != 0) {
        corr[p] = _mm512_mullo_epi32(_mm512_loadu_si512(psx + p * nb * 16 + b * 16),
                                     _mm512_set1_epi32(kBias));
      } else if constexpr (kUnitMin) {
        fsx[p] = _mm512_cvtepi32_ps(_mm512_loadu_si512(psx + p * nb * 16 + b * 16));
      } else {
        const auto* hs = reinterpret_cast<const int32_t*>(pq + p * panel_q + nb * 512) + b * 32;
        const __m512i h0 = _mm512_loadu_si512(hs), h1 = _mm512_loadu_si512(hs + 16);
        hp[p] = _mm512_or_si512(_mm512_and_si512(h0, _mm512_set1_epi32(0xFFFF)),
                                _mm512_slli_epi32(h1, 16));
      }
    }
    for (int r = 0; r < 4; ++r) {
      const __m512 sv = _mm512_set1_ps(gb.s[i][lane0 + r]);
      for (int p = 0; p < P; ++p) {
        const __m512i isum = kBias != 0 ? _mm512_sub_epi32(s[r][p], corr[p]) : s[r][p];
        acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(sv, dxv[p]), acc[r][p]);
      }
      if constexpr (kBias == 0) {
        const __m512 mv = _mm512_set1_ps(gb.m[i][lane0 + r]);
        const __m512i mh =
            kUnitMin ? _mm512_setzero_si512() : _mm512_set1_epi32(gb.mh[i][lane0 + r]);
        for (int p = 0; p < P; ++p) {
          const __m512 ms = kUnitMin ? fsx[p] : _mm512_cvtepi32_ps(_mm512_madd_epi16(hp[p], mh));
          acc[r][p] = _mm512_fnmadd_ps(mv, _mm512_mul_ps(ms, dxv[p]), acc[r][p]);
        }
      }
    }
  }
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(acc_io[r][p], acc[r][p]);
  }
}

template <int kBias, bool kUnitMin>
GEIST_I8MP_ATTR void panels(I8mForm f, const uint8_t* src, size_t row_bytes, int count,
                            int64_t n_in, const int8_t* pq, const float* pdx, const int32_t* psx,
                            int64_t n_tok, float* out, int64_t out_stride) {
  const int64_t nb = n_in / 32;
  const int64_t n_panels = (n_tok + kQ8Panel - 1) / kQ8Panel;
  constexpr int kTileP = 2;
  const auto gb = std::make_unique_for_overwrite<GroupBlocks>();
  for (int g0 = 0; g0 < count; g0 += kGroup) {
    const uint8_t* grp = src + static_cast<size_t>(g0) * row_bytes;  // group g0 / 16
    const int g_rows = count - g0 < kGroup ? count - g0 : static_cast<int>(kGroup);
    // The blocks in pieces unpacked once for all the group's row quads and token tiles; a piece
    // after the first carries the accumulators through out (an exact f32 round trip).
    for (int64_t b0 = 0; b0 < nb; b0 += kPieceBlocks) {
      const int64_t n = nb - b0 < kPieceBlocks ? nb - b0 : kPieceBlocks;
      const bool first = b0 == 0;
      unpack_group(f, grp, b0, n, gb.get());
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
                const int64_t t = (p0 + p) * kQ8Panel + j;
                if (t >= n_tok) break;
                for (int r = 0; r < nr; ++r) res[r][p][j] = o[t * out_stride + r];
              }
            }
          }
          const int8_t* q = pq + p0 * nb * 1024;
          const float* d = pdx + p0 * nb * 16;
          const int32_t* sx = psx + p0 * nb * 16;
          if (np == kTileP) {
            quad_tile<kTileP, kBias, kUnitMin>(*gb, lane0, nb, b0, n, q, d, sx, first, res);
          } else {
            alignas(64) float res1[4][1][16];
            for (int r = 0; r < 4; ++r) std::memcpy(res1[r][0], res[r][0], sizeof(res1[r][0]));
            quad_tile<1, kBias, kUnitMin>(*gb, lane0, nb, b0, n, q, d, sx, first, res1);
            for (int r = 0; r < 4; ++r) std::memcpy(res[r][0], res1[r][0], sizeof(res1[r][0]));
          }
          for (int p = 0; p < np; ++p) {
            for (int j = 0; j < 16; ++j) {
              const int64_t t = (p0 + p) * kQ8Panel + j;
              if (t >= n_tok) break;
              for (int r = 0; r < nr; ++r) o[t * out_stride + r] = res[r][p][j];
            }
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
  auto* kernel = f == I8mForm::Q3K    ? panels<124, false>
                 : f == I8mForm::IQ4K ? panels<128, false>
                 : f == I8mForm::Q2K  ? panels<0, false>
                                      : panels<0, true>;
  kernel(f, src, row_bytes, count, n_in, pq, pdx, psx, n_tok, out, out_stride);
}

}  // namespace geist::simd::i8m_packed

#pragma GCC diagnostic pop
#endif  // __x86_64__
