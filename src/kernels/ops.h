// Scalar element-wise and per-row kernels on raw float spans: RMSNorm, RoPE, softmax, SiLU /
// SwiGLU and a fixed-order dot product. They know nothing of models: shapes come in as
// arguments.
//
// Determinism contract: every function computes each output row with a fixed sequence of
// floating-point operations that depends only on that row's inputs and sizes, never on how
// many rows are processed together or on threads. Bit-exact session snapshots and prefill
// split invariance rely on this.
#pragma once

#include <cstdint>

namespace geist {

// sum_i a[i] * b[i] in f32 with eight interleaved partial sums (lane j takes i % 8 == j)
// combined pairwise at the end: a fixed order the compiler can vectorise.
float dot_f32(const float* a, const float* b, int64_t n);

// The lowest index of the largest value, NaN read as -inf (so it is never chosen unless every
// value is NaN or -inf, and then the answer is 0); +0 and -0 are equal. Greedy sampling.
int64_t argmax_first(const float* x, int64_t n);

// y[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; the sum of squares is accumulated in double.
// w may be nullptr (no scale). x and y may alias.
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

// In place: x[i] = exp(x[i] - max) / sum, the sum taken in index order.
void softmax(float* x, int64_t n);

// x / (1 + exp(-x)).
float silu(float x);
// out[i] = silu(gate[i]) * up[i]; out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);
// The same with a vectorised exp (kernels/simd/activation_simd.h): within a few ulp of
// swiglu(), and each element's value independent of n and of how a caller splits the range.
void swiglu_simd(const float* gate, const float* up, float* out, int64_t n);

// Pairing of the rotated dimensions within a head.
enum class RopeStyle {
  NORMAL,  // (x[2i], x[2i+1]): GGUF Llama (the converter permutes Q/K into this order)
  NEOX,    // (x[i], x[i + n_rot/2]): GPT-NeoX, Qwen
};

struct RopeParams {
  RopeStyle style = RopeStyle::NORMAL;
  int32_t n_rot = 0;        // rotated dims per head (even, <= head_dim); the rest pass through
  float freq_base = 10000;  // theta
  float freq_scale = 1;     // linear scaling: 1 / rope.scaling.factor
  const float* freq_factors = nullptr;  // [n_rot / 2] or nullptr: pair i's frequency is divided
                                        // by freq_factors[i] (Llama-3.x rope_freqs.weight, YaRN)
  float mscale = 1;  // YaRN's magnitude scale: cos and sin are multiplied by it (CPU only)
};

// Rotates one token's heads in place for position `pos`. Pair i (0 <= i < n_rot/2) turns by
// angle pos * freq_scale * freq_base^(-2i/n_rot) / freq_factors[i], evaluated in double; its
// cos and sin are rounded to f32, then multiplied by mscale (f32).
// x: [n_head][head_dim], head h at x + h * head_dim.
void rope(float* x, int32_t n_head, int32_t head_dim, int32_t pos, const RopeParams& p);

// YaRN (rope.scaling.type = yarn) as ggml's rope applies it (ext_factor 1, the default for
// such files), the ramp of the YaRN authors' code: with s = factor, the corrections dims
// d(beta) = n_rot * ln(n_ctx_orig / (2 pi beta)) / (2 ln freq_base), low = max(0,
// floor(d(beta_fast))) and high = min(n_rot - 1, ceil(d(beta_slow))), pair i keeps its frequency
// where i <= low (ramp 1), is divided by s where i >= high (ramp 0), linearly in between: ramp_i =
// 1 - clamp((i - low) / max(0.001, high - low), 0, 1), frequency theta_i * ((1 - ramp_i) / s +
// ramp_i). The pairs' factors go to factors[n_rot / 2] (multiplied into what it holds: 1, or
// the file's rope_freqs, as a divisor), computed in double; *mscale = attn_factor * (1 + 0.1 *
// ln(s)). The rope then runs with freq_scale 1, these factors and mscale.
struct YarnConfig {
  float factor = 1;        // rope.scaling.factor
  int32_t n_ctx_orig = 0;  // rope.scaling.original_context_length (else the training context)
  float beta_fast = 32;    // rope.scaling.yarn_beta_fast
  float beta_slow = 1;     // rope.scaling.yarn_beta_slow
  float attn_factor = 1;   // rope.scaling.attn_factor
};
void yarn_rope_factors(const YarnConfig& y, int32_t n_rot, float freq_base, float* factors,
                       float* mscale);

}  // namespace geist
