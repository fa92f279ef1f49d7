// The chunked (WY / UT-transform) gated delta rule on the GPU, for prefill: the device
// counterpart of gated_delta_rule_chunked (kernels/deltanet.h), used by gated_delta_rule
// (deltanet_cuda.h) for calls of more than one token.
//
// Two kernels per pass over up to a bounded number of chunks of kDeltaChunk tokens:
//   prep  (one block per (chunk, value head), all chunks in parallel): the chunk-local
//         products that do not depend on the state: cumulative log decays G, the masked
//         products A = beta_i e^{G_i-G_j} k_i.k_j (j < i) and P = e^{G_i-G_j} q_i.k_j (j <= i),
//         T = (I + A)^-1 by column-wise forward substitution, W = T diag(beta e^G) K,
//         U = T diag(beta) V, e^G Q and e^{G_last - G} K; written to scratch in double.
//   scan  (one block per (value head, tile of kScanCols state columns), sequential over the
//         chunks, the state tile on chip in double): U' = U - W S, O = (e^G Q) S + P U',
//         S <- e^{G_last} S + (e^{G_last-G} K)^T U'.
// Everything accumulates in double; every output is a fixed sequence of operations (no
// atomics, no data-dependent order), so results are deterministic run to run. The state is
// read from f32 once per pass and rounded to f32 once at its end.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/deltanet.h"  // GatedDeltaArgs

namespace geist::cuda {

constexpr int32_t kDeltaChunk = 64;        // tokens per chunk (the CPU's chunk)
constexpr int32_t kDeltaChunkMaxDk = 256;  // the prep kernel's key tiles must fit in shared memory

// Whether the chunked form serves this call: more than one token and d_k <= kDeltaChunkMaxDk.
bool delta_chunked_applies(const GatedDeltaArgs& a);

// Device scratch bytes delta_chunked needs (0 when it does not apply).
size_t delta_chunked_scratch_bytes(const GatedDeltaArgs& a);

// Enqueues the chunked delta rule on s (a.state updated in place). scratch: at least
// delta_chunked_scratch_bytes(a) bytes, 8-byte aligned. Requires delta_chunked_applies(a).
void delta_chunked(cudaStream_t s, const GatedDeltaArgs& a, void* scratch);

}  // namespace geist::cuda
