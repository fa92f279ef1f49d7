// Host-side helpers of the CUDA backend: CUDA runtime errors as geist::Status.
#pragma once

#include <cuda_runtime.h>

#include "base/status.h"

namespace geist::cuda {

// GEIST_E_OOM for an allocation failure, GEIST_E_BACKEND for anything else; the message
// names the call and CUDA's own description of the error.
inline Status status_from(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return Status::ok();
  const geist_status code = e == cudaErrorMemoryAllocation ? GEIST_E_OOM : GEIST_E_BACKEND;
  return Status::error(code, "cuda: %s failed: %s (%s)", call, cudaGetErrorString(e),
                       cudaGetErrorName(e));
}

}  // namespace geist::cuda

// Returns a Status from the enclosing function when a CUDA runtime call fails.
#define GEIST_CUDA_RETURN_IF_ERROR(call)                                                       \
  do {                                                                                         \
    const cudaError_t geist_cuda_e_ = (call);                                                  \
    if (geist_cuda_e_ != cudaSuccess) return ::geist::cuda::status_from(geist_cuda_e_, #call); \
  } while (0)
