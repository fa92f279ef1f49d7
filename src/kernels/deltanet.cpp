#include "kernels/deltanet.h"

#include <algorithm>
#include <cstring>

#include "base/status.h"

namespace geist {

float softplus_f32(float x) {
  if (x > 20.0f) return x;
  return std::log1p(std::exp(x));
}

void silu_inplace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * sigmoid_f32(x[i]);
}

void l2_norm_inplace(float* x, int32_t d, float eps) {
  float ss = 0.0f;
  for (int32_t i = 0; i < d; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss + eps);
  for (int32_t i = 0; i < d; ++i) x[i] *= inv;
}

void rms_norm_gated(const float* x, const float* z, const float* w, int32_t d, float eps,
                    float* out) {
  float ss = 0.0f;
  for (int32_t i = 0; i < d; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(d) + eps);
  for (int32_t i = 0; i < d; ++i) out[i] = w[i] * (x[i] * inv) * (z[i] * sigmoid_f32(z[i]));
}

void conv1d_causal(const float* x, int64_t x_stride, int64_t n, int64_t n_ch, const float* w,
                   int32_t kernel, float* state, float* out, int64_t out_stride, int64_t c_begin,
                   int64_t c_end) {
  GEIST_CHECK(kernel >= 1 && c_begin >= 0 && c_end <= n_ch && c_begin <= c_end,
              "conv1d_causal: bad kernel or channel range");
  const int64_t hist = kernel - 1;  // rows of state
  // Input row s of the virtual sequence [state; x], s in [-hist, n).
  auto in_row = [&](int64_t s) -> const float* {
    return s < 0 ? state + (hist + s) * n_ch : x + s * x_stride;
  };
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * out_stride;
    for (int64_t c = c_begin; c < c_end; ++c) o[c] = 0.0f;
    for (int32_t j = 0; j < kernel; ++j) {
      const float* r = in_row(t - hist + j);
      for (int64_t c = c_begin; c < c_end; ++c) o[c] += w[c * kernel + j] * r[c];
    }
  }
  // Advance the state to the last `hist` rows of [state; x].
  if (hist == 0) return;
  const int64_t w_len = c_end - c_begin;
  if (n >= hist) {
    for (int64_t r = 0; r < hist; ++r) {
      std::memcpy(state + r * n_ch + c_begin, x + (n - hist + r) * x_stride + c_begin,
                  static_cast<size_t>(w_len) * sizeof(float));
    }
  } else {
    // Shift the old rows up by n (forward order reads each source before it is overwritten),
    // then append the n new rows.
    for (int64_t r = 0; r < hist - n; ++r) {
      std::memcpy(state + r * n_ch + c_begin, state + (r + n) * n_ch + c_begin,
                  static_cast<size_t>(w_len) * sizeof(float));
    }
    for (int64_t r = 0; r < n; ++r) {
      std::memcpy(state + (hist - n + r) * n_ch + c_begin, x + r * x_stride + c_begin,
                  static_cast<size_t>(w_len) * sizeof(float));
    }
  }
}

size_t gated_delta_rule_scratch_doubles(int32_t chunk, int32_t d_k, int32_t d_v) {
  const size_t c = static_cast<size_t>(std::max(chunk, 1));
  const size_t rec = 2 * static_cast<size_t>(d_v);
  // The reference uses c + 3 c d_v + 2 c^2; the vector form (simd/deltanet_simd.cpp) swaps one
  // [c][d_v] for the keys and queries in double, [2][c][d_k].
  const size_t chk =
      c + 3 * c * static_cast<size_t>(d_v) + 2 * c * c + 2 * c * static_cast<size_t>(d_k);
  return std::max(rec, chk);
}

void gated_delta_rule_recurrent_reference(const GatedDeltaArgs& a, int32_t h_begin, int32_t h_end,
                                          double* scratch) {
  const int32_t dk = a.d_k;
  const int32_t dv = a.d_v;
  double* kv = scratch;      // [d_v] S^T k for the current token
  double* u = scratch + dv;  // [d_v] correction written into the state
  for (int32_t h = h_begin; h < h_end; ++h) {
    const int32_t kh = h % a.n_k_heads;
    float* s = a.state + static_cast<int64_t>(h) * dk * dv;  // [d_k][d_v]
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const float* q = a.q + t * a.q_stride + static_cast<int64_t>(kh) * dk;
      const float* k = a.k + t * a.k_stride + static_cast<int64_t>(kh) * dk;
      const float* v = a.v + t * a.v_stride + static_cast<int64_t>(h) * dv;
      const double decay = std::exp(double{a.g[t * a.n_v_heads + h]});
      const double beta = a.beta[t * a.n_v_heads + h];
      float* o = a.out + t * a.out_stride + static_cast<int64_t>(h) * dv;

      for (int32_t b = 0; b < dv; ++b) kv[b] = 0.0;
      for (int32_t i = 0; i < dk; ++i) {
        const float* row = s + static_cast<int64_t>(i) * dv;
        const double ki = k[i];
        for (int32_t b = 0; b < dv; ++b) kv[b] += (row[b] * decay) * ki;
      }
      for (int32_t b = 0; b < dv; ++b) u[b] = beta * (v[b] - kv[b]);
      // The output accumulates over kv (reused) before rounding it to f32.
      for (int32_t b = 0; b < dv; ++b) kv[b] = 0.0;
      for (int32_t i = 0; i < dk; ++i) {
        float* row = s + static_cast<int64_t>(i) * dv;
        const double ki = k[i];
        const double qi = q[i];
        for (int32_t b = 0; b < dv; ++b) {
          const double nr = row[b] * decay + ki * u[b];
          row[b] = static_cast<float>(nr);
          kv[b] += nr * qi;
        }
      }
      for (int32_t b = 0; b < dv; ++b) o[b] = static_cast<float>(kv[b]);
    }
  }
}

namespace {

double dot(const float* x, const float* y, int32_t n) {
  double acc = 0.0;
  for (int32_t i = 0; i < n; ++i) acc += double{x[i]} * y[i];
  return acc;
}

}  // namespace

// Within a chunk of L tokens with cumulative log decay G_i (G_i = sum of g over tokens 0..i of
// the chunk) and state S0 at its start, unrolling the recurrence gives
//   u_i = beta_i (v_i - e^{G_i} S0^T k_i) - sum_{s<i} beta_i e^{G_i - G_s} (k_i . k_s) u_s
//   o_i = e^{G_i} S0^T q_i + sum_{s<=i} e^{G_i - G_s} (q_i . k_s) u_s
//   S_L = e^{G_{L-1}} S0 + sum_s e^{G_{L-1} - G_s} k_s u_s^T
// The first line is a unit lower-triangular system in u, solved by forward substitution. All
// decay factors are exponentials of non-positive numbers, so nothing overflows.
void gated_delta_rule_chunked_reference(const GatedDeltaArgs& a, int32_t chunk, int32_t h_begin,
                                        int32_t h_end, double* scratch) {
  GEIST_CHECK(chunk >= 1, "gated_delta_rule_chunked_reference: chunk must be positive");
  const int32_t dk = a.d_k;
  const int32_t dv = a.d_v;
  const int64_t c = chunk;
  double* cum = scratch;      // [chunk] G_i
  double* ks = cum + c;       // [chunk][d_v] S0^T k_i, then u_i
  double* qs = ks + c * dv;   // [chunk][d_v] S0^T q_i
  double* acc = qs + c * dv;  // [chunk][d_v] one row of the state update / output
  double* kk = acc + c * dv;  // [chunk][chunk] beta_i e^{G_i-G_s} (k_i . k_s), s < i
  double* qk = kk + c * c;    // [chunk][chunk] e^{G_i-G_s} (q_i . k_s), s <= i
  for (int32_t h = h_begin; h < h_end; ++h) {
    const int32_t kh = h % a.n_k_heads;
    float* s = a.state + static_cast<int64_t>(h) * dk * dv;  // [d_k][d_v]
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += c) {
      const int64_t len = std::min<int64_t>(c, a.n_tokens - t0);
      auto qrow = [&](int64_t i) { return a.q + (t0 + i) * a.q_stride + int64_t{kh} * dk; };
      auto krow = [&](int64_t i) { return a.k + (t0 + i) * a.k_stride + int64_t{kh} * dk; };
      auto vrow = [&](int64_t i) { return a.v + (t0 + i) * a.v_stride + int64_t{h} * dv; };
      auto beta = [&](int64_t i) { return double{a.beta[(t0 + i) * a.n_v_heads + h]}; };

      double g_sum = 0.0;
      for (int64_t i = 0; i < len; ++i) {
        g_sum += a.g[(t0 + i) * a.n_v_heads + h];
        cum[i] = g_sum;
      }
      // Reads of the chunk's initial state: [len][d_k] x [d_k][d_v] products.
      for (int64_t i = 0; i < len; ++i) {
        const float* q = qrow(i);
        const float* k = krow(i);
        double* ksi = ks + i * dv;
        double* qsi = qs + i * dv;
        for (int32_t b = 0; b < dv; ++b) ksi[b] = qsi[b] = 0.0;
        for (int32_t r = 0; r < dk; ++r) {
          const float* row = s + static_cast<int64_t>(r) * dv;
          const double kr = k[r], qr = q[r];
          for (int32_t b = 0; b < dv; ++b) {
            ksi[b] += kr * row[b];
            qsi[b] += qr * row[b];
          }
        }
      }
      // Intra-chunk key-key and query-key products with their decays.
      for (int64_t i = 0; i < len; ++i) {
        const float* ki = krow(i);
        const float* qi = qrow(i);
        for (int64_t j = 0; j <= i; ++j) {
          const float* kj = krow(j);
          const double d = std::exp(cum[i] - cum[j]);
          qk[i * c + j] = d * dot(qi, kj, dk);
          if (j < i) kk[i * c + j] = beta(i) * d * dot(ki, kj, dk);
        }
      }
      // Forward substitution for u (stored over ks).
      for (int64_t i = 0; i < len; ++i) {
        double* ui = ks + i * dv;
        const float* v = vrow(i);
        const double e = std::exp(cum[i]);
        const double bi = beta(i);
        for (int32_t b = 0; b < dv; ++b) ui[b] = bi * (v[b] - e * ui[b]);
        for (int64_t j = 0; j < i; ++j) {
          const double m = kk[i * c + j];
          const double* uj = ks + j * dv;
          for (int32_t b = 0; b < dv; ++b) ui[b] -= m * uj[b];
        }
      }
      // Outputs.
      for (int64_t i = 0; i < len; ++i) {
        const double e = std::exp(cum[i]);
        const double* qsi = qs + i * dv;
        for (int32_t b = 0; b < dv; ++b) acc[b] = e * qsi[b];
        for (int64_t j = 0; j <= i; ++j) {
          const double m = qk[i * c + j];
          const double* uj = ks + j * dv;
          for (int32_t b = 0; b < dv; ++b) acc[b] += m * uj[b];
        }
        float* o = a.out + (t0 + i) * a.out_stride + int64_t{h} * dv;
        for (int32_t b = 0; b < dv; ++b) o[b] = static_cast<float>(acc[b]);
      }
      // State update; the per-token decays to the chunk end reuse the `cum` slots.
      const double g_last = cum[len - 1];
      const double e_last = std::exp(g_last);
      for (int64_t j = 0; j < len; ++j) cum[j] = std::exp(g_last - cum[j]);
      for (int32_t r = 0; r < dk; ++r) {
        float* row = s + static_cast<int64_t>(r) * dv;
        for (int32_t b = 0; b < dv; ++b) acc[b] = e_last * row[b];
        for (int64_t j = 0; j < len; ++j) {
          const double m = cum[j] * krow(j)[r];
          const double* uj = ks + j * dv;
          for (int32_t b = 0; b < dv; ++b) acc[b] += m * uj[b];
        }
        for (int32_t b = 0; b < dv; ++b) row[b] = static_cast<float>(acc[b]);
      }
    }
  }
}

}  // namespace geist
