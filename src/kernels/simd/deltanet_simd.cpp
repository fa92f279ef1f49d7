// Highway form of the chunked gated delta rule (deltanet.h): the same chunk algebra as
// gated_delta_rule_chunked_reference, in double, with the loops over the value dimension (and
// over the key dimension for the intra-chunk dot products) in vector lanes and fused
// multiply-adds. Sums over tokens and state rows run in the reference's order; the key-key
// dot products are summed lane-wise, so results differ from the reference by double rounding
// only (far below the f32 outputs' ulp). foreach_target.h re-includes this file once per SIMD
// target; the HWY_ONCE part at the end holds the dispatcher.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/deltanet_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target must come first.
#include "hwy/highway.h"

#ifndef GEIST_KERNELS_SIMD_DELTANET_SIMD_ONCE
#define GEIST_KERNELS_SIMD_DELTANET_SIMD_ONCE
#include <algorithm>
#include <cmath>

#include "base/status.h"
#include "kernels/deltanet.h"
#endif  // GEIST_KERNELS_SIMD_DELTANET_SIMD_ONCE

HWY_BEFORE_NAMESPACE();
namespace geist::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DD = hn::ScalableTag<double>;
using DF = hn::Rebind<float, DD>;  // as many floats as DD has doubles
using VD = hn::Vec<DD>;

HWY_INLINE VD LoadF(const float* p) { return hn::PromoteTo(DD(), hn::LoadU(DF(), p)); }
HWY_INLINE void StoreF(VD v, float* p) { hn::StoreU(hn::DemoteTo(DF(), v), DF(), p); }

// The vector form needs whole vectors along d_k and pairs of vectors along d_v.
bool ChunkedFits(int32_t dk, int32_t dv) {
  const int32_t n = static_cast<int32_t>(hn::Lanes(DD()));
  return dk % n == 0 && dv % (2 * n) == 0;
}

// ks[i] = S0^T k_i and qs[i] = S0^T q_i for T tokens from i0: T x 2 vectors of lanes per
// matrix in registers, each state row load serving 2T multiply-adds.
template <int T>
HWY_INLINE void StateReads(const float* s, int32_t dk, int32_t dv, const double* kd,
                           const double* qd, int64_t i0, double* ks, double* qs) {
  const DD d;
  const size_t n = hn::Lanes(d);
  for (int32_t b = 0; b < dv; b += static_cast<int32_t>(2 * n)) {
    VD ak[T][2], aq[T][2];
    for (int t = 0; t < T; ++t) {
      ak[t][0] = ak[t][1] = aq[t][0] = aq[t][1] = hn::Zero(d);
    }
    for (int32_t r = 0; r < dk; ++r) {
      const float* row = s + int64_t{r} * dv + b;
      const VD s0 = LoadF(row), s1 = LoadF(row + n);
      for (int t = 0; t < T; ++t) {
        const VD kb = hn::Set(d, kd[(i0 + t) * dk + r]);
        const VD qb = hn::Set(d, qd[(i0 + t) * dk + r]);
        ak[t][0] = hn::MulAdd(kb, s0, ak[t][0]);
        ak[t][1] = hn::MulAdd(kb, s1, ak[t][1]);
        aq[t][0] = hn::MulAdd(qb, s0, aq[t][0]);
        aq[t][1] = hn::MulAdd(qb, s1, aq[t][1]);
      }
    }
    for (int t = 0; t < T; ++t) {
      hn::StoreU(ak[t][0], d, ks + (i0 + t) * dv + b);
      hn::StoreU(ak[t][1], d, ks + (i0 + t) * dv + b + n);
      hn::StoreU(aq[t][0], d, qs + (i0 + t) * dv + b);
      hn::StoreU(aq[t][1], d, qs + (i0 + t) * dv + b + n);
    }
  }
}

// q_i . k_j and k_i . k_j for J keys from j0 (independent accumulator chains).
template <int J>
HWY_INLINE void Dots(const double* qi, const double* ki, const double* kd, int64_t j0, int32_t dk,
                     double* qk_out, double* kk_out) {
  const DD d;
  const size_t n = hn::Lanes(d);
  VD aq[J], ak[J];
  for (int j = 0; j < J; ++j) aq[j] = ak[j] = hn::Zero(d);
  for (int32_t r = 0; r < dk; r += static_cast<int32_t>(n)) {
    const VD q = hn::LoadU(d, qi + r), k = hn::LoadU(d, ki + r);
    for (int j = 0; j < J; ++j) {
      const VD kj = hn::LoadU(d, kd + (j0 + j) * dk + r);
      aq[j] = hn::MulAdd(q, kj, aq[j]);
      ak[j] = hn::MulAdd(k, kj, ak[j]);
    }
  }
  for (int j = 0; j < J; ++j) {
    qk_out[j] = hn::GetLane(hn::SumOfLanes(d, aq[j]));
    kk_out[j] = hn::GetLane(hn::SumOfLanes(d, ak[j]));
  }
}

// S <- e_last S + sum_j kd[j] u_j^T for R state rows from r0 (kd already scaled by each token's
// decay to the chunk end), rounded to f32 once.
template <int R>
HWY_INLINE void StateUpdate(float* s, int32_t dk, int32_t dv, int64_t len, const double* kd,
                            const double* u, double e_last, int32_t r0) {
  const DD d;
  const size_t n = hn::Lanes(d);
  const VD ev = hn::Set(d, e_last);
  for (int32_t b = 0; b < dv; b += static_cast<int32_t>(2 * n)) {
    VD acc[R][2];
    for (int r = 0; r < R; ++r) {
      const float* row = s + int64_t{r0 + r} * dv + b;
      acc[r][0] = hn::Mul(ev, LoadF(row));
      acc[r][1] = hn::Mul(ev, LoadF(row + n));
    }
    for (int64_t j = 0; j < len; ++j) {
      const VD u0 = hn::LoadU(d, u + j * dv + b), u1 = hn::LoadU(d, u + j * dv + b + n);
      for (int r = 0; r < R; ++r) {
        const VD m = hn::Set(d, kd[j * dk + r0 + r]);
        acc[r][0] = hn::MulAdd(m, u0, acc[r][0]);
        acc[r][1] = hn::MulAdd(m, u1, acc[r][1]);
      }
    }
    for (int r = 0; r < R; ++r) {
      float* row = s + int64_t{r0 + r} * dv + b;
      StoreF(acc[r][0], row);
      StoreF(acc[r][1], row + n);
    }
  }
}

void GatedDeltaChunked(const GatedDeltaArgs& a, int32_t chunk, int32_t h_begin, int32_t h_end,
                       double* scratch) {
  const DD d;
  const size_t n = hn::Lanes(d);
  const int32_t dk = a.d_k;
  const int32_t dv = a.d_v;
  const int64_t c = chunk;
  double* cum = scratch;     // [chunk] G_i, then e^{G_last - G_i}
  double* ks = cum + c;      // [chunk][d_v] S0^T k_i, then u_i
  double* qs = ks + c * dv;  // [chunk][d_v] S0^T q_i
  double* kk = qs + c * dv;  // [chunk][chunk] beta_i e^{G_i-G_s} (k_i . k_s), s < i
  double* qk = kk + c * c;   // [chunk][chunk] e^{G_i-G_s} (q_i . k_s), s <= i
  double* kd = qk + c * c;   // [chunk][d_k] k_i in double, then scaled by e^{G_last - G_i}
  double* qd = kd + c * dk;  // [chunk][d_k] q_i in double
  for (int32_t h = h_begin; h < h_end; ++h) {
    const int32_t kh = h % a.n_k_heads;
    float* s = a.state + static_cast<int64_t>(h) * dk * dv;  // [d_k][d_v]
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += c) {
      const int64_t len = std::min<int64_t>(c, a.n_tokens - t0);
      auto beta = [&](int64_t i) { return double{a.beta[(t0 + i) * a.n_v_heads + h]}; };
      double g_sum = 0.0;
      for (int64_t i = 0; i < len; ++i) {
        g_sum += a.g[(t0 + i) * a.n_v_heads + h];
        cum[i] = g_sum;
      }
      for (int64_t i = 0; i < len; ++i) {
        const float* q = a.q + (t0 + i) * a.q_stride + int64_t{kh} * dk;
        const float* k = a.k + (t0 + i) * a.k_stride + int64_t{kh} * dk;
        for (int32_t r = 0; r < dk; r += static_cast<int32_t>(n)) {
          hn::StoreU(LoadF(k + r), d, kd + i * dk + r);
          hn::StoreU(LoadF(q + r), d, qd + i * dk + r);
        }
      }
      // Reads of the chunk's initial state.
      int64_t i = 0;
      for (; i + 4 <= len; i += 4) StateReads<4>(s, dk, dv, kd, qd, i, ks, qs);
      for (; i < len; ++i) StateReads<1>(s, dk, dv, kd, qd, i, ks, qs);
      // Intra-chunk query-key and key-key products with their decays.
      for (i = 0; i < len; ++i) {
        double dq[4], dkk[4];
        for (int64_t j = 0; j <= i;) {
          const int nj = i + 1 - j >= 4 ? 4 : 1;
          if (nj == 4) {
            Dots<4>(qd + i * dk, kd + i * dk, kd, j, dk, dq, dkk);
          } else {
            Dots<1>(qd + i * dk, kd + i * dk, kd, j, dk, dq, dkk);
          }
          for (int jj = 0; jj < nj; ++jj) {
            const double dec = std::exp(cum[i] - cum[j + jj]);
            qk[i * c + j + jj] = dec * dq[jj];
            if (j + jj < i) kk[i * c + j + jj] = beta(i) * dec * dkk[jj];
          }
          j += nj;
        }
      }
      // Forward substitution for u (over ks), then the outputs, which need u_j for j <= i.
      for (i = 0; i < len; ++i) {
        const float* v = a.v + (t0 + i) * a.v_stride + int64_t{h} * dv;
        float* o = a.out + (t0 + i) * a.out_stride + int64_t{h} * dv;
        const VD e = hn::Set(d, std::exp(cum[i]));
        const VD bi = hn::Set(d, beta(i));
        double* ui = ks + i * dv;
        for (int32_t b = 0; b < dv; b += static_cast<int32_t>(2 * n)) {
          VD u0 = hn::Mul(bi, hn::NegMulAdd(e, hn::LoadU(d, ui + b), LoadF(v + b)));
          VD u1 = hn::Mul(bi, hn::NegMulAdd(e, hn::LoadU(d, ui + b + n), LoadF(v + b + n)));
          for (int64_t j = 0; j < i; ++j) {
            const VD m = hn::Set(d, kk[i * c + j]);
            u0 = hn::NegMulAdd(m, hn::LoadU(d, ks + j * dv + b), u0);
            u1 = hn::NegMulAdd(m, hn::LoadU(d, ks + j * dv + b + n), u1);
          }
          hn::StoreU(u0, d, ui + b);
          hn::StoreU(u1, d, ui + b + n);
          VD o0 = hn::Mul(e, hn::LoadU(d, qs + i * dv + b));
          VD o1 = hn::Mul(e, hn::LoadU(d, qs + i * dv + b + n));
          for (int64_t j = 0; j <= i; ++j) {
            const VD m = hn::Set(d, qk[i * c + j]);
            o0 = hn::MulAdd(m, hn::LoadU(d, ks + j * dv + b), o0);
            o1 = hn::MulAdd(m, hn::LoadU(d, ks + j * dv + b + n), o1);
          }
          StoreF(o0, o + b);
          StoreF(o1, o + b + n);
        }
      }
      // State update: keys scaled by their decay to the chunk end.
      const double g_last = cum[len - 1];
      for (int64_t j = 0; j < len; ++j) {
        const VD dec = hn::Set(d, std::exp(g_last - cum[j]));
        for (int32_t r = 0; r < dk; r += static_cast<int32_t>(n)) {
          hn::StoreU(hn::Mul(dec, hn::LoadU(d, kd + j * dk + r)), d, kd + j * dk + r);
        }
      }
      const double e_last = std::exp(g_last);
      int32_t r = 0;
      for (; r + 4 <= dk; r += 4) StateUpdate<4>(s, dk, dv, len, kd, ks, e_last, r);
      for (; r < dk; ++r) StateUpdate<1>(s, dk, dv, len, kd, ks, e_last, r);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace geist::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace geist {
namespace simd {
HWY_EXPORT(ChunkedFits);
HWY_EXPORT(GatedDeltaChunked);
namespace {
// Dispatched from inside this namespace: with a single compiled target (aarch64: NEON alone)
// HWY_DYNAMIC_DISPATCH becomes a direct call into HWY_NAMESPACE, resolved from here.
bool chunked_fits(int32_t d_k, int32_t d_v) { return HWY_DYNAMIC_DISPATCH(ChunkedFits)(d_k, d_v); }
void gated_delta_chunked(const GatedDeltaArgs& a, int32_t chunk, int32_t h_begin, int32_t h_end,
                         double* scratch) {
  HWY_DYNAMIC_DISPATCH(GatedDeltaChunked)(a, chunk, h_begin, h_end, scratch);
}
}  // namespace
}  // namespace simd

void gated_delta_rule_chunked(const GatedDeltaArgs& a, int32_t chunk, int32_t h_begin,
                              int32_t h_end, double* scratch) {
  GEIST_CHECK(chunk >= 1, "gated_delta_rule_chunked: chunk must be positive");
  if (!simd::chunked_fits(a.d_k, a.d_v)) {
    gated_delta_rule_chunked_reference(a, chunk, h_begin, h_end, scratch);
    return;
  }
  simd::gated_delta_chunked(a, chunk, h_begin, h_end, scratch);
}

}  // namespace geist
#endif  // HWY_ONCE
