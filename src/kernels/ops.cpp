#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/status.h"
#include "kernels/simd/activation_simd.h"

namespace geist {

float dot_f32(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) acc[j] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// Two passes with no loop-carried chain: eight running maxima in two 4-wide vectors (GCC / Clang
// vector extensions; `a > m ? a : m` is one maxps / fmax lane-wise, and a NaN never wins a
// `>`), then the first value equal to their maximum (a NaN equals nothing). 128k values: ~4x
// the time of reading them, not the ~25x of a compare-and-branch per value.
int64_t argmax_first(const float* x, int64_t n) {
  typedef float F4 __attribute__((vector_size(16)));
  const F4 ninf = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  F4 m0 = ninf, m1 = ninf;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    F4 a, b;
    std::memcpy(&a, x + i, sizeof a);
    std::memcpy(&b, x + i + 4, sizeof b);
    m0 = a > m0 ? a : m0;
    m1 = b > m1 ? b : m1;
  }
  float m = -INFINITY;
  for (int j = 0; j < 4; ++j) {
    m = m0[j] > m ? m0[j] : m;
    m = m1[j] > m ? m1[j] : m;
  }
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  if (m == -INFINITY) return 0;
  typedef int I4 __attribute__((vector_size(16)));
  const F4 mv = {m, m, m, m};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {  // to the first 8 values holding m
    F4 a, b;
    std::memcpy(&a, x + j, sizeof a);
    std::memcpy(&b, x + j + 4, sizeof b);
    const I4 e = (a == mv) | (b == mv);
    if ((e[0] | e[1] | e[2] | e[3]) != 0) break;
  }
  for (; j < n; ++j) {
    if (x[j] == m) return j;
  }
  return 0;  // not reached: m is one of the values
}

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void softmax(float* x, int64_t n) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

void swiglu_simd(const float* gate, const float* up, float* out, int64_t n) {
  simd::swiglu(gate, up, out, n);
}

void rope(float* x, int32_t n_head, int32_t head_dim, int32_t pos, const RopeParams& p) {
  GEIST_CHECK(p.n_rot > 0 && p.n_rot % 2 == 0 && p.n_rot <= head_dim,
              "rope: n_rot must be even and within head_dim");
  const int32_t half = p.n_rot / 2;
  // NORMAL pairs adjacent dims; NEOX pairs dim i with dim i + n_rot/2.
  const int32_t stride_pair = p.style == RopeStyle::NORMAL ? 2 : 1;
  const int32_t offset_second = p.style == RopeStyle::NORMAL ? 1 : half;
  for (int32_t i = 0; i < half; ++i) {
    double theta = static_cast<double>(pos) * p.freq_scale *
                   std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot);
    if (p.freq_factors) theta /= p.freq_factors[i];
    const float c = static_cast<float>(std::cos(theta)) * p.mscale;
    const float s = static_cast<float>(std::sin(theta)) * p.mscale;
    for (int32_t h = 0; h < n_head; ++h) {
      float* a = x + static_cast<int64_t>(h) * head_dim + i * stride_pair;
      float* b = a + offset_second;
      const float x0 = *a;
      const float x1 = *b;
      *a = x0 * c - x1 * s;
      *b = x0 * s + x1 * c;
    }
  }
}

void yarn_rope_factors(const YarnConfig& y, int32_t n_rot, float freq_base, float* factors,
                       float* mscale) {
  GEIST_CHECK(y.factor > 0 && y.n_ctx_orig > 0 && n_rot > 0 && freq_base > 0,
              "yarn_rope_factors: factor, original context, n_rot and base must be positive");
  const double pi = 3.14159265358979323846;
  auto corr_dim = [&](double beta) {
    return n_rot * std::log(y.n_ctx_orig / (beta * 2.0 * pi)) / (2.0 * std::log(double{freq_base}));
  };
  const double low = std::max(0.0, std::floor(corr_dim(y.beta_fast)));
  const double high = std::min(static_cast<double>(n_rot - 1), std::ceil(corr_dim(y.beta_slow)));
  const double s = y.factor;
  for (int32_t i = 0; i < n_rot / 2; ++i) {
    const double t = (i - low) / std::max(0.001, high - low);
    const double ramp = 1.0 - std::min(1.0, std::max(0.0, t));
    const double mult = (1.0 - ramp) / s + ramp;  // the frequency's multiplier
    factors[i] = static_cast<float>(double{factors[i]} / mult);
  }
  *mscale = static_cast<float>(double{y.attn_factor} * (1.0 + 0.1 * std::log(s)));
}

}  // namespace geist
