// Internal to the CUDA backend: the stream object shared by a CudaStream and its KV store.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "base/status.h"

namespace geist::cuda {

// One cudaStream_t and the first CUDA failure seen on it. Shared (shared_ptr) by the
// CudaStream and the KvStore it creates, so neither outlives the stream they enqueue on,
// whatever order the session destroys them in.
//
// Why a recorded error: Stream ops return void (they are asynchronous on a device), so a
// failed launch or copy is recorded here, printed once to stderr, and readable through
// cuda_stream_status(); downloads after a failure fill their destination with 0xFF bytes
// (NaN floats), so results are never silently stale.
struct StreamCore {
  cudaStream_t stream = nullptr;
  Status error;

  StreamCore() = default;
  StreamCore(const StreamCore&) = delete;
  StreamCore& operator=(const StreamCore&) = delete;
  ~StreamCore();

  // Records a failure of `what` (the first one wins); true when e == cudaSuccess.
  bool ok(cudaError_t e, const char* what);
  // cudaMemcpyAsync device -> host, then waits for the stream; on failure fills dst with 0xFF.
  void download(void* host_dst, const void* device_src, size_t n);
  // cudaMemcpyAsync host -> device, then waits (the caller may reuse host_src at once).
  void upload(void* device_dst, const void* host_src, size_t n);
};

// A new stream on the current device.
Status create_cuda_stream(std::unique_ptr<Stream>* out);

// GEIST_E_UNSUPPORTED for modes other than F32 / F16; GEIST_E_INVALID_ARG for bad sizes (as
// KvCache::create); GEIST_E_OOM when device memory runs out.
Status create_cuda_kv_store(std::shared_ptr<StreamCore> core, KvMode mode,
                            const std::vector<KvLayerSpec>& layers, int32_t max_seq_len,
                            std::unique_ptr<KvStore>* out);

// The first CUDA failure of a stream from create_cuda_stream (OK when none); GEIST_E_INVALID_ARG
// for a stream of another backend. Waits for the stream's queued work first, so execution
// errors of earlier ops are included.
Status cuda_stream_status(Stream& s);

}  // namespace geist::cuda
