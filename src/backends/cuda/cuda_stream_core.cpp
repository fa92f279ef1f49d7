// StreamCore (cuda_stream.h): the recorded error, the step record of graph capture / replay,
// and the synchronous copies.
#include <cstdio>
#include <cstring>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_stream.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/deltanet_cuda.h"
#include "backends/cuda/matmul_prefill_cuda.h"

namespace geist::cuda {

StreamCore::~StreamCore() {
  if (stream != nullptr) {
    cudaStreamSynchronize(stream);  // buffers freed after this may still be in use otherwise
    cudaStreamDestroy(stream);
  }
  if (pos_dev != nullptr) cudaFree(pos_dev);
}

bool StreamCore::note(std::initializer_list<uint64_t> words) {
  if (mode == StepMode::CAPTURE) {
    record.insert(record.end(), words);
    return false;
  }
  if (mode != StepMode::REPLAY) return false;
  for (const uint64_t w : words) {
    if (cursor >= record.size() || record[cursor] != w) mismatch = true;
    ++cursor;
  }
  return true;
}

bool StreamCore::note_absolute() {
  if (mode == StepMode::CAPTURE) absolute = true;
  if (mode != StepMode::REPLAY) return false;
  mismatch = true;
  return true;
}

bool StreamCore::ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  // The runtime also keeps a non-sticky error as the thread's last error; it is consumed here,
  // or the next launch check of any stream on this thread (another session's) would report it.
  cudaGetLastError();
  if (mode == StepMode::CAPTURE) {
    // Not an error of the session: the step is issued again and runs plainly.
    step_failed = true;
    return false;
  }
  if (error.is_ok()) {
    error = status_from(e, what);
    std::fprintf(stderr, "geist: %s\n", error.message().c_str());
  }
  return false;
}

bool StreamCore::plain_only() {
  if (mode == StepMode::PLAIN) return true;  // CAPTURE / REPLAY: the step fails
  step_failed = true;
  return false;
}

void StreamCore::download(void* host_dst, const void* device_src, size_t n) {
  if (n == 0) return;
  if (!plain_only()) return;
  const bool good = ok(cudaMemcpyAsync(host_dst, device_src, n, cudaMemcpyDeviceToHost, stream),
                       "cudaMemcpyAsync(device to host)") &&
                    ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize(after download)");
  if (!good) std::memset(host_dst, 0xFF, n);
}

void StreamCore::upload(void* device_dst, const void* host_src, size_t n) {
  if (n == 0) return;
  if (!plain_only()) return;
  if (ok(cudaMemcpyAsync(device_dst, host_src, n, cudaMemcpyHostToDevice, stream),
         "cudaMemcpyAsync(host to device)")) {
    ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize(after upload)");
  }
}

}  // namespace geist::cuda
