#include "kernels/ops.h"

#include <cmath>

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
    const float c = static_cast<float>(std::cos(theta));
    const float s = static_cast<float>(std::sin(theta));
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

}  // namespace geist
