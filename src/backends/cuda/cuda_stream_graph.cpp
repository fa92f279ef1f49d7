// CudaStream's decode steps as CUDA graphs (see the class comment in cuda_stream_impl.h):
// begin_forward / end_forward capture, replay or run a step plainly.
#include <cstdio>
#include <cstring>

#include "backends/cuda/cuda_stream_impl.h"

namespace geist::cuda {

namespace {

// A failed capture costs one step issued twice; after this many a stream stops trying.
constexpr int kMaxCaptureFailures = 2;

int64_t ns_between(std::chrono::steady_clock::time_point a,
                   std::chrono::steady_clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

}  // namespace

CudaStream::CudaStream(std::shared_ptr<StreamCore> core, cudaEvent_t staged, bool graphs, bool fuse)
    : core_(std::move(core)), staged_(staged), graphs_(graphs), fuse_(fuse) {
  // Positions read on the device need their pinned source; without it every graph step is
  // captured with its positions as arguments.
  if (graphs_ && step_host_.reserve(sizeof(int32_t))) {
    void* p = nullptr;
    if (cudaMalloc(&p, sizeof(int32_t)) == cudaSuccess) {
      core_->pos_dev = static_cast<int32_t*>(p);
    } else {
      cudaGetLastError();
    }
  }
}

CudaStream::~CudaStream() {
  cudaStreamSynchronize(core_->stream);  // the staging buffers may still be read
  const CudaStepStats& t = stats_;
  if (print_stats_ && t.plain_steps + t.graph_steps > 0) {
    const double steps = static_cast<double>(t.plain_steps + t.graph_steps);
    std::fprintf(stderr,
                 "geist: cuda stream: %lld plain steps, %lld graph steps (%lld replays), %lld "
                 "capture failures; per step: %.1f us issue+wait (%.1f us waiting for a graph), "
                 "%.1f us between steps\n",
                 static_cast<long long>(t.plain_steps), static_cast<long long>(t.graph_steps),
                 static_cast<long long>(t.replays), static_cast<long long>(t.capture_failures),
                 t.step_ns / steps / 1e3, t.wait_ns / steps / 1e3, t.gap_ns / steps / 1e3);
  }
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  cudaEventDestroy(staged_);
  if (join_ != nullptr) cudaEventDestroy(join_);
}

void CudaStream::wait_for(Stream& other) {
  StreamCore* o = stream_core(other);
  StreamCore& c = *core_;
  GEIST_CHECK(o != nullptr, "cuda: wait_for a stream of another backend");
  GEIST_CHECK(c.mode == StepMode::PLAIN && !in_step_, "cuda: wait_for inside a forward step");
  if (o == &c) return;
  if (!o->error.is_ok() && c.error.is_ok()) {
    c.error = o->error;  // this stream's next work reads what the failed one left
    return;
  }
  const cudaError_t q = cudaStreamQuery(o->stream);
  if (q == cudaSuccess) return;  // nothing queued there: nothing to wait for
  if (q != cudaErrorNotReady) {
    c.ok(q, "cudaStreamQuery(wait_for)");
    return;
  }
  cudaGetLastError();  // not ready is no failure
  if (join_ == nullptr && !c.ok(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming),
                                "cudaEventCreate(wait_for)")) {
    return;
  }
  if (c.ok(cudaEventRecord(join_, o->stream), "cudaEventRecord(wait_for)")) {
    c.ok(cudaStreamWaitEvent(c.stream, join_, 0), "cudaStreamWaitEvent(wait_for)");
  }
}

void CudaStream::begin_forward(const int32_t* /*tokens*/, int32_t n, int32_t pos, int32_t n_seg) {
  StreamCore& c = *core_;
  step_t0_ = std::chrono::steady_clock::now();
  if (stats_.plain_steps + stats_.graph_steps > 0 && !in_step_) {
    stats_.gap_ns += ns_between(step_t1_, step_t0_);
  }
  c.mode = StepMode::PLAIN;
  c.step_failed = false;
  c.step_pos = pos;
  logits_dst_ = nullptr;
  logits_src_ = nullptr;
  argmax_dst_ = nullptr;
  step_n_ = n;
  in_step_ = true;
  // One-token steps, and batched decode steps of n sessions (n_seg == n) once a plain step of
  // n rows has sized the buffers and the step before this one had n rows too (a steady batch:
  // a batch whose members change is captured anew, which costs more than it saves).
  batch_step_ = n > 1 && n == n_seg && n <= kMaxGraphRows;
  const bool warm = n == 1 ? warm_
                           : batch_step_ && batch_graphs_ &&
                                 warm_rows_.test(static_cast<size_t>(n)) && last_n_ == n;
  if (!graphs_ || !warm || retry_plain_ || !c.error.is_ok()) return;
  // The staging buffers are rewritten by this step: the last step's copies must be done.
  if (!c.ok(cudaEventSynchronize(staged_), "cudaEventSynchronize(staging)")) return;
  if (c.pos_dev != nullptr) *static_cast<int32_t*>(step_host_.get()) = pos;
  if (exec_ != nullptr && exec_gen_ != buffers_gen()) {
    // A buffer the graph copies to or from was allocated anew since its capture (a prefill
    // grew it): the graph is instantiated afresh rather than replayed or updated.
    cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
    exec_generic_ = false;
  }
  if (exec_ != nullptr && exec_generic_ && !recapture_) {
    c.mode = StepMode::REPLAY;
    c.cursor = 0;
    c.mismatch = false;
    return;
  }
  if (cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    graphs_ = false;  // capture is not possible here: plain launches from now on
    return;
  }
  c.mode = StepMode::CAPTURE;
  c.record.clear();
  c.absolute = false;
  if (c.pos_dev != nullptr) {
    c.ok(cudaMemcpyAsync(c.pos_dev, step_host_.get(), sizeof(int32_t), cudaMemcpyHostToDevice,
                         c.stream),
         "cudaMemcpyAsync(step position)");
  }
}

bool CudaStream::end_forward() {
  const bool ran = end_forward_step();
  step_t1_ = std::chrono::steady_clock::now();
  stats_.step_ns += ns_between(step_t0_, step_t1_);
  return ran;
}

bool CudaStream::end_forward_step() {
  StreamCore& c = *core_;
  in_step_ = false;
  if (c.mode == StepMode::PLAIN) {
    ++stats_.plain_steps;
    if (step_n_ == 1 && c.error.is_ok()) warm_ = true;
    if (batch_step_ && c.error.is_ok()) warm_rows_.set(static_cast<size_t>(step_n_));
    retry_plain_ = false;
    last_n_ = step_n_;
    return true;
  }
  if (c.mode == StepMode::REPLAY) {
    c.mode = StepMode::PLAIN;
    if (c.mismatch || c.step_failed || c.cursor != c.record.size()) {
      recapture_ = true;  // nothing ran: the caller issues the step again, captured
      return false;
    }
    ++stats_.replays;
    last_n_ = step_n_;
    launch_graph();
    return true;
  }
  c.mode = StepMode::PLAIN;
  cudaGraph_t g = nullptr;
  const cudaError_t e = cudaStreamEndCapture(c.stream, &g);
  bool good = e == cudaSuccess && g != nullptr && !c.step_failed && instantiate(g);
  if (g != nullptr) cudaGraphDestroy(g);
  recapture_ = false;
  if (!good) {
    cudaGetLastError();  // capture failures are not errors of the session
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
    exec_generic_ = false;
    ++stats_.capture_failures;
    if (batch_step_) {  // batched steps may run plainly from now on; one-token steps still try
      if (++batch_failures_ >= kMaxCaptureFailures) batch_graphs_ = false;
    } else if (++single_failures_ >= kMaxCaptureFailures) {
      graphs_ = false;
      std::fprintf(stderr, "geist: cuda: decode steps of this session run without graphs\n");
    }
    retry_plain_ = true;  // nothing ran: the caller issues the step again, plainly
    return false;
  }
  exec_generic_ = !c.absolute && c.pos_dev != nullptr;
  // A batched step whose launches bake positions in (a KIVI or q4 cache among its sessions)
  // would be captured anew at every step, thousands of launches each time: plain from now on.
  if (batch_step_ && !exec_generic_) batch_graphs_ = false;
  exec_gen_ = buffers_gen();
  last_n_ = step_n_;
  launch_graph();
  return true;
}

uint64_t CudaStream::buffers_gen() const {
  return ids_.gen() + y_tmp_.gen() + dn_scratch_.gen() + dn_count_.gen() + ids_host_.gen() +
         logits_host_.gen() + act_q8_.gen() + argmax_.gen() + argmax_count_.gen() +
         argmax_host_.gen();
}

void CudaStream::launch_graph() {
  StreamCore& c = *core_;
  ++stats_.graph_steps;
  bool ran = c.ok(cudaGraphLaunch(exec_, c.stream), "cudaGraphLaunch") &&
             c.ok(cudaEventRecord(staged_, c.stream), "cudaEventRecord(staging)");
  if (logits_src_ != nullptr) {  // a batched step's rows: straight to the caller's memory
    ran = ran && c.ok(cudaMemcpy2DAsync(
                          logits_dst_, static_cast<size_t>(logits_stride_) * sizeof(float),
                          logits_src_, logits_row_bytes_, logits_row_bytes_,
                          static_cast<size_t>(logits_rows_), cudaMemcpyDeviceToHost, c.stream),
                      "cudaMemcpy2DAsync(logits to host)");
  }
  if (logits_dst_ != nullptr || argmax_dst_ != nullptr) {
    const auto t0 = std::chrono::steady_clock::now();
    ran = ran && c.ok(cudaStreamSynchronize(c.stream), "cudaStreamSynchronize(logits)");
    stats_.wait_ns += ns_between(t0, std::chrono::steady_clock::now());
    copy_logits_out(ran);
  }
}

bool CudaStream::instantiate(cudaGraph_t g) {
  size_t nodes = 0;
  if (cudaGraphGetNodes(g, nullptr, &nodes) != cudaSuccess) {
    cudaGetLastError();
    nodes = 0;
  }
  if (exec_ != nullptr) {
    cudaGraphExecUpdateResultInfo info{};
    if (nodes != 0 && nodes == exec_nodes_ && cudaGraphExecUpdate(exec_, g, &info) == cudaSuccess) {
      return true;
    }
    cudaGetLastError();
    cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
  }
  if (cudaGraphInstantiate(&exec_, g, 0) != cudaSuccess) {
    cudaGetLastError();
    exec_ = nullptr;
    return false;
  }
  exec_nodes_ = nodes;
  return true;
}

void CudaStream::copy_logits_out(bool good) {
  if (argmax_dst_ != nullptr) {
    const size_t bytes = static_cast<size_t>(argmax_rows_) * sizeof(int32_t);
    if (good) {
      std::memcpy(argmax_dst_, argmax_host_.get(), bytes);
    } else {
      std::memset(argmax_dst_, 0, bytes);
    }
    argmax_dst_ = nullptr;
  }
  if (logits_dst_ == nullptr) return;
  if (logits_src_ != nullptr) {  // copied straight out (launch_graph): only a failure to mark
    for (int32_t t = 0; !good && t < logits_rows_; ++t) {
      std::memset(logits_dst_ + static_cast<int64_t>(t) * logits_stride_, 0xFF, logits_row_bytes_);
    }
    logits_dst_ = nullptr;
    logits_src_ = nullptr;
    return;
  }
  for (int32_t t = 0; t < logits_rows_; ++t) {
    float* dst = logits_dst_ + static_cast<int64_t>(t) * logits_stride_;
    if (good) {
      std::memcpy(dst, static_cast<const uint8_t*>(logits_host_.get()) + t * logits_row_bytes_,
                  logits_row_bytes_);
    } else {
      std::memset(dst, 0xFF, logits_row_bytes_);
    }
  }
  logits_dst_ = nullptr;
}

}  // namespace geist::cuda
