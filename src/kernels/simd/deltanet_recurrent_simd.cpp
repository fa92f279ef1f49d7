// Highway form of the token-by-token gated delta rule (deltanet.h), bitwise equal to
// gated_delta_rule_recurrent_reference: the value dimension d_v goes into vector lanes and each
// lane runs exactly the reference's sequence of double operations (multiplies and adds kept
// apart: this file is compiled with -ffp-contract=off, CMakeLists.txt, so that no multiply and
// add fuse into an FMA on the targets that have one). A lane's correction u[b] depends only on
// its own column of the state, so one block of columns at a time is read (S^T k), corrected and
// written back while it is still in L1: one pass over the state from memory per token.
// foreach_target.h re-includes this file once per SIMD target; the HWY_ONCE part at the end
// holds the dispatcher.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/deltanet_recurrent_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target must come first.
#include "hwy/highway.h"

#ifndef GEIST_KERNELS_SIMD_DELTANET_RECURRENT_SIMD_ONCE
#define GEIST_KERNELS_SIMD_DELTANET_RECURRENT_SIMD_ONCE
#include <cmath>

#include "kernels/deltanet.h"
#endif  // GEIST_KERNELS_SIMD_DELTANET_RECURRENT_SIMD_ONCE

HWY_BEFORE_NAMESPACE();
namespace geist::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DD = hn::ScalableTag<double>;
using DF = hn::Rebind<float, DD>;  // as many floats as DD has doubles
using VD = hn::Vec<DD>;

HWY_INLINE VD LoadF(const float* p) { return hn::PromoteTo(DD(), hn::LoadU(DF(), p)); }
HWY_INLINE void StoreF(VD v, float* p) { hn::StoreU(hn::DemoteTo(DF(), v), DF(), p); }

// Whole vectors along d_v.
bool RecurrentFits(int32_t dv) { return dv % static_cast<int32_t>(hn::Lanes(DD())) == 0; }

// One token on V vectors of state columns [b, b + V * lanes) of one head, per lane b exactly:
//   kv = 0; for i: kv += (s[i][b] * decay) * k[i]
//   u = beta * (v[b] - kv)
//   acc = 0; for i: nr = s[i][b] * decay + k[i] * u; s[i][b] = float(nr); acc += nr * q[i]
//   o[b] = float(acc)
template <int V>
HWY_INLINE void ColumnBlock(float* s, int32_t dk, int32_t dv, int32_t b, const float* q,
                            const float* k, const float* v, VD decay, VD beta, float* o) {
  const DD d;
  const size_t n = hn::Lanes(d);
  VD kv[V];
  for (int j = 0; j < V; ++j) kv[j] = hn::Zero(d);
  for (int32_t i = 0; i < dk; ++i) {
    const float* row = s + int64_t{i} * dv + b;
    const VD ki = hn::Set(d, double{k[i]});
    for (int j = 0; j < V; ++j) {
      kv[j] = hn::Add(kv[j], hn::Mul(hn::Mul(LoadF(row + j * n), decay), ki));
    }
  }
  VD u[V];
  for (int j = 0; j < V; ++j) u[j] = hn::Mul(beta, hn::Sub(LoadF(v + b + j * n), kv[j]));
  VD acc[V];
  for (int j = 0; j < V; ++j) acc[j] = hn::Zero(d);
  for (int32_t i = 0; i < dk; ++i) {
    float* row = s + int64_t{i} * dv + b;
    const VD ki = hn::Set(d, double{k[i]});
    const VD qi = hn::Set(d, double{q[i]});
    for (int j = 0; j < V; ++j) {
      const VD nr = hn::Add(hn::Mul(LoadF(row + j * n), decay), hn::Mul(ki, u[j]));
      StoreF(nr, row + j * n);
      acc[j] = hn::Add(acc[j], hn::Mul(nr, qi));
    }
  }
  for (int j = 0; j < V; ++j) StoreF(acc[j], o + b + j * n);
}

void GatedDeltaRecurrent(const GatedDeltaArgs& a, int32_t h_begin, int32_t h_end) {
  const DD d;
  const int32_t n = static_cast<int32_t>(hn::Lanes(d));
  // Columns per block: 4 vectors (32 doubles with AVX-512) of d_k rows, 16 KiB of f32 state
  // for d_k = 128, stay in L1 between the read and the update.
  constexpr int kBlock = 4;
  const int32_t dk = a.d_k;
  const int32_t dv = a.d_v;
  for (int32_t h = h_begin; h < h_end; ++h) {
    const int32_t kh = h % a.n_k_heads;
    float* s = a.state + static_cast<int64_t>(h) * dk * dv;  // [d_k][d_v]
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const float* q = a.q + t * a.q_stride + static_cast<int64_t>(kh) * dk;
      const float* k = a.k + t * a.k_stride + static_cast<int64_t>(kh) * dk;
      const float* v = a.v + t * a.v_stride + static_cast<int64_t>(h) * dv;
      const VD decay = hn::Set(d, std::exp(double{a.g[t * a.n_v_heads + h]}));
      const VD beta = hn::Set(d, double{a.beta[t * a.n_v_heads + h]});
      float* o = a.out + t * a.out_stride + static_cast<int64_t>(h) * dv;
      int32_t b = 0;
      for (; b + kBlock * n <= dv; b += kBlock * n) {
        ColumnBlock<kBlock>(s, dk, dv, b, q, k, v, decay, beta, o);
      }
      for (; b < dv; b += n) ColumnBlock<1>(s, dk, dv, b, q, k, v, decay, beta, o);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace geist::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace geist {
namespace simd {
HWY_EXPORT(RecurrentFits);
HWY_EXPORT(GatedDeltaRecurrent);
namespace {
// Dispatched from inside this namespace: with a single compiled target (aarch64: NEON alone)
// HWY_DYNAMIC_DISPATCH becomes a direct call into HWY_NAMESPACE, resolved from here.
bool recurrent_fits(int32_t d_v) { return HWY_DYNAMIC_DISPATCH(RecurrentFits)(d_v); }
void gated_delta_recurrent(const GatedDeltaArgs& a, int32_t h_begin, int32_t h_end) {
  HWY_DYNAMIC_DISPATCH(GatedDeltaRecurrent)(a, h_begin, h_end);
}
}  // namespace
}  // namespace simd

void gated_delta_rule_recurrent(const GatedDeltaArgs& a, int32_t h_begin, int32_t h_end,
                                double* scratch) {
  if (!simd::recurrent_fits(a.d_v)) {
    gated_delta_rule_recurrent_reference(a, h_begin, h_end, scratch);
    return;
  }
  simd::gated_delta_recurrent(a, h_begin, h_end);
}

}  // namespace geist
#endif  // HWY_ONCE
