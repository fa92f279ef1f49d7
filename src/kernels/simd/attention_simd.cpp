// Highway bodies of the attention kernels (see attention_simd.h). foreach_target.h re-includes
// this file once per SIMD target; the HWY_ONCE part at the end holds the dispatchers.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/attention_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target must come first.
#include "hwy/highway.h"
// math-inl.h (Exp) needs highway.h before it.
#include "hwy/contrib/math/math-inl.h"

#ifndef GEIST_KERNELS_SIMD_ATTENTION_SIMD_ONCE
#define GEIST_KERNELS_SIMD_ATTENTION_SIMD_ONCE
#include <cmath>
#include <cstring>

#include "base/status.h"
#include "kernels/simd/attention_simd.h"
#include "kernels/simd/f16.h"

namespace geist::simd::attn_detail {

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace geist::simd::attn_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace geist::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using attn_detail::load_u16;

// At most 8 lanes: a vector then never crosses an 8-value block boundary (see the header).
using DF = hn::CappedTag<float, 8>;
using DU32 = hn::Rebind<uint32_t, DF>;
using DI32 = hn::Rebind<int32_t, DF>;
using DI8 = hn::Rebind<int8_t, DF>;
using DU8 = hn::Rebind<uint8_t, DF>;
using DH = hn::Rebind<hwy::float16_t, DF>;

// A row of values as the row kernels read it: f32 as it is, or IEEE half widened on load (the
// conversion is exact, so a kernel gives the same bits from either form of the same values).
struct F32Row {
  const float* p;
  HWY_INLINE hn::Vec<DF> Load(DF df, int64_t i) const { return hn::LoadU(df, p + i); }
  HWY_INLINE float At(int64_t i) const { return p[i]; }
};
struct F16Row {
  const uint8_t* p;
  HWY_INLINE hn::Vec<DF> Load(DF df, int64_t i) const {
    return hn::PromoteTo(df, hn::LoadU(DH(), reinterpret_cast<const hwy::float16_t*>(p + 2 * i)));
  }
  HWY_INLINE float At(int64_t i) const { return f16_to_f32(load_u16(p + 2 * i)); }
};

// Lane sums of v[0..3] into out[0..3], by a transposing tree: out[j] =
// ((v_j[0] + v_j[2]) + (v_j[1] + v_j[3])) + (the same over lanes 4..7), a fixed tree for each
// vector whatever the other three hold.
HWY_INLINE void SumOfLanes4(DF df, const hn::Vec<DF>* v, float* out) {
#if HWY_TARGET == HWY_SCALAR
  for (int j = 0; j < 4; ++j) out[j] = hn::GetLane(v[j]);
#else
  const hn::Repartition<uint64_t, DF> d64;
  const auto ab = hn::Add(hn::InterleaveLower(df, v[0], v[1]), hn::InterleaveUpper(df, v[0], v[1]));
  const auto cd = hn::Add(hn::InterleaveLower(df, v[2], v[3]), hn::InterleaveUpper(df, v[2], v[3]));
  const auto lo =
      hn::BitCast(df, hn::InterleaveLower(d64, hn::BitCast(d64, ab), hn::BitCast(d64, cd)));
  const auto hi =
      hn::BitCast(df, hn::InterleaveUpper(d64, hn::BitCast(d64, ab), hn::BitCast(d64, cd)));
  const auto t = hn::Add(lo, hi);  // [sum0 sum1 sum2 sum3] per 128-bit block
  if constexpr (hn::MaxLanes(DF()) == 8) {
    const hn::Half<DF> dh;
    hn::StoreU(hn::Add(hn::LowerHalf(dh, t), hn::UpperHalf(dh, t)), dh, out);
  } else {
    hn::StoreU(t, df, out);
  }
#endif
}

template <int NQ, class Row>
void DotRowsN(const float* q, int64_t q_stride, Row x, int64_t n, float* out) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  hn::Vec<DF> acc[4];
  for (int j = 0; j < 4; ++j) acc[j] = hn::Zero(df);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto xv = x.Load(df, i);
    for (int j = 0; j < NQ; ++j)
      acc[j] = hn::MulAdd(hn::LoadU(df, q + j * q_stride + i), xv, acc[j]);
  }
  float sums[4];
  SumOfLanes4(df, acc, sums);
  for (int j = 0; j < NQ; ++j) {
    float tail = 0.0f;
    for (int64_t k = i; k < n; ++k) tail += q[j * q_stride + k] * x.At(k);
    out[j] = sums[j] + tail;
  }
}

// Rows in groups of four: each row's sum runs the same chain whatever the group, so the split
// into groups does not change any result.
template <class Row>
void DotRowsOf(const float* q, int64_t q_stride, int nq, Row x, int64_t n, float* out) {
  int j = 0;
  for (; j + 4 <= nq; j += 4) DotRowsN<4>(q + j * q_stride, q_stride, x, n, out + j);
  switch (nq - j) {
    case 1:
      return DotRowsN<1>(q + j * q_stride, q_stride, x, n, out + j);
    case 2:
      return DotRowsN<2>(q + j * q_stride, q_stride, x, n, out + j);
    case 3:
      return DotRowsN<3>(q + j * q_stride, q_stride, x, n, out + j);
    default:
      return;
  }
}
void DotRows(const float* q, int64_t q_stride, int nq, const float* x, int64_t n, float* out) {
  DotRowsOf(q, q_stride, nq, F32Row{x}, n, out);
}
void DotRowsF16(const float* q, int64_t q_stride, int nq, const uint8_t* x, int64_t n, float* out) {
  DotRowsOf(q, q_stride, nq, F16Row{x}, n, out);
}

// DotRowsN for P rows x[0..P) at once: each query chunk is loaded once for the P rows, and each
// output runs DotRowsN's chain (one MulAdd per chunk in order, the same lane tree, the same
// tail), so the bits are P DotRowsN calls'. Kept apart from DotRowsN on purpose: with one
// template for both (DotRowsN as P = 1), GCC fused the f32 rows' scalar tail (n % 8 != 0) into a
// multiply-add in some instantiations and not others, and AttentionSimd.RowKernelsIndependent-
// OfRowCount failed; -ffp-contract=off on this file fixes that but changes the q4 KV mode's bits.
template <int NQ, int P>
void DotPosN(const float* q, int64_t q_stride, const F16Row* x, int64_t n, float* out,
             int64_t out_stride) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  hn::Vec<DF> acc[P][4];
  for (int r = 0; r < P; ++r) {
    for (int j = 0; j < 4; ++j) acc[r][j] = hn::Zero(df);
  }
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    hn::Vec<DF> qv[NQ];
    for (int j = 0; j < NQ; ++j) qv[j] = hn::LoadU(df, q + j * q_stride + i);
    for (int r = 0; r < P; ++r) {
      const auto xv = x[r].Load(df, i);
      for (int j = 0; j < NQ; ++j) acc[r][j] = hn::MulAdd(qv[j], xv, acc[r][j]);
    }
  }
  for (int r = 0; r < P; ++r) {
    float sums[4];
    SumOfLanes4(df, acc[r], sums);
    for (int j = 0; j < NQ; ++j) {
      float tail = 0.0f;
      for (int64_t k = i; k < n; ++k) tail += q[j * q_stride + k] * x[r].At(k);
      out[r * out_stride + j] = sums[j] + tail;
    }
  }
}

// Rows per pass of DotPosN: its accumulators (4 per row) and the query chunks stay in registers
// where there are 32 vector registers (AVX-512, AArch64); 16-register targets take two.
#if (HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)) || HWY_ARCH_ARM_A64
constexpr int kDotPass = 4;
#else
constexpr int kDotPass = 2;
#endif
static_assert(kDotPositions % kDotPass == 0);

void DotRows4F16(const float* q, int64_t q_stride, int nq, const uint8_t* const* x, int64_t n,
                 float* out, int64_t out_stride) {
  for (int r0 = 0; r0 < kDotPositions; r0 += kDotPass) {
    F16Row rows[kDotPass];
    for (int r = 0; r < kDotPass; ++r) rows[r] = F16Row{x[r0 + r]};
    float* o = out + r0 * out_stride;
    int j = 0;
    for (; j + 4 <= nq; j += 4) {
      DotPosN<4, kDotPass>(q + j * q_stride, q_stride, rows, n, o + j, out_stride);
    }
    switch (nq - j) {
      case 1:
        DotPosN<1, kDotPass>(q + j * q_stride, q_stride, rows, n, o + j, out_stride);
        break;
      case 2:
        DotPosN<2, kDotPass>(q + j * q_stride, q_stride, rows, n, o + j, out_stride);
        break;
      case 3:
        DotPosN<3, kDotPass>(q + j * q_stride, q_stride, rows, n, o + j, out_stride);
        break;
      default:
        break;
    }
  }
}

// Each output element is one chain of multiply-adds in call order, so neither nq nor the
// loop order over rows changes a result. Rows of 64 values keep x in registers.
void AxpyRows(const float* w, int nq, const float* x, int64_t n, float* acc, int64_t acc_stride) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  if (n >= 8 * N) {
    for (; i + 8 * N <= n; i += 8 * N) {
      hn::Vec<DF> xv[8];
      for (int u = 0; u < 8; ++u) xv[u] = hn::LoadU(df, x + i + u * N);
      for (int j = 0; j < nq; ++j) {
        const auto wv = hn::Set(df, w[j]);
        float* a = acc + j * acc_stride + i;
        for (int u = 0; u < 8; ++u) {
          hn::StoreU(hn::MulAdd(wv, xv[u], hn::LoadU(df, a + u * N)), df, a + u * N);
        }
      }
    }
  }
  for (; i + N <= n; i += N) {
    const auto xv = hn::LoadU(df, x + i);
    for (int j = 0; j < nq; ++j) {
      float* a = acc + j * acc_stride + i;
      hn::StoreU(hn::MulAdd(hn::Set(df, w[j]), xv, hn::LoadU(df, a)), df, a);
    }
  }
  for (int j = 0; j < nq; ++j) {
    for (int64_t k = i; k < n; ++k) acc[j * acc_stride + k] += w[j] * x[k];
  }
}

// kAxpyPositions positions at once: acc loaded and stored once for all of them, each element's
// chain the same as kAxpyPositions AxpyRows calls in position order (one MulAdd per position),
// so the same bits.
template <class Row>
void AxpyRows4Of(const float* w, int64_t w_stride, int nq, const Row* x, int64_t n, float* acc,
                 int64_t acc_stride) {
  constexpr int P = kAxpyPositions;
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    hn::Vec<DF> xv[P][2];
    for (int r = 0; r < P; ++r) {
      xv[r][0] = x[r].Load(df, i);
      xv[r][1] = x[r].Load(df, i + N);
    }
    for (int j = 0; j < nq; ++j) {
      float* a = acc + j * acc_stride + i;
      auto a0 = hn::LoadU(df, a), a1 = hn::LoadU(df, a + N);
      for (int r = 0; r < P; ++r) {
        const auto wv = hn::Set(df, w[r * w_stride + j]);
        a0 = hn::MulAdd(wv, xv[r][0], a0);
        a1 = hn::MulAdd(wv, xv[r][1], a1);
      }
      hn::StoreU(a0, df, a);
      hn::StoreU(a1, df, a + N);
    }
  }
  for (; i + N <= n; i += N) {
    for (int j = 0; j < nq; ++j) {
      float* a = acc + j * acc_stride + i;
      auto a0 = hn::LoadU(df, a);
      for (int r = 0; r < P; ++r) {
        a0 = hn::MulAdd(hn::Set(df, w[r * w_stride + j]), x[r].Load(df, i), a0);
      }
      hn::StoreU(a0, df, a);
    }
  }
  for (int r = 0; r < P; ++r) {
    for (int j = 0; j < nq; ++j) {
      for (int64_t k = i; k < n; ++k) acc[j * acc_stride + k] += w[r * w_stride + j] * x[r].At(k);
    }
  }
}
void AxpyRows4(const float* w, int64_t w_stride, int nq, const float* const* x, int64_t n,
               float* acc, int64_t acc_stride) {
  F32Row rows[kAxpyPositions];
  for (int r = 0; r < kAxpyPositions; ++r) rows[r] = F32Row{x[r]};
  AxpyRows4Of(w, w_stride, nq, rows, n, acc, acc_stride);
}
void AxpyRows4F16(const float* w, int64_t w_stride, int nq, const uint8_t* const* x, int64_t n,
                  float* acc, int64_t acc_stride) {
  F16Row rows[kAxpyPositions];
  for (int r = 0; r < kAxpyPositions; ++r) rows[r] = F16Row{x[r]};
  AxpyRows4Of(w, w_stride, nq, rows, n, acc, acc_stride);
}

// max, then e_i = exp(x_i - max) (Highway's Exp, <= 1 ulp) summed in N lanes (lane l takes
// i % N == l; the tail is padded with -inf-like values whose exp is exactly 0) reduced by
// SumOfLanes, then scaled by 1 / sum. Fixed order for a given n.
void Softmax(float* x, int64_t n) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto vmax = hn::Set(df, -HUGE_VALF);
  int64_t i = 0;
  for (; i + N <= n; i += N) vmax = hn::Max(vmax, hn::LoadU(df, x + i));
  float mx = hn::GetLane(hn::MaxOfLanes(df, vmax));
  for (int64_t k = i; k < n; ++k) mx = x[k] > mx ? x[k] : mx;
  const auto m = hn::Set(df, mx);
  auto vsum = hn::Zero(df);
  i = 0;
  for (; i + N <= n; i += N) {
    const auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, x + i), m));
    hn::StoreU(e, df, x + i);
    vsum = hn::Add(vsum, e);
  }
  if (i < n) {
    HWY_ALIGN float tail[8];
    for (int64_t k = 0; k < N; ++k) tail[k] = i + k < n ? x[i + k] - mx : -1000.0f;
    const auto e = hn::Exp(df, hn::Load(df, tail));
    hn::Store(e, df, tail);
    vsum = hn::Add(vsum, e);
    for (int64_t k = i; k < n; ++k) x[k] = tail[k - i];
  }
  const auto inv = hn::Set(df, 1.0f / hn::GetLane(hn::SumOfLanes(df, vsum)));
  i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(df, x + i), inv), df, x + i);
  for (; i < n; ++i) x[i] *= hn::GetLane(inv);
}

void WidenF16(const uint8_t* src, int64_t n, float* dst) {
  const DF df;
  const DH dh;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto* h = reinterpret_cast<const hwy::float16_t*>(src + 2 * i);
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, h)), df, dst + i);
  }
  for (; i < n; ++i) dst[i] = f16_to_f32(load_u16(src + 2 * i));
}

// Codes k .. k + Lanes of a run of `bits`-bit codes (element i at bits [i * bits, i * bits +
// bits), little-endian) as floats. Reads only the bytes those codes occupy.
HWY_INLINE hn::Vec<DF> UnpackCodes(const uint8_t* packed, int32_t k, int bits) {
  const DF df;
  const DU32 du;
  const int32_t N = static_cast<int32_t>(hn::Lanes(df));
  const int32_t bit0 = k * bits;
  const int32_t sh0 = bit0 % 8;
  uint32_t word = 0;
  std::memcpy(&word, packed + bit0 / 8, static_cast<size_t>((N * bits + sh0 + 7) / 8));
  auto shifts = hn::Iota(du, 0);
  shifts = bits == 4 ? hn::ShiftLeft<2>(shifts) : hn::ShiftLeft<1>(shifts);
  shifts = hn::Add(shifts, hn::Set(du, static_cast<uint32_t>(sh0)));
  const auto codes =
      hn::And(hn::Set(du, word) >> shifts, hn::Set(du, static_cast<uint32_t>((1u << bits) - 1)));
  return hn::ConvertTo(df, hn::BitCast(DI32(), codes));
}

void DecodeBlocks(int bits, const uint8_t* src, int nb, int32_t block, float* dst) {
  const DF df;
  const DI8 di8;
  const DU8 du8;
  const DI32 di32;
  const int32_t N = static_cast<int32_t>(hn::Lanes(df));
  const int32_t abits = bits < 0 ? -bits : bits;
  const int64_t bb = (bits < 0 ? 4 : 2) + block * abits / 8;
  for (int b = 0; b < nb; ++b) {
    const uint8_t* blk = src + b * bb;
    float* out = dst + static_cast<int64_t>(b) * block;
    const auto d = hn::Set(df, f16_to_f32(load_u16(blk)));
    if (bits == 8) {
      const auto* qs = reinterpret_cast<const int8_t*>(blk + 2);
      for (int32_t k = 0; k < block; k += N) {
        const auto v = hn::ConvertTo(df, hn::PromoteTo(di32, hn::LoadU(di8, qs + k)));
        hn::StoreU(hn::Mul(d, v), df, out + k);
      }
    } else if (bits == 4) {
      const auto eight = hn::Set(df, 8.0f);
      for (int32_t k = 0; k < block; k += N) {
        hn::StoreU(hn::Mul(d, hn::Sub(UnpackCodes(blk + 2, k, 4), eight)), df, out + k);
      }
    } else if (bits == -8) {
      const auto mn = hn::Set(df, f16_to_f32(load_u16(blk + 2)));
      for (int32_t k = 0; k < block; k += N) {
        const auto v = hn::ConvertTo(df, hn::PromoteTo(di32, hn::LoadU(du8, blk + 4 + k)));
        hn::StoreU(hn::MulAdd(d, v, mn), df, out + k);
      }
    } else {
      const auto mn = hn::Set(df, f16_to_f32(load_u16(blk + 2)));
      for (int32_t k = 0; k < block; k += N) {
        hn::StoreU(hn::MulAdd(d, UnpackCodes(blk + 4, k, abits), mn), df, out + k);
      }
    }
  }
}

// Vectorized over the group's 32 positions: each channel's codes are unpacked once and
// multiply-added into every query's 32 running scores, in channel order.
void ChGroupScores(int bits, const uint8_t* group, int64_t block_bytes, int32_t off, int32_t n,
                   const float* q, int64_t q_stride, int nq, float* out) {
  constexpr int32_t kG = 32;
  const DF df;
  const int32_t N = static_cast<int32_t>(hn::Lanes(df));
  float cst[4] = {0, 0, 0, 0};  // sum_c q[c] * min_c per query
  for (int j = 0; j < nq; ++j) {
    for (int32_t r = 0; r < kG; r += N) hn::StoreU(hn::Zero(df), df, out + j * kG + r);
  }
  HWY_ALIGN float codes[kG];
  for (int32_t c = off; c < off + n; ++c) {
    const uint8_t* blk = group + c * block_bytes;
    const float scale = f16_to_f32(load_u16(blk));
    const float mn = f16_to_f32(load_u16(blk + 2));
    for (int32_t r = 0; r < kG; r += N) hn::Store(UnpackCodes(blk + 4, r, bits), df, codes + r);
    for (int j = 0; j < nq; ++j) {
      const float qc = q[j * q_stride + c - off];
      cst[j] += qc * mn;
      const auto w = hn::Set(df, qc * scale);
      float* o = out + j * kG;
      for (int32_t r = 0; r < kG; r += N) {
        hn::StoreU(hn::MulAdd(w, hn::Load(df, codes + r), hn::LoadU(df, o + r)), df, o + r);
      }
    }
  }
  for (int j = 0; j < nq; ++j) {
    const auto cv = hn::Set(df, cst[j]);
    float* o = out + j * kG;
    for (int32_t r = 0; r < kG; r += N) hn::StoreU(hn::Add(hn::LoadU(df, o + r), cv), df, o + r);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace geist::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace geist::simd {

HWY_EXPORT(DotRows);
HWY_EXPORT(AxpyRows);
HWY_EXPORT(AxpyRows4);
HWY_EXPORT(DotRowsF16);
HWY_EXPORT(DotRows4F16);
HWY_EXPORT(AxpyRows4F16);
HWY_EXPORT(WidenF16);
HWY_EXPORT(DecodeBlocks);
HWY_EXPORT(ChGroupScores);
HWY_EXPORT(Softmax);

void attn_dot_rows(const float* q, int64_t q_stride, int nq, const float* x, int64_t n,
                   float* out) {
  GEIST_CHECK(nq >= 1, "attn_dot_rows: nq must be positive");
  HWY_DYNAMIC_DISPATCH(DotRows)(q, q_stride, nq, x, n, out);
}

void attn_axpy_rows(const float* w, int nq, const float* x, int64_t n, float* acc,
                    int64_t acc_stride) {
  GEIST_CHECK(nq >= 1, "attn_axpy_rows: nq must be positive");
  HWY_DYNAMIC_DISPATCH(AxpyRows)(w, nq, x, n, acc, acc_stride);
}

void attn_axpy_rows4(const float* w, int64_t w_stride, int nq, const float* const* x, int64_t n,
                     float* acc, int64_t acc_stride) {
  GEIST_CHECK(nq >= 1, "attn_axpy_rows4: nq must be positive");
  HWY_DYNAMIC_DISPATCH(AxpyRows4)(w, w_stride, nq, x, n, acc, acc_stride);
}

void attn_dot_rows_f16(const float* q, int64_t q_stride, int nq, const uint8_t* x, int64_t n,
                       float* out) {
  GEIST_CHECK(nq >= 1 && n % 8 == 0, "attn_dot_rows_f16: nq positive, n a multiple of 8");
  HWY_DYNAMIC_DISPATCH(DotRowsF16)(q, q_stride, nq, x, n, out);
}

void attn_dot_rows4_f16(const float* q, int64_t q_stride, int nq, const uint8_t* const* x,
                        int64_t n, float* out, int64_t out_stride) {
  HWY_DYNAMIC_DISPATCH(DotRows4F16)(q, q_stride, nq, x, n, out, out_stride);
}

void attn_axpy_rows4_f16(const float* w, int64_t w_stride, int nq, const uint8_t* const* x,
                         int64_t n, float* acc, int64_t acc_stride) {
  GEIST_CHECK(nq >= 1 && n % 8 == 0, "attn_axpy_rows4_f16: nq positive, n a multiple of 8");
  HWY_DYNAMIC_DISPATCH(AxpyRows4F16)(w, w_stride, nq, x, n, acc, acc_stride);
}

void attn_widen_f16(const uint8_t* src, int64_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(WidenF16)(src, n, dst);
}

void attn_decode_blocks(int bits, const uint8_t* src, int nb, int32_t block, float* dst) {
  GEIST_CHECK(bits == 8 || bits == 4 || bits == -8 || bits == -4 || bits == -2,
              "attn_decode_blocks: bits must be 8, 4, -8, -4 or -2");
  GEIST_CHECK(block == 8 || block == 16 || block == 32,
              "attn_decode_blocks: block must be 8, 16 or 32");
  HWY_DYNAMIC_DISPATCH(DecodeBlocks)(bits, src, nb, block, dst);
}

void attn_ch_group_scores(int bits, const uint8_t* group, int64_t block_bytes, int32_t off,
                          int32_t n, const float* q, int64_t q_stride, int nq, float* out) {
  GEIST_CHECK(bits == 4 || bits == 2, "attn_ch_group_scores: bits must be 4 or 2");
  GEIST_CHECK(nq >= 1, "attn_ch_group_scores: nq must be positive");
  // Groups of four queries: each query's scores are computed alone inside the kernel.
  for (int j = 0; j < nq; j += 4) {
    HWY_DYNAMIC_DISPATCH(ChGroupScores)
    (bits, group, block_bytes, off, n, q + j * q_stride, q_stride, nq - j < 4 ? nq - j : 4,
     out + j * 32);
  }
}

void attn_softmax(float* x, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(Softmax)(x, n);
}

}  // namespace geist::simd
#endif  // HWY_ONCE
