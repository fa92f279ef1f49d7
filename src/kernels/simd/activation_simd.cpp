// Highway bodies of activation_simd.h. foreach_target.h re-includes this file once per SIMD
// target; the HWY_ONCE part at the end holds the dispatcher.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/activation_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target must come first.
#include "hwy/highway.h"
// math-inl.h (Exp) needs highway.h before it.
#include "hwy/contrib/math/math-inl.h"

#ifndef GEIST_KERNELS_SIMD_ACTIVATION_SIMD_ONCE
#define GEIST_KERNELS_SIMD_ACTIVATION_SIMD_ONCE
#include "kernels/simd/activation_simd.h"
#endif

HWY_BEFORE_NAMESPACE();
namespace geist::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DA = hn::CappedTag<float, 16>;

template <class V>
HWY_INLINE V SwigluVec(DA da, V g, V u) {
  const V e = hn::Exp(da, hn::Min(hn::Neg(g), hn::Set(da, 80.0f)));
  return hn::Mul(hn::Div(g, hn::Add(hn::Set(da, 1.0f), e)), u);
}

void Swiglu(const float* gate, const float* up, float* out, int64_t n) {
  const DA da;
  const int64_t N = static_cast<int64_t>(hn::Lanes(da));
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(SwigluVec(da, hn::LoadU(da, gate + i), hn::LoadU(da, up + i)), da, out + i);
  }
  if (i < n) {
    HWY_ALIGN float g[16] = {}, u[16] = {};  // [N] padded tail
    for (int64_t k = i; k < n; ++k) {
      g[k - i] = gate[k];
      u[k - i] = up[k];
    }
    hn::Store(SwigluVec(da, hn::Load(da, g), hn::Load(da, u)), da, g);
    for (int64_t k = i; k < n; ++k) out[k] = g[k - i];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace geist::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace geist::simd {

HWY_EXPORT(Swiglu);

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(Swiglu)(gate, up, out, n);
}

}  // namespace geist::simd
#endif  // HWY_ONCE
