// Highway bodies of the matmul kernels (see matmul_simd.h). foreach_target.h re-includes this
// file once per SIMD target; the HWY_ONCE part at the end holds the dispatchers.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/matmul_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target must come first.
#include "hwy/highway.h"

#ifndef GEIST_KERNELS_SIMD_MATMUL_SIMD_ONCE
#define GEIST_KERNELS_SIMD_MATMUL_SIMD_ONCE
#include <cmath>
#include <cstring>

#include "base/status.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd/f16.h"
#include "kernels/simd/matmul_simd.h"
#endif

HWY_BEFORE_NAMESPACE();
namespace geist::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Unpackers work on at most 16 int16 lanes (half a block: Q4_0's nibble halves and Q6_K's
// 16-element scales line up with whole vectors); dot products on up to 32 (a whole block per
// AVX-512 vector). Each int32 lane of a block sum adds at most 64 / lanes <= 8 products, which
// cannot overflow even for Q6_K's pre-scaled weights (|w| <= 4096, |x| <= 32767).
using D16 = hn::CappedTag<int16_t, 16>;
using DU8 = hn::Rebind<uint8_t, D16>;
using DI8 = hn::Rebind<int8_t, D16>;
using DD = hn::CappedTag<int16_t, 32>;
using DD32 = hn::Repartition<int32_t, DD>;
using DDF = hn::Repartition<float, DD>;

using quant_detail::k_scale_min;
using quant_detail::kQ4_0Bytes;
using quant_detail::kQ4_KBytes;
using quant_detail::kQ6_KBytes;
using quant_detail::kQ8_0Bytes;
using quant_detail::load_u16;

void UnpackQ8_0(const uint8_t* row, int64_t n_in, int16_t* w, float* dw, float* mw) {
  const D16 d16;
  const DI8 di8;
  const size_t N = hn::Lanes(d16);
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const uint8_t* blk = row + b * kQ8_0Bytes;
    dw[b] = f16_to_f32(load_u16(blk));
    mw[b] = 0.0f;
    const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 2);
    for (size_t k = 0; k < 32; k += N) {
      hn::StoreU(hn::PromoteTo(d16, hn::LoadU(di8, qs + k)), d16, w + b * 32 + k);
    }
  }
}

void UnpackQ4_0(const uint8_t* row, int64_t n_in, int16_t* w, float* dw, float* mw) {
  const D16 d16;
  const DU8 du8;
  const size_t N = hn::Lanes(d16);
  const auto mask = hn::Set(d16, 15);
  const auto eight = hn::Set(d16, 8);
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const uint8_t* blk = row + b * kQ4_0Bytes;
    dw[b] = f16_to_f32(load_u16(blk));
    mw[b] = 0.0f;
    // Element j < 16 is the low nibble of qs[j], element 16 + j its high nibble.
    for (size_t j = 0; j < 16; j += N) {
      const auto v = hn::PromoteTo(d16, hn::LoadU(du8, blk + 2 + j));
      hn::StoreU(hn::Sub(hn::And(v, mask), eight), d16, w + b * 32 + j);
      hn::StoreU(hn::Sub(hn::ShiftRight<4>(v), eight), d16, w + b * 32 + 16 + j);
    }
  }
}

// The 6-bit sub-block scale goes into the int16 values (|q * sc| <= 945), the super-block d
// into dw and the min into mw, so one float multiply per 32 elements remains.
void UnpackQ4_K(const uint8_t* row, int64_t n_in, int16_t* w, float* dw, float* mw) {
  const D16 d16;
  const DU8 du8;
  const size_t N = hn::Lanes(d16);
  const auto mask = hn::Set(d16, 15);
  for (int64_t sb = 0; sb < n_in / 256; ++sb) {
    const uint8_t* blk = row + sb * kQ4_KBytes;
    const float d = f16_to_f32(load_u16(blk));
    const float dmin = f16_to_f32(load_u16(blk + 2));
    const uint8_t* qs = blk + 16;
    int16_t* wb = w + sb * 256;
    for (int c = 0; c < 4; ++c) {
      uint8_t sc_lo, m_lo, sc_hi, m_hi;
      k_scale_min(blk + 4, 2 * c, &sc_lo, &m_lo);
      k_scale_min(blk + 4, 2 * c + 1, &sc_hi, &m_hi);
      const auto vs_lo = hn::Set(d16, static_cast<int16_t>(sc_lo));
      const auto vs_hi = hn::Set(d16, static_cast<int16_t>(sc_hi));
      for (size_t j = 0; j < 32; j += N) {
        const auto v = hn::PromoteTo(d16, hn::LoadU(du8, qs + 32 * c + j));
        hn::StoreU(hn::Mul(hn::And(v, mask), vs_lo), d16, wb + 64 * c + j);
        hn::StoreU(hn::Mul(hn::ShiftRight<4>(v), vs_hi), d16, wb + 64 * c + 32 + j);
      }
      const int64_t b = sb * 8 + 2 * c;
      dw[b] = d;
      dw[b + 1] = d;
      mw[b] = -dmin * static_cast<float>(m_lo);
      mw[b + 1] = -dmin * static_cast<float>(m_hi);
    }
  }
}

// 32-block j (0..3) of half h holds elements 128h + 32j + l: its low 4 bits come from
// ql[64h + 32(j&1) + l] (low nibble for j < 2, high for j >= 2), its top 2 bits from bits
// 2j..2j+1 of qh[32h + l]; the int8 scale of each 16 elements is folded into the values.
void UnpackQ6_K(const uint8_t* row, int64_t n_in, int16_t* w, float* dw, float* mw) {
  const D16 d16;
  const DU8 du8;
  const size_t N = hn::Lanes(d16);
  const auto mask4 = hn::Set(d16, 15);
  const auto mask2 = hn::Set(d16, 3);
  const auto off = hn::Set(d16, 32);
  for (int64_t sb = 0; sb < n_in / 256; ++sb) {
    const uint8_t* blk = row + sb * kQ6_KBytes;
    const float d = f16_to_f32(load_u16(blk + 208));
    const int8_t* scales = reinterpret_cast<const int8_t*>(blk + 192);
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 4; ++j) {
        const uint8_t* ql = blk + 64 * h + 32 * (j & 1);
        const uint8_t* qh = blk + 128 + 32 * h;
        int16_t* wb = w + sb * 256 + 128 * h + 32 * j;
        for (size_t l = 0; l < 32; l += N) {
          auto lo = hn::PromoteTo(d16, hn::LoadU(du8, ql + l));
          lo = j < 2 ? hn::And(lo, mask4) : hn::ShiftRight<4>(lo);
          const auto hi =
              hn::And(hn::ShiftRightSame(hn::PromoteTo(d16, hn::LoadU(du8, qh + l)), 2 * j), mask2);
          const auto q = hn::Sub(hn::Or(lo, hn::ShiftLeft<4>(hi)), off);
          const int16_t sc = scales[8 * h + 2 * j + (l >= 16 ? 1 : 0)];
          hn::StoreU(hn::Mul(q, hn::Set(d16, sc)), d16, wb + l);
        }
        dw[sb * 8 + 4 * h + j] = d;
        mw[sb * 8 + 4 * h + j] = 0.0f;
      }
    }
  }
}

void UnpackRowsI16(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                   int16_t* w16, float* dw, float* mw) {
  const int64_t nb = n_in / 32;
  for (int r = 0; r < count; ++r) {
    const uint8_t* row = src + static_cast<size_t>(r) * row_bytes;
    int16_t* w = w16 + r * n_in;
    float* d = dw + r * nb;
    float* m = mw + r * nb;
    switch (t) {
      case GgmlType::Q8_0:
        UnpackQ8_0(row, n_in, w, d, m);
        break;
      case GgmlType::Q4_0:
        UnpackQ4_0(row, n_in, w, d, m);
        break;
      case GgmlType::Q4_K:
        UnpackQ4_K(row, n_in, w, d, m);
        break;
      case GgmlType::Q6_K:
        UnpackQ6_K(row, n_in, w, d, m);
        break;
      default:  // the later types (unpack_i16_simd.cpp)
        unpack_rows_i16_more(t, row, row_bytes, 1, n_in, w, d, m);
    }
  }
}

// R rows x T tokens at once: each weight load serves T tokens, each activation load R rows.
// Per output (r, t) the operations are those of a single-row, single-token call, in the same
// order: per 32-block the exact int32 lane sums, one f32 multiply-add per lane with the
// combined scale dw * dx, a lane sum at the end, then the mins. So the bits of an output never
// depend on R, T or the tile it lands in. Activation rows lie n_in (q16) or n_in / 32 (dx, sx)
// apart; out[t * out_stride + r].
template <int R, int T>
void DotI16Tile(const int16_t* w16, const float* dw, const float* mw, int64_t n_in,
                const int16_t* q16, const float* dx, const float* sx, float* out,
                int64_t out_stride) {
  const int64_t nb = n_in / 32;
#if HWY_TARGET == HWY_SCALAR
  // One lane would add 32 products of up to 4096 * 32767 into one int32: use plain int64 sums.
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) {
      float sum = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        int64_t isum = 0;
        for (int64_t i = b * 32; i < b * 32 + 32; ++i) {
          isum += int64_t{w16[r * n_in + i]} * q16[t * n_in + i];
        }
        sum += static_cast<float>(isum) * (dw[r * nb + b] * dx[t * nb + b]);
      }
      if (mw) {
        for (int64_t b = 0; b < nb; ++b) sum += mw[r * nb + b] * sx[t * nb + b];
      }
      out[t * out_stride + r] = sum;
    }
  }
#else
  const DD d16;
  const DD32 d32;
  const DDF df;
  const size_t N = hn::Lanes(d16);
  hn::Vec<DDF> acc[T][R];
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) acc[t][r] = hn::Zero(df);
  }
  for (int64_t b = 0; b < nb; ++b) {
    // The scales first, so the multiply-adds below take them as (broadcast) memory operands.
    HWY_ALIGN float sc[T][R];
    for (int t = 0; t < T; ++t) {
      for (int r = 0; r < R; ++r) sc[t][r] = dw[r * nb + b] * dx[t * nb + b];
    }
    hn::Vec<DD32> s0[T][R], s1[T][R];
    for (int t = 0; t < T; ++t) {
      for (int r = 0; r < R; ++r) s0[t][r] = s1[t][r] = hn::Zero(d32);
    }
    for (size_t k = 0; k < 32; k += N) {
      hn::Vec<DD> vw[R];
      for (int r = 0; r < R; ++r) vw[r] = hn::LoadU(d16, w16 + r * n_in + b * 32 + k);
      for (int t = 0; t < T; ++t) {
        const auto vx = hn::LoadU(d16, q16 + t * n_in + b * 32 + k);
        for (int r = 0; r < R; ++r) {
          s0[t][r] = hn::ReorderWidenMulAccumulate(d32, vw[r], vx, s0[t][r], s1[t][r]);
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      for (int r = 0; r < R; ++r) {
        const auto fs = hn::ConvertTo(df, hn::Add(s0[t][r], s1[t][r]));
        acc[t][r] = hn::MulAdd(fs, hn::Set(df, sc[t][r]), acc[t][r]);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) {
      float sum = hn::GetLane(hn::SumOfLanes(df, acc[t][r]));
      // Mins (Q4_K): a short dot in index order; mw is nullptr for types without mins.
      if (mw) {
        const float* m = mw + r * nb;
        const float* s = sx + t * nb;
        float msum = 0.0f;
        for (int64_t b = 0; b < nb; ++b) msum += m[b] * s[b];
        sum += msum;
      }
      out[t * out_stride + r] = sum;
    }
  }
#endif
}

template <int R>
void DotI16(const int16_t* w16, const float* dw, const float* mw, int64_t n_in, const int16_t* q16,
            const float* dx, const float* sx, float* out) {
  DotI16Tile<R, 1>(w16, dw, mw, n_in, q16, dx, sx, out, 0);
}

// Tokens per tile: four where a block fills one vector (AVX-512: 16 accumulators stay in the
// 32 registers), two on narrower targets.
constexpr int kTileTok = hn::MaxLanes(DD()) >= 32 ? 4 : 2;

template <int R>
void DotI16Tokens(const int16_t* w16, const float* dw, const float* mw, int64_t n_in,
                  const int16_t* q16, const float* dx, const float* sx, int64_t n_tok, float* out,
                  int64_t out_stride) {
  const int64_t nb = n_in / 32;
  int64_t t = 0;
  for (; t + kTileTok <= n_tok; t += kTileTok) {
    DotI16Tile<R, kTileTok>(w16, dw, mw, n_in, q16 + t * n_in, dx + t * nb, sx + t * nb,
                            out + t * out_stride, out_stride);
  }
  for (; t < n_tok; ++t) {
    DotI16Tile<R, 1>(w16, dw, mw, n_in, q16 + t * n_in, dx + t * nb, sx + t * nb,
                     out + t * out_stride, out_stride);
  }
}

void DotI16Batch(const int16_t* w16, const float* dw, const float* mw, int count, int64_t n_in,
                 const int16_t* q16, const float* dx, const float* sx, int64_t n_tok, float* out,
                 int64_t out_stride) {
  switch (count) {
    case 4:
      DotI16Tokens<4>(w16, dw, mw, n_in, q16, dx, sx, n_tok, out, out_stride);
      break;
    case 3:
      DotI16Tokens<3>(w16, dw, mw, n_in, q16, dx, sx, n_tok, out, out_stride);
      break;
    case 2:
      DotI16Tokens<2>(w16, dw, mw, n_in, q16, dx, sx, n_tok, out, out_stride);
      break;
    case 1:
      DotI16Tokens<1>(w16, dw, mw, n_in, q16, dx, sx, n_tok, out, out_stride);
      break;
    default:
      GEIST_CHECK(false, "dot_i16_batch: count must be 1..4");
  }
}

void DotI16Rows(const int16_t* w16, const float* dw, const float* mw, int count, int64_t n_in,
                const int16_t* q16, const float* dx, const float* sx, float* out) {
  switch (count) {
    case 4:
      DotI16<4>(w16, dw, mw, n_in, q16, dx, sx, out);
      break;
    case 3:
      DotI16<3>(w16, dw, mw, n_in, q16, dx, sx, out);
      break;
    case 2:
      DotI16<2>(w16, dw, mw, n_in, q16, dx, sx, out);
      break;
    case 1:
      DotI16<1>(w16, dw, mw, n_in, q16, dx, sx, out);
      break;
    default:
      GEIST_CHECK(false, "dot_i16_rows: count must be 1..4");
  }
}

#if HWY_TARGET != HWY_SCALAR
// Decode: the same per-block int16 values and float steps as UnpackQ8_0/UnpackQ4_0 followed by
// DotI16 (so the same bits), read straight from the packed rows without the int16 round trip.
template <int R, bool kQ4>
void DotPacked(const uint8_t* src, size_t row_bytes, int64_t n_in, const int16_t* q16,
               const float* dx, float* out) {
  const DD d16;
  const DD32 d32;
  const DDF df;
  constexpr size_t kMax = hn::MaxLanes(DD());
  const size_t N = hn::Lanes(d16);
  const int64_t nb = n_in / 32;
  const size_t bb = kQ4 ? kQ4_0Bytes : kQ8_0Bytes;
  hn::Vec<DDF> acc[R];
  for (int r = 0; r < R; ++r) acc[r] = hn::Zero(df);
  for (int64_t b = 0; b < nb; ++b) {
    hn::Vec<DD32> s0[R], s1[R];
    for (int r = 0; r < R; ++r) s0[r] = s1[r] = hn::Zero(d32);
    if constexpr (kQ4 && kMax >= 32) {
      // One vector per block: the low nibbles (elements 0-15) below the high ones (16-31).
      const hn::Half<DD> dh;
      const hn::Rebind<uint8_t, decltype(dh)> du8h;
      const auto mask = hn::Set(dh, 15);
      const auto eight = hn::Set(dh, 8);
      const auto vx = hn::LoadU(d16, q16 + b * 32);
      for (int r = 0; r < R; ++r) {
        const auto v = hn::PromoteTo(dh, hn::LoadU(du8h, src + r * row_bytes + b * bb + 2));
        const auto w = hn::Combine(d16, hn::Sub(hn::ShiftRight<4>(v), eight),
                                   hn::Sub(hn::And(v, mask), eight));
        s0[r] = hn::ReorderWidenMulAccumulate(d32, w, vx, s0[r], s1[r]);
      }
    } else if constexpr (kQ4) {
      const hn::Rebind<uint8_t, DD> du8;
      const auto mask = hn::Set(d16, 15);
      const auto eight = hn::Set(d16, 8);
      for (size_t j = 0; j < 16; j += N) {
        const auto x_lo = hn::LoadU(d16, q16 + b * 32 + j);
        const auto x_hi = hn::LoadU(d16, q16 + b * 32 + 16 + j);
        for (int r = 0; r < R; ++r) {
          const auto v = hn::PromoteTo(d16, hn::LoadU(du8, src + r * row_bytes + b * bb + 2 + j));
          s0[r] = hn::ReorderWidenMulAccumulate(d32, hn::Sub(hn::And(v, mask), eight), x_lo, s0[r],
                                                s1[r]);
          s0[r] = hn::ReorderWidenMulAccumulate(d32, hn::Sub(hn::ShiftRight<4>(v), eight), x_hi,
                                                s0[r], s1[r]);
        }
      }
    } else {
      const hn::Rebind<int8_t, DD> di8;
      for (size_t k = 0; k < 32; k += N) {
        const auto vx = hn::LoadU(d16, q16 + b * 32 + k);
        for (int r = 0; r < R; ++r) {
          const int8_t* qs = reinterpret_cast<const int8_t*>(src + r * row_bytes + b * bb + 2);
          s0[r] = hn::ReorderWidenMulAccumulate(d32, hn::PromoteTo(d16, hn::LoadU(di8, qs + k)), vx,
                                                s0[r], s1[r]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const float dw = f16_to_f32(load_u16(src + r * row_bytes + b * bb));
      const auto fs = hn::ConvertTo(df, hn::Add(s0[r], s1[r]));
      acc[r] = hn::MulAdd(fs, hn::Set(df, dw * dx[b]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hn::GetLane(hn::SumOfLanes(df, acc[r]));
}

#endif  // HWY_TARGET != HWY_SCALAR

void DotPackedRows(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                   const int16_t* q16, const float* dx, float* out) {
#if HWY_TARGET == HWY_SCALAR
  // Same values and float steps as the unpacked path's scalar branch.
  const int64_t nb = n_in / 32;
  int16_t w16[32 * 4];
  float dw[4], mw[4];
  for (int r = 0; r < count; ++r) out[r] = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < count; ++r) {
      const uint8_t* blk = src + r * row_bytes + b * ggml_type_traits(t).type_size;
      if (t == GgmlType::Q4_0) {
        UnpackQ4_0(blk, 32, w16 + 32 * r, dw + r, mw + r);
      } else {
        UnpackQ8_0(blk, 32, w16 + 32 * r, dw + r, mw + r);
      }
      int64_t isum = 0;
      for (int i = 0; i < 32; ++i) isum += int64_t{w16[32 * r + i]} * q16[b * 32 + i];
      out[r] += static_cast<float>(isum) * (dw[r] * dx[b]);
    }
  }
#else
  const bool q4 = t == GgmlType::Q4_0;
  GEIST_CHECK(q4 || t == GgmlType::Q8_0, "dot_packed_rows: Q8_0 or Q4_0 only");
  switch (count * 2 + (q4 ? 1 : 0)) {
    case 8:
      DotPacked<4, false>(src, row_bytes, n_in, q16, dx, out);
      break;
    case 9:
      DotPacked<4, true>(src, row_bytes, n_in, q16, dx, out);
      break;
    case 6:
      DotPacked<3, false>(src, row_bytes, n_in, q16, dx, out);
      break;
    case 7:
      DotPacked<3, true>(src, row_bytes, n_in, q16, dx, out);
      break;
    case 4:
      DotPacked<2, false>(src, row_bytes, n_in, q16, dx, out);
      break;
    case 5:
      DotPacked<2, true>(src, row_bytes, n_in, q16, dx, out);
      break;
    case 2:
      DotPacked<1, false>(src, row_bytes, n_in, q16, dx, out);
      break;
    case 3:
      DotPacked<1, true>(src, row_bytes, n_in, q16, dx, out);
      break;
    default:
      GEIST_CHECK(false, "dot_packed_rows: count must be 1..4");
  }
#endif
}

void WidenRowF32(GgmlType t, const uint8_t* src, float* dst, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  if (t == GgmlType::F16) {
    const hn::Rebind<hwy::float16_t, decltype(df)> dh;
    const auto* p = reinterpret_cast<const hwy::float16_t*>(src);
    for (; i + N <= n; i += N) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, p + i)), df, dst + i);
    for (; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(src + 2 * i));
  } else {
    GEIST_CHECK(t == GgmlType::BF16, "widen_row_f32: F16 or BF16 only");
    const hn::Rebind<hwy::bfloat16_t, decltype(df)> dh;
    const auto* p = reinterpret_cast<const hwy::bfloat16_t*>(src);
    for (; i + N <= n; i += N) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, p + i)), df, dst + i);
    for (; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(src + 2 * i));
  }
}

// Two accumulators per row hide the FMA latency; the tail is added in index order.
template <int R>
void DotF32(const float* const rows[4], const float* x, int64_t n, float* out) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  hn::Vec<decltype(df)> a0[R], a1[R];
  for (int r = 0; r < R; ++r) a0[r] = a1[r] = hn::Zero(df);
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto x0 = hn::LoadU(df, x + i);
    const auto x1 = hn::LoadU(df, x + i + N);
    for (int r = 0; r < R; ++r) {
      a0[r] = hn::MulAdd(hn::LoadU(df, rows[r] + i), x0, a0[r]);
      a1[r] = hn::MulAdd(hn::LoadU(df, rows[r] + i + N), x1, a1[r]);
    }
  }
  for (; i + N <= n; i += N) {
    const auto x0 = hn::LoadU(df, x + i);
    for (int r = 0; r < R; ++r) a0[r] = hn::MulAdd(hn::LoadU(df, rows[r] + i), x0, a0[r]);
  }
  for (int r = 0; r < R; ++r) {
    float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(a0[r], a1[r])));
    for (int64_t k = i; k < n; ++k) sum += rows[r][k] * x[k];
    out[r] = sum;
  }
}

void DotF32Rows(const float* const rows[4], int count, const float* x, int64_t n, float* out) {
  switch (count) {
    case 4:
      DotF32<4>(rows, x, n, out);
      break;
    case 3:
      DotF32<3>(rows, x, n, out);
      break;
    case 2:
      DotF32<2>(rows, x, n, out);
      break;
    case 1:
      DotF32<1>(rows, x, n, out);
      break;
    default:
      GEIST_CHECK(false, "dot_f32_rows: count must be 1..4");
  }
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace geist::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace geist::simd {

HWY_EXPORT(UnpackRowsI16);
HWY_EXPORT(DotI16Rows);
HWY_EXPORT(DotI16Batch);
HWY_EXPORT(WidenRowF32);
HWY_EXPORT(DotPackedRows);
HWY_EXPORT(DotF32Rows);
HWY_EXPORT(TargetName);

bool int16_path_supported(GgmlType t) {
  // Q2_K's mins change every 16 elements, finer than the per-32-block mw.
  return quant_type_supported(t) && ggml_type_traits(t).block_size >= 32 && t != GgmlType::Q2_K;
}

bool int16_has_min(GgmlType t) {
  return t == GgmlType::Q4_1 || t == GgmlType::Q5_1 || t == GgmlType::Q4_K || t == GgmlType::Q5_K;
}

void unpack_rows_i16(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                     int16_t* w16, float* dw, float* mw) {
  GEIST_CHECK(n_in % kQ16Block == 0, "unpack_rows_i16: n_in must be a multiple of 32");
  HWY_DYNAMIC_DISPATCH(UnpackRowsI16)(t, src, row_bytes, count, n_in, w16, dw, mw);
}

void quantize_row_q16(const float* x, int64_t n_in, int16_t* q16, float* dx, float* sx) {
  GEIST_CHECK(n_in % kQ16Block == 0, "quantize_row_q16: n_in must be a multiple of 32");
  for (int64_t b = 0; b < n_in / kQ16Block; ++b) {
    const float* xb = x + b * kQ16Block;
    int16_t* qb = q16 + b * kQ16Block;
    float amax = 0.0f;
    for (int64_t i = 0; i < kQ16Block; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float d = amax / 32767.0f;
    const float id = amax > 0.0f ? 32767.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int64_t i = 0; i < kQ16Block; ++i) {
      float v = std::nearbyint(xb[i] * id);
      v = std::fmin(32767.0f, std::fmax(-32767.0f, v));  // NaN-free input assumed upstream
      qb[i] = static_cast<int16_t>(v);
      sum += qb[i];
    }
    dx[b] = d;
    sx[b] = d * static_cast<float>(sum);
  }
}

void dot_i16_rows(const int16_t* w16, const float* dw, const float* mw, int count, int64_t n_in,
                  const int16_t* q16, const float* dx, const float* sx, float* out) {
  HWY_DYNAMIC_DISPATCH(DotI16Rows)(w16, dw, mw, count, n_in, q16, dx, sx, out);
}

void dot_i16_batch(const int16_t* w16, const float* dw, const float* mw, int count, int64_t n_in,
                   const int16_t* q16, const float* dx, const float* sx, int64_t n_tok, float* out,
                   int64_t out_stride) {
  HWY_DYNAMIC_DISPATCH(DotI16Batch)(w16, dw, mw, count, n_in, q16, dx, sx, n_tok, out, out_stride);
}

bool packed_dot_supported(GgmlType t) { return t == GgmlType::Q8_0 || t == GgmlType::Q4_0; }

void dot_packed_rows(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                     const int16_t* q16, const float* dx, float* out) {
  HWY_DYNAMIC_DISPATCH(DotPackedRows)(t, src, row_bytes, count, n_in, q16, dx, out);
}

void widen_row_f32(GgmlType t, const uint8_t* src, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(WidenRowF32)(t, src, dst, n);
}

void dot_f32_rows(const float* const rows[4], int count, const float* x, int64_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(DotF32Rows)(rows, count, x, n, out);
}

const char* target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace geist::simd
#endif  // HWY_ONCE
