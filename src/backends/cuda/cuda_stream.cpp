#include "backends/cuda/cuda_stream.h"

#include <cstdio>
#include <cstring>
#include <new>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/deltanet_cuda.h"

namespace geist::cuda {

StreamCore::~StreamCore() {
  if (stream != nullptr) {
    cudaStreamSynchronize(stream);  // buffers freed after this may still be in use otherwise
    cudaStreamDestroy(stream);
  }
}

bool StreamCore::ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  if (error.is_ok()) {
    error = status_from(e, what);
    std::fprintf(stderr, "geist: %s\n", error.message().c_str());
  }
  return false;
}

void StreamCore::download(void* host_dst, const void* device_src, size_t n) {
  if (n == 0) return;
  const bool good = ok(cudaMemcpyAsync(host_dst, device_src, n, cudaMemcpyDeviceToHost, stream),
                       "cudaMemcpyAsync(device to host)") &&
                    ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize(after download)");
  if (!good) std::memset(host_dst, 0xFF, n);
}

void StreamCore::upload(void* device_dst, const void* host_src, size_t n) {
  if (n == 0) return;
  if (ok(cudaMemcpyAsync(device_dst, host_src, n, cudaMemcpyHostToDevice, stream),
         "cudaMemcpyAsync(host to device)")) {
    ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize(after upload)");
  }
}

namespace {

class CudaBuffer final : public Buffer {
 public:
  CudaBuffer(uint8_t* p, size_t n) {
    data_ = p;
    size_ = n;
  }
  ~CudaBuffer() override {
    // cudaFree waits for the device, so no queued op can still be using the memory.
    if (data_ != nullptr) cudaFree(data_);
  }
};

// A device scratch allocation that only grows. Growing waits for the stream first, because
// queued ops may still read the old allocation.
class Scratch {
 public:
  ~Scratch() {
    if (p_ != nullptr) cudaFree(p_);
  }
  void* get(StreamCore& core, size_t bytes, const char* what) {
    if (bytes <= cap_ && p_ != nullptr) return p_;
    if (!core.ok(cudaStreamSynchronize(core.stream), what)) return nullptr;
    if (p_ != nullptr) cudaFree(p_);
    p_ = nullptr;
    cap_ = 0;
    const size_t want = bytes + bytes / 2 + 256;  // headroom: fewer regrowths
    void* p = nullptr;
    if (!core.ok(cudaMalloc(&p, want), what)) return nullptr;
    p_ = p;
    cap_ = want;
    return p_;
  }

 private:
  void* p_ = nullptr;  // device bytes [cap_]
  size_t cap_ = 0;
};

class CudaStream final : public Stream {
 public:
  explicit CudaStream(std::shared_ptr<StreamCore> core) : core_(std::move(core)) {}

  StreamCore& core() { return *core_; }

  void set_pool(ThreadPool*) override {}

  Status alloc(size_t nbytes, std::unique_ptr<Buffer>* out) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, nbytes == 0 ? 1 : nbytes);
    if (e != cudaSuccess) {
      cudaGetLastError();  // an allocation failure is not sticky; keep it out of later checks
      return Status::error(e == cudaErrorMemoryAllocation ? GEIST_E_OOM : GEIST_E_BACKEND,
                           "cuda: cudaMalloc(%zu bytes) failed: %s", nbytes, cudaGetErrorString(e));
    }
    std::unique_ptr<Buffer> b(new (std::nothrow) CudaBuffer(static_cast<uint8_t*>(p), nbytes));
    if (!b) {
      cudaFree(p);
      return Status(GEIST_E_OOM, "cuda: out of host memory");
    }
    GEIST_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p, 0, nbytes == 0 ? 1 : nbytes, core_->stream));
    *out = std::move(b);
    return Status::ok();
  }
  void upload(void* device_dst, const void* host_src, size_t n) override {
    core_->upload(device_dst, host_src, n);
  }
  void download(void* host_dst, const void* device_src, size_t n) override {
    core_->download(host_dst, device_src, n);
  }
  void fill_zero(void* device_dst, size_t n) override {
    if (n > 0) core_->ok(cudaMemsetAsync(device_dst, 0, n, core_->stream), "cudaMemsetAsync");
  }
  Status create_kv(KvMode mode, const std::vector<KvLayerSpec>& layers, int32_t max_seq_len,
                   std::unique_ptr<KvStore>* out) override {
    return create_cuda_kv_store(core_, mode, layers, max_seq_len, out);
  }

  void get_rows(const WeightMatrix& w, const int32_t* ids, int32_t n, float* out) override {
    if (n <= 0) return;
    const size_t bytes = static_cast<size_t>(n) * sizeof(int32_t);
    auto* dev_ids = static_cast<int32_t*>(ids_.get(*core_, bytes, "get_rows scratch"));
    if (dev_ids == nullptr) return;
    core_->upload(dev_ids, ids, bytes);  // waits: the ids may be reused by the caller at once
    core_->ok(cuda::get_rows(core_->stream, w, dev_ids, n, out), "get_rows kernel launch");
  }
  void matmul(const WeightMatrix& w, const float* x, int64_t x_stride, int32_t n_tok, float* y,
              int64_t y_stride) override {
    core_->ok(cuda::matmul(core_->stream, w, x, x_stride, n_tok, y, y_stride),
              "matmul kernel launch");
  }
  void matmul_to_host(const WeightMatrix& w, const float* x, int64_t x_stride, int32_t n_tok,
                      float* host_y, int64_t y_stride) override {
    if (n_tok <= 0 || w.n_out <= 0) return;
    const size_t row = static_cast<size_t>(w.n_out) * sizeof(float);
    auto* tmp = static_cast<float*>(  // [n_tok][n_out]
        y_tmp_.get(*core_, row * static_cast<size_t>(n_tok), "matmul_to_host scratch"));
    bool good = tmp != nullptr &&
                core_->ok(cuda::matmul(core_->stream, w, x, x_stride, n_tok, tmp, w.n_out),
                          "matmul kernel launch") &&
                core_->ok(cudaMemcpy2DAsync(host_y, static_cast<size_t>(y_stride) * sizeof(float),
                                            tmp, row, row, static_cast<size_t>(n_tok),
                                            cudaMemcpyDeviceToHost, core_->stream),
                          "cudaMemcpy2DAsync(logits to host)") &&
                core_->ok(cudaStreamSynchronize(core_->stream), "cudaStreamSynchronize(logits)");
    if (!good) {
      for (int32_t t = 0; t < n_tok; ++t) std::memset(host_y + t * y_stride, 0xFF, row);
    }
  }
  void rms_norm(const float* x, int64_t x_stride, const float* w, float* y, int64_t y_stride,
                int32_t n_rows, int64_t n, float eps) override {
    core_->ok(cuda::rms_norm(core_->stream, x, x_stride, w, y, y_stride, n_rows, n, eps),
              "rms_norm kernel launch");
  }
  void rope(float* x, int64_t x_stride, int32_t n_tok, int32_t n_head, int32_t head_dim,
            int32_t pos0, const RopeParams& p) override {
    core_->ok(cuda::rope(core_->stream, x, x_stride, n_tok, n_head, head_dim, pos0, p),
              "rope kernel launch");
  }
  void add(float* y, const float* x, int64_t n) override {
    core_->ok(cuda::add(core_->stream, y, x, n), "add kernel launch");
  }
  void swiglu(const float* gate, const float* up, float* out, int64_t n) override {
    core_->ok(cuda::swiglu(core_->stream, gate, up, out, n), "swiglu kernel launch");
  }
  void sigmoid_mul(float* x, int64_t x_stride, const float* gate, int64_t gate_stride,
                   int32_t n_rows, int64_t n) override {
    core_->ok(cuda::sigmoid_mul(core_->stream, x, x_stride, gate, gate_stride, n_rows, n),
              "sigmoid_mul kernel launch");
  }

  // The DeltaNet launchers (deltanet_cuda.h) leave a launch failure pending in CUDA's error
  // state; it is collected right after each call.
  void deltanet_gates(float* beta, float* g, int32_t n_tok, int32_t n_heads, const float* a,
                      const float* dt_bias) override {
    cuda::deltanet_gates(core_->stream, beta, g, n_tok, n_heads, a, dt_bias);
    core_->ok(cudaGetLastError(), "deltanet_gates kernel launch");
  }
  void conv1d_silu(const float* x, int64_t x_stride, int32_t n_tok, int64_t n_ch, const float* w,
                   int32_t kernel, float* state, float* out, int64_t out_stride) override {
    cuda::conv1d_silu(core_->stream, x, x_stride, n_tok, n_ch, w, kernel, state, out, out_stride);
    core_->ok(cudaGetLastError(), "conv1d_silu kernel launch");
  }
  void l2_norm_heads(float* x, int64_t x_stride, int32_t n_tok, int32_t n_heads, int32_t d,
                     float eps, float scale) override {
    cuda::l2_norm_heads(core_->stream, x, x_stride, n_tok, n_heads, d, eps, scale);
    core_->ok(cudaGetLastError(), "l2_norm_heads kernel launch");
  }
  void gated_delta_rule(const GatedDeltaArgs& a, int32_t chunk) override {
    const size_t bytes = cuda::gated_delta_rule_scratch_bytes(a, chunk);
    void* scratch = nullptr;
    if (bytes > 0) {
      scratch = dn_scratch_.get(*core_, bytes, "gated_delta_rule scratch");
      if (scratch == nullptr) return;
    }
    cuda::gated_delta_rule(core_->stream, a, chunk, scratch);
    core_->ok(cudaGetLastError(), "gated_delta_rule kernel launch");
  }
  void rms_norm_gated(const float* x, const float* z, const float* w, int32_t n_rows, int32_t d,
                      float eps, float* out) override {
    cuda::rms_norm_gated(core_->stream, x, z, w, n_rows, d, eps, out);
    core_->ok(cudaGetLastError(), "rms_norm_gated kernel launch");
  }

 private:
  std::shared_ptr<StreamCore> core_;
  Scratch ids_;         // int32 [n] token ids of get_rows
  Scratch y_tmp_;       // float [n_tok][n_out] of matmul_to_host
  Scratch dn_scratch_;  // gated_delta_rule's device scratch
};

}  // namespace

Status create_cuda_stream(std::unique_ptr<Stream>* out) {
  std::shared_ptr<StreamCore> core(new (std::nothrow) StreamCore());
  if (!core) return Status(GEIST_E_OOM, "cuda: out of host memory");
  // Non-blocking: the legacy default stream (used by plain cudaMemcpy) never serializes with
  // the session's work.
  GEIST_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&core->stream, cudaStreamNonBlocking));
  std::unique_ptr<Stream> s(new (std::nothrow) CudaStream(std::move(core)));
  if (!s) return Status(GEIST_E_OOM, "cuda: out of host memory");
  *out = std::move(s);
  return Status::ok();
}

Status cuda_stream_status(Stream& s) {
  auto* cs = dynamic_cast<CudaStream*>(&s);
  if (cs == nullptr) return Status(GEIST_E_INVALID_ARG, "cuda: not a CUDA stream");
  StreamCore& core = cs->core();
  core.ok(cudaStreamSynchronize(core.stream), "cudaStreamSynchronize");
  return core.error;
}

}  // namespace geist::cuda
