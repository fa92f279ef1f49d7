// CUDA kernels of the gated DeltaNet token mixer (Qwen3.5's linear-attention layers): the
// device counterparts of kernels/deltanet.h, which stays their test oracle.
//
// Every launcher enqueues its kernels on stream `s` and returns at once; all pointers are
// device addresses. Launchers do not synchronise and do not clear CUDA's error state: a launch
// failure stays pending (cudaPeekAtLastError) for the owning CudaStream to turn into a Status
// at its next error check. Shapes are internal invariants (validated at model load), checked
// with GEIST_CHECK; n_tok == 0 (or n_tokens == 0) enqueues nothing.
//
// Numerics:
//   - The element-wise helpers evaluate the CPU formulas in the same order in f32, with
//     CUDA's IEEE-rounded division and square root (no fast-math) and no contraction of
//     the conv1d's multiply-adds into FMAs, so they differ from the CPU only through
//     expf/log1pf (a few ulps) and through the order of the sums of squares (which the GPU
//     accumulates in double, more exactly than the CPU's f32 running sum).
//   - The delta rule accumulates in double, like the CPU (see gated_delta_rule below).
//   - Every output element is computed by a fixed sequence of operations (fixed-shape warp
//     reductions, no atomics on values), so results are deterministic run to run. (The fused
//     delta rule + gated norm counts a head's finished blocks with an atomic counter; which
//     block comes last varies, the arithmetic it then runs does not.)
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/deltanet.h"  // GatedDeltaArgs

namespace geist::cuda {

// For t < n_tok, h < n_heads (row t at + t * n_heads):
//   beta = sigmoid(beta); g = a[h] * softplus(g + dt_bias[h])   (softplus_f32 semantics)
//   beta, g: [n_tok][n_heads]; a, dt_bias: [n_heads]
void deltanet_gates(cudaStream_t s, float* beta, float* g, int32_t n_tok, int32_t n_heads,
                    const float* a, const float* dt_bias);

// conv1d_causal over all channels (state advanced), then SiLU of every output.
//   x:     row t at x + t * x_stride, channel c at offset c
//   w:     [n_ch][kernel]
//   state: [kernel-1][n_ch], time-major, oldest row first
//   out:   row t at out + t * out_stride (must not alias x or state)
// Two kernels: the outputs (one thread per (token, channel)), then the state advance, which
// must not start before every output has read the old state.
void conv1d_silu(cudaStream_t s, const float* x, int64_t x_stride, int32_t n_tok, int64_t n_ch,
                 const float* w, int32_t kernel, float* state, float* out, int64_t out_stride);

// l2_norm_inplace on each [d] head (t < n_tok, h < n_heads, at x + t*x_stride + h*d),
// then *= scale when scale != 1. One warp per head.
void l2_norm_heads(cudaStream_t s, float* x, int64_t x_stride, int32_t n_tok, int32_t n_heads,
                   int32_t d, float eps, float scale);
// Two such calls with the same shape (DeltaNet's q and k heads, disjoint) in one launch,
// each head bitwise as in l2_norm_heads.
void l2_norm_heads2(cudaStream_t s, float* x_a, float scale_a, float* x_b, float scale_b,
                    int64_t x_stride, int32_t n_tok, int32_t n_heads, int32_t d, float eps);

// One token's deltanet_gates (gate_heads 0: none), conv1d_silu, and l2_norm_heads of its
// output's first n_l2 (0..2) runs of l2_heads heads of d (q with scale_q, then k with scale_k),
// in one launch; bitwise the separate calls (in that order). Decode only: one token, rows
// contiguous (x and out of n_ch channels); the regions must be disjoint as in a layer.
struct DeltaPrep {
  float* beta = nullptr;  // [gate_heads]
  float* g = nullptr;     // [gate_heads]
  const float* a = nullptr;
  const float* dt_bias = nullptr;
  int32_t gate_heads = 0;
  const float* x = nullptr;  // [n_ch]
  int64_t n_ch = 0;
  const float* w = nullptr;  // [n_ch][kernel]
  int32_t kernel = 0;
  float* state = nullptr;  // [kernel-1][n_ch]
  float* out = nullptr;    // [n_ch]
  int32_t n_l2 = 0, l2_heads = 0, d = 0;
  float eps = 0, scale_q = 1, scale_k = 1;
};
void deltanet_prep(cudaStream_t s, const DeltaPrep& p);

// A batched decode step's recurrent states, one per row (session) of a launch.
constexpr int kDeltaRowsPerLaunch = 64;
struct DeltaRowStates {
  float* p[kDeltaRowsPerLaunch];  // row r's state (conv: [kernel-1][n_ch]; delta rule: as a.state)
};

// n_rows <= kDeltaRowsPerLaunch one-token conv1d_silu calls in one launch (Stream::
// conv1d_silu_rows): row r's x at x + r * x_stride, its out at out + r * out_stride, its state
// states.p[r]. Each element takes conv1d_silu's arithmetic (deltanet_prep's conv step), so
// every row is bitwise a call of its own; out must not alias x or a state.
void conv1d_silu_rows(cudaStream_t s, const float* x, int64_t x_stride, int32_t n_rows,
                      int64_t n_ch, const float* w, int32_t kernel, const DeltaRowStates& states,
                      float* out, int64_t out_stride);

// n_rows <= kDeltaRowsPerLaunch one-token gated_delta_rule calls in one launch (Stream::
// gated_delta_rule_rows: row r's operands r rows on from a's, its state states.p[r]): the
// one-token kernel's blocks for each row, so every row is bitwise a call of its own.
void gated_delta_rule_rows(cudaStream_t s, const GatedDeltaArgs& a, int32_t n_rows,
                           const DeltaRowStates& states);

// Device scratch bytes gated_delta_rule needs for these shapes (`chunk` is ignored: the device
// uses its own, kDeltaChunk): the chunked form's records where it serves the call (a bounded
// pass of chunks, at most 64 MiB), 0 otherwise.
size_t gated_delta_rule_scratch_bytes(const GatedDeltaArgs& a, int32_t chunk);

// The gated delta rule over a.n_tokens tokens; a.state updated in place. Deterministic.
// scratch: gated_delta_rule_scratch_bytes(a, chunk) bytes (nullptr when that is 0).
//
// Three forms, all accumulating in double:
//   - one token (decode): the recurrent form. A block owns (value head, 32 columns), lane =
//     column, so every state row is one coalesced 128-byte access; its 8 warps split the key
//     rows, and the two sums over rows are added over the warps in a fixed order.
//   - more tokens (prefill): the same mapping walking the tokens with the state in registers,
//     one barrier per token, the tokens' operands staged in shared memory by chunks
//     (delta_scan_kernel); or, with GEIST_CUDA_DELTA_CHUNK=1 and
//     d_k <= 256, the chunked form of deltanet_chunk_cuda.h (slower on the H200: see
//     docs/BENCHMARKS.md).
// The state is read from f32 at the start and rounded to f32 once at the end of the call (or
// of each bounded pass of the chunked form), so results lie within the CPU's own
// chunked-vs-recurrent spread of the exact recurrence.
void gated_delta_rule(cudaStream_t s, const GatedDeltaArgs& a, int32_t chunk, void* scratch);

// One token's gated_delta_rule followed by rms_norm_gated(a.out, z, w, n_v_heads, d_v, eps,
// a.out) in one launch, each element bitwise the two launches'. count: n_v_heads device
// unsigneds, zero before the launch and zero again after it (the last block of each head
// counts itself in and resets its counter). z must not overlap a.out or a.state.
void gated_delta_rule_norm(cudaStream_t s, const GatedDeltaArgs& a, const float* z, const float* w,
                           float eps, unsigned* count);

// rms_norm_gated on n_rows rows of d (row r at r*d of x, z, out); out may alias x.
// w: [d]. One warp per row.
void rms_norm_gated(cudaStream_t s, const float* x, const float* z, const float* w, int32_t n_rows,
                    int32_t d, float eps, float* out);

}  // namespace geist::cuda
