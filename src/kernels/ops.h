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
                                        // by freq_factors[i] (Llama-3.x rope_freqs.weight)
};

// Rotates one token's heads in place for position `pos`. Pair i (0 <= i < n_rot/2) turns by
// angle pos * freq_scale * freq_base^(-2i/n_rot) / freq_factors[i], evaluated in double.
// x: [n_head][head_dim], head h at x + h * head_dim.
void rope(float* x, int32_t n_head, int32_t head_dim, int32_t pos, const RopeParams& p);

}  // namespace geist
