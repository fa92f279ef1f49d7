// CudaBackend: weights and norm vectors in device memory of device 0; streams from
// cuda_stream.cpp. Kernels in *.cu (cuda_kernels.h, deltanet_cuda.h).
#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_stream.h"
#include "backends/cuda/cuda_util.h"
#include "formats/ggml_type.h"

namespace geist {

namespace {

// The oldest device the build's code runs on: sm_90 machine code plus compute_80 PTX.
constexpr int kMinMajor = 8;

// Prefill micro-batch, and the session's largest forward call (engine/session.cpp). Longer
// batches give the tensor-core matmuls more tiles to fill the device with (at 512 tokens the
// 2048 / 3072-row matmuls had 0.65 waves of blocks, 2 warps per scheduler) and fewer launches.
// H200 pp2048 q8_0: llama-1b 38.2k tok/s at 512, 43.3k at 1024, 44.6k at 2048; qwen35-0.8b
// 26.6k, 29.1k, 30.5k. The cost: activation scratch for 2048 rows per session (llama-1b
// about 200 MB).
constexpr int32_t kMicroBatch = 2048;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(std::string desc) : desc_(std::move(desc)) {}
  ~CudaBackend() override {
    for (void* p : allocs_) cudaFree(p);
  }

  BackendKind kind() const override { return BackendKind::CUDA; }
  std::string description() const override { return desc_; }

  Status upload_weight(const WeightMatrix& host, WeightMatrix* dev) override {
    if (host.layout == WeightLayout::ROWS && weight_exact_rows_type(host.type) != host.type &&
        host.n_in > 0 && host.n_out > 0 && host.row_bytes == ggml_row_size(host.type, host.n_in)) {
      // Q5_0 / IQ4_NL / Q3_K: their values, exactly, as Q8_0 / Q6_K rows (the CPU backend's
      // 8-bit kernels read the same re-encodings), which the kernels here compute.
      std::vector<uint8_t> rows;
      try {
        rows.resize(ggml_row_size(weight_exact_rows_type(host.type), host.n_in) *
                    static_cast<size_t>(host.n_out));
      } catch (const std::bad_alloc&) {
        return Status(GEIST_E_OOM, "cuda backend: out of host memory re-encoding a weight");
      }
      WeightMatrix view;
      weight_to_exact_rows(host, rows.data(), &view);
      return upload_weight(view, dev);  // copies synchronously: rows may go afterwards
    }
    if (!cuda::weight_type_supported(host.type)) {
      return Status::error(GEIST_E_UNSUPPORTED,
                           "cuda backend: weight type %s is not supported (supported: f32, f16, "
                           "bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, "
                           "iq4_nl, iq4_xs)",
                           ggml_type_name(host.type));
    }
    if (host.layout != WeightLayout::ROWS) {
      return Status(GEIST_E_UNSUPPORTED, "cuda backend: weights must come in the GGUF row layout");
    }
    if (host.n_in <= 0 || host.n_out < 0 || host.row_bytes != ggml_row_size(host.type, host.n_in)) {
      return Status::error(GEIST_E_INVALID_ARG,
                           "cuda backend: weight of %s with %" PRId64 " x %" PRId64
                           " elements has row size %zu",
                           ggml_type_name(host.type), host.n_out, host.n_in, host.row_bytes);
    }
    const size_t bytes = host.row_bytes * static_cast<size_t>(host.n_out);
    if (cuda::weight_is_repacked(host.type)) return upload_repacked(host, bytes, dev);
    const void* p = nullptr;
    GEIST_RETURN_IF_ERROR(copy_to_device(host.data, bytes, &p));
    *dev = host;
    dev->data = static_cast<const uint8_t*>(p);
    return Status::ok();
  }

  Status upload_floats(const float* host, size_t n, const float** dev) override {
    const void* p = nullptr;
    GEIST_RETURN_IF_ERROR(copy_to_device(host, n * sizeof(float), &p));
    *dev = static_cast<const float*>(p);
    return Status::ok();
  }

  Status new_stream(std::unique_ptr<Stream>* out) const override {
    return cuda::create_cuda_stream(out);
  }
  int32_t micro_batch(int32_t arch_default) const override {
    return std::max(arch_default, kMicroBatch);
  }

 private:
  // host == nullptr: allocates only.
  Status copy_to_device(const void* host, size_t bytes, const void** out) {
    try {
      allocs_.reserve(allocs_.size() + 1);  // so the push_back below cannot throw
    } catch (const std::bad_alloc&) {
      return Status(GEIST_E_OOM, "cuda backend: out of host memory");
    }
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return Status::error(e == cudaErrorMemoryAllocation ? GEIST_E_OOM : GEIST_E_BACKEND,
                           "cuda backend: cudaMalloc(%zu bytes) for a weight failed: %s", bytes,
                           cudaGetErrorString(e));
    }
    allocs_.push_back(p);
    if (bytes > 0 && host != nullptr) {
      GEIST_CUDA_RETURN_IF_ERROR(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
      // A pageable cudaMemcpy may return before its DMA lands, and the sessions' streams are
      // non-blocking (not ordered after the legacy stream): wait for it here.
      GEIST_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    }
    *out = p;
    return Status::ok();
  }

  // The GGUF rows go to a temporary device buffer, and the kernels' layout
  // (cuda::repack_weight) to the kept allocation.
  Status upload_repacked(const WeightMatrix& host, size_t bytes, WeightMatrix* dev) {
    void* raw = nullptr;
    cudaError_t e = cudaMalloc(&raw, bytes == 0 ? 1 : bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return Status::error(e == cudaErrorMemoryAllocation ? GEIST_E_OOM : GEIST_E_BACKEND,
                           "cuda backend: cudaMalloc(%zu bytes) for a weight failed: %s", bytes,
                           cudaGetErrorString(e));
    }
    const size_t out_bytes = cuda::device_weight_bytes(host.type, host.n_in, host.n_out);
    const void* p = nullptr;
    Status st = copy_to_device(nullptr, out_bytes, &p);  // allocation only
    WeightMatrix src = host;
    src.data = static_cast<const uint8_t*>(raw);
    if (st.is_ok() && bytes > 0) {
      e = cudaMemcpy(raw, host.data, bytes, cudaMemcpyHostToDevice);
      if (e == cudaSuccess) e = cudaDeviceSynchronize();
      if (e == cudaSuccess)
        e = cuda::repack_weight(nullptr, src, static_cast<uint8_t*>(const_cast<void*>(p)));
      if (e == cudaSuccess) e = cudaDeviceSynchronize();
      st = cuda::status_from(e, "weight upload (repack)");
    }
    cudaFree(raw);
    if (!st.is_ok()) return st;
    *dev = host;
    dev->data = static_cast<const uint8_t*>(p);
    return Status::ok();
  }

  std::string desc_;
  std::vector<void*> allocs_;  // device allocations owned by the backend
};

}  // namespace

int cuda_device_count_impl() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // no driver / no device: not an error state for later calls
    return 0;
  }
  return n;
}

Status create_cuda_backend(std::unique_ptr<Backend>* out) {
  if (cuda_device_count_impl() == 0) {
    return Status(GEIST_E_UNSUPPORTED, "backend cuda: no CUDA device is available");
  }
  GEIST_CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
  cudaDeviceProp prop{};
  GEIST_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, 0));
  if (prop.major < kMinMajor) {
    return Status::error(GEIST_E_UNSUPPORTED,
                         "backend cuda: device %s is sm_%d%d; this build needs sm_%d0 or newer",
                         prop.name, prop.major, prop.minor, kMinMajor);
  }
  GEIST_CUDA_RETURN_IF_ERROR(cudaFree(nullptr));  // creates the context now, not in a forward
  char desc[512];
  std::snprintf(desc, sizeof(desc), "cuda (%s, sm_%d%d, %.0f GiB)", prop.name, prop.major,
                prop.minor, static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024 * 1024));
  std::unique_ptr<Backend> b(new (std::nothrow) CudaBackend(desc));
  if (!b) return Status(GEIST_E_OOM, "cuda backend: out of host memory");
  *out = std::move(b);
  return Status::ok();
}

}  // namespace geist
