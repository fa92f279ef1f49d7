// CudaStream's plain ops (cuda_stream_impl.h): each enqueues its kernels on the session's stream
// at once (the fused ops are cuda_stream_named.cpp / cuda_stream_fused.cpp); and the stream's
// creation.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_stream_impl.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/deltanet_cuda.h"
#include "backends/cuda/matmul_prefill_cuda.h"

namespace geist::cuda {

namespace {

bool env_is_zero(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "0") == 0;
}

}  // namespace

Status CudaStream::alloc(size_t nbytes, std::unique_ptr<Buffer>* out) {
  GEIST_CHECK(core_->mode == StepMode::PLAIN, "cuda: alloc inside a forward step");
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

void CudaStream::upload(void* device_dst, const void* host_src, size_t n) {
  core_->upload(device_dst, host_src, n);
}

void CudaStream::download(void* host_dst, const void* device_src, size_t n) {
  core_->download(host_dst, device_src, n);
}

void CudaStream::fill_zero(void* device_dst, size_t n) {
  if (core_->note_op(kRecFillZero, device_dst, n)) return;
  if (n > 0) core_->ok(cudaMemsetAsync(device_dst, 0, n, core_->stream), "cudaMemsetAsync");
}

Status CudaStream::create_kv(KvMode mode, const std::vector<KvLayerSpec>& layers,
                             int32_t max_seq_len, std::unique_ptr<KvStore>* out) {
  return create_cuda_kv_store(core_, mode, layers, max_seq_len, out);
}

void CudaStream::get_rows(const WeightMatrix& w, const int32_t* ids, int32_t n, float* out) {
  if (n <= 0) return;
  const size_t bytes = static_cast<size_t>(n) * sizeof(int32_t);
  auto* dev_ids = static_cast<int32_t*>(ids_.get(*core_, bytes, "get_rows scratch"));
  if (dev_ids == nullptr) return;
  if (core_->mode == StepMode::PLAIN) {
    if (!core_->ok(cudaEventSynchronize(staged_), "cudaEventSynchronize(staging)")) return;
    if (!ids_host_.reserve(bytes)) {
      core_->upload(dev_ids, ids, bytes);  // pageable: a synchronous upload
      core_->ok(cuda::get_rows(core_->stream, w, dev_ids, n, out), "get_rows kernel launch");
      return;
    }
  } else if (!ids_host_.has(bytes)) {
    core_->step_failed = true;  // cannot allocate while capturing
    return;
  }
  std::memcpy(ids_host_.get(), ids, bytes);
  if (core_->note_op(kRecGetRows, w.type, w.data, w.n_in, w.n_out, w.row_bytes, w.layout, n, out,
                     dev_ids, ids_host_.get())) {
    return;
  }
  const bool good = core_->ok(
      cudaMemcpyAsync(dev_ids, ids_host_.get(), bytes, cudaMemcpyHostToDevice, core_->stream),
      "cudaMemcpyAsync(token ids)");
  // A graph step records the event after its launch (end_forward).
  if (good && core_->mode == StepMode::PLAIN) {
    core_->ok(cudaEventRecord(staged_, core_->stream), "cudaEventRecord(staging)");
  }
  if (good) {
    core_->ok(cuda::get_rows(core_->stream, w, dev_ids, n, out), "get_rows kernel launch");
  }
}

cudaError_t CudaStream::matmul_ws(const WeightMatrix& w, const float* x, int64_t x_stride,
                                  int32_t n_tok, float* y, int64_t y_stride) {
  const size_t need = cuda::matmul_scratch_bytes(w, n_tok);
  void* ws = need > 0 ? act_q8_.get(*core_, need, "matmul activation scratch") : nullptr;
  return cuda::matmul(core_->stream, w, x, x_stride, n_tok, y, y_stride, ws,
                      ws != nullptr ? need : 0);
}

void CudaStream::matmul(const WeightMatrix& w, const float* x, int64_t x_stride, int32_t n_tok,
                        float* y, int64_t y_stride) {
  if (core_->note_op(kRecMatmul, w.type, w.data, w.n_in, w.n_out, w.row_bytes, w.layout, x,
                     x_stride, n_tok, y, y_stride)) {
    return;
  }
  core_->ok(matmul_ws(w, x, x_stride, n_tok, y, y_stride), "matmul kernel launch");
}

void CudaStream::matmul_to_host(const WeightMatrix& w, const float* x, int64_t x_stride,
                                int32_t n_tok, float* host_y, int64_t y_stride) {
  if (n_tok <= 0 || w.n_out <= 0) return;
  const size_t row = static_cast<size_t>(w.n_out) * sizeof(float);
  const size_t total = row * static_cast<size_t>(n_tok);
  // A batched decode step sizes the scratch for every row of the step, so that a later capture
  // of the step, whichever of its sessions want logits then, needs no allocation.
  const size_t want = batch_step_ ? std::max(total, row * static_cast<size_t>(step_n_)) : total;
  auto* tmp =
      static_cast<float*>(y_tmp_.get(*core_, want, "matmul_to_host scratch"));  // [n_tok][n_out]
  if (core_->mode != StepMode::PLAIN) {
    // One row goes through the staging (a node of the graph); a batched step's rows are
    // copied from tmp to host_y after the graph ran (launch_graph), without staging.
    const bool direct = n_tok > 1;
    const bool staged = !direct && logits_host_.has(total);
    if (!direct && !staged) core_->step_failed = true;
    const bool replay =
        core_->note_op(kRecToHost, w.type, w.data, w.n_in, w.n_out, w.row_bytes, w.layout, x,
                       x_stride, n_tok, tmp, direct ? nullptr : logits_host_.get());
    if (tmp == nullptr || (!direct && !staged)) return;
    const bool good =
        replay ||
        (core_->ok(matmul_ws(w, x, x_stride, n_tok, tmp, w.n_out), "matmul kernel launch") &&
         (direct || core_->ok(cudaMemcpyAsync(logits_host_.get(), tmp, total,
                                              cudaMemcpyDeviceToHost, core_->stream),
                              "cudaMemcpyAsync(logits to staging)")));
    if (!good) return;
    logits_dst_ = host_y;  // end_forward copies the rows out after the launch
    logits_src_ = direct ? tmp : nullptr;
    logits_stride_ = y_stride;
    logits_rows_ = n_tok;
    logits_row_bytes_ = row;
    return;
  }
  bool good = tmp != nullptr &&
              core_->ok(matmul_ws(w, x, x_stride, n_tok, tmp, w.n_out), "matmul kernel launch");
  const bool staged = n_tok == 1 && logits_host_.reserve(total);
  logits_dst_ = host_y;
  logits_stride_ = y_stride;
  logits_rows_ = n_tok;
  logits_row_bytes_ = row;
  if (staged) {
    good = good && core_->ok(cudaMemcpyAsync(logits_host_.get(), tmp, total, cudaMemcpyDeviceToHost,
                                             core_->stream),
                             "cudaMemcpyAsync(logits to staging)");
  } else {
    good =
        good && core_->ok(cudaMemcpy2DAsync(host_y, static_cast<size_t>(y_stride) * sizeof(float),
                                            tmp, row, row, static_cast<size_t>(n_tok),
                                            cudaMemcpyDeviceToHost, core_->stream),
                          "cudaMemcpy2DAsync(logits to host)");
  }
  good = good && core_->ok(cudaStreamSynchronize(core_->stream), "cudaStreamSynchronize(logits)");
  if (staged || !good) copy_logits_out(good);
  logits_dst_ = nullptr;
}

void CudaStream::matmul_argmax_to_host(const WeightMatrix& w, const float* x, int32_t n_tok,
                                       float* host_y, int32_t* host_ids) {
  (void)host_y;  // the rows stay on the device
  if (n_tok <= 0) return;
  const size_t n = static_cast<size_t>(n_tok);
  std::fill_n(host_ids, n, 0);
  if (w.n_out <= 0) return;
  auto* tmp = static_cast<float*>(y_tmp_.get(
      *core_, n * static_cast<size_t>(w.n_out) * sizeof(float), "matmul_to_host scratch"));
  // [n][kArgmaxParts] parts and the ids [n]; the counters [n] apart, zero at rest (each row's
  // launch leaves its own at 0, and a larger allocation starts zeroed): they must not move
  // when n changes.
  auto* parts = static_cast<cuda::ArgmaxPart*>(
      argmax_.get(*core_, n * (cuda::kArgmaxParts * sizeof(cuda::ArgmaxPart) + sizeof(int32_t)),
                  "argmax scratch"));
  auto* count = static_cast<unsigned*>(
      argmax_count_.get(*core_, n * sizeof(unsigned), "argmax counters", true));
  int32_t* id =
      parts != nullptr ? reinterpret_cast<int32_t*>(parts + n * cuda::kArgmaxParts) : nullptr;
  const size_t bytes = n * sizeof(int32_t);
  const auto launch = [&](void* dst) {
    return core_->ok(matmul_ws(w, x, w.n_in, n_tok, tmp, w.n_out), "matmul kernel launch") &&
           core_->ok(cuda::argmax_first(core_->stream, tmp, static_cast<int32_t>(w.n_out), parts,
                                        count, id, n_tok),
                     "argmax kernel launch") &&
           core_->ok(cudaMemcpyAsync(dst, id, bytes, cudaMemcpyDeviceToHost, core_->stream),
                     "cudaMemcpyAsync(argmax to host)");
  };
  if (core_->mode != StepMode::PLAIN) {
    const bool staged = argmax_host_.has(bytes);
    if (!staged) core_->step_failed = true;
    const bool replay =
        core_->note_op(kRecToHostArgmax, w.type, w.data, w.n_in, w.n_out, w.row_bytes, w.layout, x,
                       n_tok, tmp, parts, count, argmax_host_.get());
    if (tmp == nullptr || parts == nullptr || count == nullptr || !staged) return;
    if (replay || launch(argmax_host_.get())) {  // end_forward copies them
      argmax_dst_ = host_ids;
      argmax_rows_ = n_tok;
    }
    return;
  }
  if (tmp == nullptr || parts == nullptr || count == nullptr) return;
  const bool staged = argmax_host_.reserve(bytes);
  void* dst = staged ? argmax_host_.get() : static_cast<void*>(host_ids);
  if (launch(dst) &&
      core_->ok(cudaStreamSynchronize(core_->stream), "cudaStreamSynchronize(argmax)") && staged) {
    std::memcpy(host_ids, argmax_host_.get(), bytes);
  }
}

void CudaStream::rms_norm(const float* x, int64_t x_stride, const float* w, float* y,
                          int64_t y_stride, int32_t n_rows, int64_t n, float eps) {
  if (core_->note_op(kRecRmsNorm, x, x_stride, w, y, y_stride, n_rows, n, eps)) return;
  core_->ok(cuda::rms_norm(core_->stream, x, x_stride, w, y, y_stride, n_rows, n, eps),
            "rms_norm kernel launch");
}

void CudaStream::rope(float* x, int64_t x_stride, int32_t n_tok, int32_t n_head, int32_t head_dim,
                      int32_t pos0, const RopeParams& p) {
  int32_t off = 0;
  const int32_t* pd = core_->pos_ref(pos0, &off);
  if (core_->note_op(kRecRope, x, x_stride, n_tok, n_head, head_dim, off, pd, p.style, p.n_rot,
                     p.freq_base, p.freq_scale, p.freq_factors)) {
    return;
  }
  core_->ok(cuda::rope(core_->stream, RopeTensor{x, x_stride, n_head}, RopeTensor{}, n_tok,
                       head_dim, off, pd, p),
            "rope kernel launch");
}

void CudaStream::add(float* y, const float* x, int64_t n) {
  if (core_->note_op(kRecAdd, y, x, n)) return;
  core_->ok(cuda::add(core_->stream, y, x, n), "add kernel launch");
}

void CudaStream::swiglu(const float* gate, const float* up, float* out, int64_t n) {
  if (core_->note_op(kRecSwiglu, gate, up, out, n)) return;
  core_->ok(cuda::swiglu(core_->stream, gate, up, out, n), "swiglu kernel launch");
}

void CudaStream::sigmoid_mul(float* x, int64_t x_stride, const float* gate, int64_t gate_stride,
                             int32_t n_rows, int64_t n) {
  if (core_->note_op(kRecSigmoidMul, x, x_stride, gate, gate_stride, n_rows, n)) return;
  core_->ok(cuda::sigmoid_mul(core_->stream, x, x_stride, gate, gate_stride, n_rows, n),
            "sigmoid_mul kernel launch");
}

void CudaStream::deltanet_gates(float* beta, float* g, int32_t n_tok, int32_t n_heads,
                                const float* a, const float* dt_bias) {
  if (core_->note_op(kRecGates, beta, g, n_tok, n_heads, a, dt_bias)) return;
  cuda::deltanet_gates(core_->stream, beta, g, n_tok, n_heads, a, dt_bias);
  core_->ok(cudaGetLastError(), "deltanet_gates kernel launch");
}

void CudaStream::conv1d_silu(const float* x, int64_t x_stride, int32_t n_tok, int64_t n_ch,
                             const float* w, int32_t kernel, float* state, float* out,
                             int64_t out_stride) {
  if (core_->note_op(kRecConv, x, x_stride, n_tok, n_ch, w, kernel, state, out, out_stride)) {
    return;
  }
  cuda::conv1d_silu(core_->stream, x, x_stride, n_tok, n_ch, w, kernel, state, out, out_stride);
  core_->ok(cudaGetLastError(), "conv1d_silu kernel launch");
}

void CudaStream::l2_norm_heads(float* x, int64_t x_stride, int32_t n_tok, int32_t n_heads,
                               int32_t d, float eps, float scale) {
  if (core_->note_op(kRecL2Norm, x, x_stride, n_tok, n_heads, d, eps, scale)) return;
  cuda::l2_norm_heads(core_->stream, x, x_stride, n_tok, n_heads, d, eps, scale);
  core_->ok(cudaGetLastError(), "l2_norm_heads kernel launch");
}

void CudaStream::gated_delta_rule(const GatedDeltaArgs& a, int32_t chunk) {
  const size_t bytes = cuda::gated_delta_rule_scratch_bytes(a, chunk);
  void* scratch = nullptr;
  if (bytes > 0) {
    scratch = dn_scratch_.get(*core_, bytes, "gated_delta_rule scratch");
    if (scratch == nullptr) return;
  }
  if (core_->note_op(kRecDelta, a.n_tokens, a.n_k_heads, a.n_v_heads, a.d_k, a.d_v, a.q, a.q_stride,
                     a.k, a.k_stride, a.v, a.v_stride, a.g, a.beta, a.state, a.out, a.out_stride,
                     chunk, scratch)) {
    return;
  }
  cuda::gated_delta_rule(core_->stream, a, chunk, scratch);
  core_->ok(cudaGetLastError(), "gated_delta_rule kernel launch");
}

void CudaStream::rms_norm_gated(const float* x, const float* z, const float* w, int32_t n_rows,
                                int32_t d, float eps, float* out) {
  if (core_->note_op(kRecNormGated, x, z, w, n_rows, d, eps, out)) return;
  cuda::rms_norm_gated(core_->stream, x, z, w, n_rows, d, eps, out);
  core_->ok(cudaGetLastError(), "rms_norm_gated kernel launch");
}

Status create_cuda_stream(std::unique_ptr<Stream>* out) {
  std::shared_ptr<StreamCore> core(new (std::nothrow) StreamCore());
  if (!core) return Status(GEIST_E_OOM, "cuda: out of host memory");
  // Non-blocking: the legacy default stream (used by plain cudaMemcpy) never serializes with
  // the session's work.
  GEIST_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&core->stream, cudaStreamNonBlocking));
  cudaEvent_t staged = nullptr;
  GEIST_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&staged, cudaEventDisableTiming));
  std::unique_ptr<CudaStream> s(new (std::nothrow) CudaStream(
      std::move(core), staged, !env_is_zero("GEIST_CUDA_GRAPHS"), !env_is_zero("GEIST_CUDA_FUSE")));
  if (!s) {
    cudaEventDestroy(staged);
    return Status(GEIST_E_OOM, "cuda: out of host memory");
  }
  const char* stats = std::getenv("GEIST_CUDA_STATS");
  s->set_print_stats(stats != nullptr && std::strcmp(stats, "1") == 0);
  *out = std::move(s);
  return Status::ok();
}

Status cuda_stream_stats(Stream& s, CudaStepStats* out) {
  auto* cs = dynamic_cast<CudaStream*>(&s);
  if (cs == nullptr) return Status(GEIST_E_INVALID_ARG, "cuda: not a CUDA stream");
  *out = cs->stats();
  return Status::ok();
}

StreamCore* stream_core(Stream& s) {
  auto* cs = dynamic_cast<CudaStream*>(&s);
  return cs != nullptr ? &cs->core() : nullptr;
}

Status cuda_stream_status(Stream& s) {
  auto* cs = dynamic_cast<CudaStream*>(&s);
  if (cs == nullptr) return Status(GEIST_E_INVALID_ARG, "cuda: not a CUDA stream");
  StreamCore& core = cs->core();
  core.ok(cudaStreamSynchronize(core.stream), "cudaStreamSynchronize");
  return core.error;
}

}  // namespace geist::cuda
