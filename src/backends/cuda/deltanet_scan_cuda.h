// The delta rule's prefill walk on the GPU: gated_delta_rule (deltanet_cuda.h) for calls of
// more than one token, unless the chunked form (deltanet_chunk_cuda.h) is asked for.
#pragma once

#include <cuda_runtime.h>

#include "kernels/deltanet.h"  // GatedDeltaArgs

namespace geist::cuda {

// Enqueues the recurrent form over a.n_tokens >= 1 tokens (a.state updated in place, rounded
// to f32 once at the end); d_k <= 512. Numerics: deltanet_cuda.h.
void delta_scan(cudaStream_t s, const GatedDeltaArgs& a);

}  // namespace geist::cuda
