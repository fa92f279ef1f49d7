// The CUDA backend's Stream (CudaStream) and the device / pinned buffers it owns: shared by
// cuda_stream.cpp (the ops, the stream's creation) and cuda_stream_graph.cpp (decode steps as
// CUDA graphs). Internal to src/backends/cuda.
#pragma once

#include <cuda_runtime.h>

#include <bitset>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_stream.h"

namespace geist::cuda {

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
// queued ops may still read the old allocation; it cannot happen while a step is captured
// (the capture then fails and the step runs plainly, growing it).
class Scratch {
 public:
  ~Scratch() {
    if (p_ != nullptr) cudaFree(p_);
  }
  // zero: a new allocation is zero-filled (in stream order) before it is returned.
  void* get(StreamCore& core, size_t bytes, const char* what, bool zero = false) {
    if (bytes <= cap_ && p_ != nullptr) return p_;
    if (!core.plain_only()) return nullptr;
    if (!core.ok(cudaStreamSynchronize(core.stream), what)) return nullptr;
    if (p_ != nullptr) cudaFree(p_);
    p_ = nullptr;
    cap_ = 0;
    const size_t want = bytes + bytes / 2 + 256;  // headroom: fewer regrowths
    void* p = nullptr;
    if (!core.ok(cudaMalloc(&p, want), what)) return nullptr;
    if (zero && !core.ok(cudaMemsetAsync(p, 0, want, core.stream), what)) {
      cudaFree(p);
      return nullptr;
    }
    p_ = p;
    cap_ = want;
    ++gen_;
    return p_;
  }
  // Allocations made so far (a graph made before the last one must not run again).
  uint64_t gen() const { return gen_; }

 private:
  void* p_ = nullptr;  // device bytes [cap_]
  size_t cap_ = 0;
  uint64_t gen_ = 0;
};

// Page-locked host memory that only grows: the staging of token ids and logits, so their
// copies are true asynchronous DMA (and can be nodes of a graph). The caller makes sure no
// queued copy still uses it before it grows or is rewritten.
class Pinned {
 public:
  ~Pinned() {
    if (p_ != nullptr) cudaFreeHost(p_);
  }
  // False (and nothing allocated) when page-locked memory is not available.
  bool reserve(size_t bytes) {
    if (bytes <= cap_ && p_ != nullptr) return true;
    if (p_ != nullptr) cudaFreeHost(p_);
    p_ = nullptr;
    cap_ = 0;
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) {
      cudaGetLastError();  // not sticky; callers fall back to pageable copies
      return false;
    }
    p_ = p;
    cap_ = bytes;
    ++gen_;
    return true;
  }
  bool has(size_t bytes) const { return p_ != nullptr && bytes <= cap_; }
  void* get() const { return p_; }
  // Allocations made so far: a graph's copy node must not outlive the allocation it was made
  // with, even when a new one lands at the same address.
  uint64_t gen() const { return gen_; }

 private:
  void* p_ = nullptr;  // host bytes [cap_]
  size_t cap_ = 0;
  uint64_t gen_ = 0;
};

// Rows of the largest batched decode step (sessions of one forward_batch) recorded as a graph.
constexpr int32_t kMaxGraphRows = 128;

// Decode steps (forwards of one token) run as CUDA graphs, so the device executes the ~20
// kernels per layer back to back instead of waiting for the host to launch each. Capture
// once, replay many: a step is captured (with exactly the launches and arguments a plain
// step makes, positions read from StreamCore::pos_dev) while each op notes its arguments
// into the step record; a later step whose ops note the same words (only the position and
// the token differ) launches nothing while it is issued and replays the graph, after one
// 4-byte copy of its position into the graph's pinned source. A step whose ops differ (a
// scratch buffer regrown, another KV layout) is captured again (cudaGraphExecUpdate keeps
// the instance when only arguments changed). Being the same kernels with the same
// arguments, a graph step is bitwise a plain one. The first one-token step after the stream
// is created runs plainly, sizing the scratch and staging buffers that a capture cannot
// allocate. Batched decode steps (ArchModel::forward_batch with one row per session) are
// recorded the same way once they are steady: a plain step of their row count has sized the
// buffers and the step before had as many rows; their logits rows are copied straight out
// after the graph.
class CudaStream final : public Stream {
 public:
  CudaStream(std::shared_ptr<StreamCore> core, cudaEvent_t staged, bool graphs, bool fuse);
  ~CudaStream() override;

  StreamCore& core() { return *core_; }
  const CudaStepStats& stats() const { return stats_; }
  void set_print_stats(bool on) { print_stats_ = on; }

  void set_pool(ThreadPool*) override {}
  Status status() const override { return core_->error; }

  // Batched decode steps of up to kMaxGraphRows sessions are recorded too (n_seg == n).
  void begin_forward(const int32_t* /*tokens*/, int32_t n, int32_t pos, int32_t n_seg = 1) override;

  bool end_forward() override;
  // An event recorded on other's stream and waited for on this one (none when other is idle).
  void wait_for(Stream& other) override;

  Status alloc(size_t nbytes, std::unique_ptr<Buffer>* out) override;
  void upload(void* device_dst, const void* host_src, size_t n) override;
  void download(void* host_dst, const void* device_src, size_t n) override;
  void fill_zero(void* device_dst, size_t n) override;
  Status create_kv(KvMode mode, const std::vector<KvLayerSpec>& layers, int32_t max_seq_len,
                   std::unique_ptr<KvStore>* out) override;

  // The ids go through page-locked staging with an asynchronous copy: no wait for the device
  // (except for the previous step's copy out of the same staging, long done by then). A
  // replayed step only writes its ids into the staging that the graph's copy reads.
  void get_rows(const WeightMatrix& w, const int32_t* ids, int32_t n, float* out) override;
  // cuda::matmul with the stream's activation scratch (Q8_0 / Q4_0 prefill codes), grown here
  // outside a capture (inside one the capture fails and the step runs plainly).
  cudaError_t matmul_ws(const WeightMatrix& w, const float* x, int64_t x_stride, int32_t n_tok,
                        float* y, int64_t y_stride);
  void matmul(const WeightMatrix& w, const float* x, int64_t x_stride, int32_t n_tok, float* y,
              int64_t y_stride) override;
  // One-token steps go through page-locked staging (a graph can copy only there); longer
  // ones copy straight into host_y.
  void matmul_to_host(const WeightMatrix& w, const float* x, int64_t x_stride, int32_t n_tok,
                      float* host_y, int64_t y_stride) override;
  // The rows into y_tmp_, cuda::argmax_first of each there, and 4 bytes a row out (through
  // argmax_host_).
  void matmul_argmax_to_host(const WeightMatrix& w, const float* x, int32_t n_tok, float* host_y,
                             int32_t* host_ids) override;
  void rms_norm(const float* x, int64_t x_stride, const float* w, float* y, int64_t y_stride,
                int32_t n_rows, int64_t n, float eps) override;
  void rope(float* x, int64_t x_stride, int32_t n_tok, int32_t n_head, int32_t head_dim,
            int32_t pos0, const RopeParams& p) override;
  void add(float* y, const float* x, int64_t n) override;
  // The fused ops (cuda_stream_named.cpp): inside a forward step with the fusions on, where the
  // operands fit the fused kernel, its one launch; otherwise the plain ops (Stream's default).
  // cuda::add_rms_norm.
  void add_rms_norm(float* y, const float* x, const float* w, float* out, int64_t out_stride,
                    int32_t n_rows, int64_t n, float eps) override;
  // Decode matmuls (Q8_0 / Q4_0, up to 8 tokens) in launches of up to kMaxMatmulBatch
  // (cuda::matmul_batch: fewer launches, small projections share the device), 8-bit prefill
  // ones of one type sharing one quantization of x (cuda::matmul_prefill_batch); others alone.
  void matmul_many(const MatmulDst* outs, int32_t n, const float* x, int64_t x_stride,
                   int32_t n_tok) override;
  // One token: cuda::matmul_swiglu; an 8-bit prefill: cuda::matmul_prefill_swiglu.
  void matmul_swiglu(const WeightMatrix& gate_w, const WeightMatrix& up_w, const float* x,
                     int64_t x_stride, int32_t n_tok, float* gate, float* up, float* out) override;
  void swiglu(const float* gate, const float* up, float* out, int64_t n) override;
  void sigmoid_mul(float* x, int64_t x_stride, const float* gate, int64_t gate_stride,
                   int32_t n_rows, int64_t n) override;
  // cuda_stream_fused.cpp: the head norms taken into the rope (cuda::rope with a norm in front)
  // where they fit, q's and k's rope as one launch, which a plain (F32 / F16) cache takes into
  // its write of the rows (cuda::rope_kv, decode steps) or, for one token, into the attention
  // too (cuda::kv_attention_rope); each piece the separate launches where it does not fit.
  void rope_attend(KvStore& kv, int32_t il, const AttentionShape& s, const RopeParams& p,
                   const HeadNorms* norms, float* q, int64_t q_stride, float* k, int64_t k_stride,
                   const float* v, int64_t v_stride, int32_t n_tok, int32_t pos, float* out,
                   int64_t out_stride) override;
  // A batched decode step's rows of plain (F32 / F16) caches of this backend as one launch per
  // 64 rows (cuda::kv_attention_rope_rows, cuda_stream_rows.cpp): each row's rope, K / V rows
  // and attention, with the arguments its own attend would take. Other rows (another KV mode,
  // two rows of one cache, the fusions off) take the per-row calls.
  void rope_attend_rows(int32_t il, const AttentionShape& s, const RopeParams& p,
                        KvStore* const* kv, const int32_t* pos, int32_t n_rows, float* q,
                        int64_t q_stride, float* k, int64_t k_stride, const float* v,
                        int64_t v_stride, float* out, int64_t out_stride) override;

  // The DeltaNet launchers (deltanet_cuda.h) leave a launch failure pending in CUDA's error
  // state; it is collected right after each call.
  void deltanet_gates(float* beta, float* g, int32_t n_tok, int32_t n_heads, const float* a,
                      const float* dt_bias) override;
  void conv1d_silu(const float* x, int64_t x_stride, int32_t n_tok, int64_t n_ch, const float* w,
                   int32_t kernel, float* state, float* out, int64_t out_stride) override;
  void l2_norm_heads(float* x, int64_t x_stride, int32_t n_tok, int32_t n_heads, int32_t d,
                     float eps, float scale) override;
  void gated_delta_rule(const GatedDeltaArgs& a, int32_t chunk) override;
  // A batched decode step's rows in launches of up to kDeltaRowsPerLaunch rows
  // (cuda_stream_rows.cpp); without the fusions (GEIST_CUDA_FUSE=0) the per-row calls.
  void conv1d_silu_rows(const float* x, int64_t x_stride, int32_t n_rows, int64_t n_ch,
                        const float* w, int32_t kernel, float* const* states, float* out,
                        int64_t out_stride) override;
  void gated_delta_rule_rows(const GatedDeltaArgs& a, int32_t n_rows, float* const* states,
                             int32_t chunk) override;
  void rms_norm_gated(const float* x, const float* z, const float* w, int32_t n_rows, int32_t d,
                      float eps, float* out) override;
  // cuda::l2_norm_heads2 (both in one launch).
  void l2_norm_heads_pair(float* q, float q_scale, float* k, float k_scale, int64_t x_stride,
                          int32_t n_tok, int32_t n_heads, int32_t d, float eps) override;
  // One token: cuda::deltanet_prep (gates, conv, state advance and the l2 norms in one launch);
  // longer segments: the gates, the conv, then l2_norm_heads_pair.
  void deltanet_prep(const DeltaNetPrepArgs& p) override;
  // One token: cuda::gated_delta_rule_norm (the gated norm in the delta rule's launch).
  void gated_delta_rule_norm(const GatedDeltaArgs& a, int32_t chunk, const float* z, const float* w,
                             float eps) override;

 private:
  uint64_t buffers_gen() const;
  bool end_forward_step();  // end_forward but its timing
  // Runs the step's graph (exec_), then copies the staged logits out if the step has any.
  void launch_graph();
  // Makes exec_ run graph g: updates the parameters of the existing instance when the
  // topology is unchanged (the usual case: a buffer moved, or a position argument of an
  // absolute capture), else instantiates anew.
  // A graph with another node count (a KIVI group filling adds a kernel) cannot be an update
  // of exec_: it is instantiated directly rather than through a failing update.
  bool instantiate(cudaGraph_t g);
  // matmul_many's launches (cuda_stream_named.cpp), outs in the groups that share a launch.
  void launch_matmuls(const MatmulDst* outs, int32_t n, const float* x, int64_t x_stride,
                      int32_t n_tok);
  // l2_norm_heads_pair's launches: one where the two fit cuda::l2_norm_heads2, else two.
  void launch_l2_pair(float* q, float q_scale, float* k, float k_scale, int64_t x_stride,
                      int32_t n_tok, int32_t n_heads, int32_t d, float eps);
  // Whether outs[0, n) (n <= kMaxMatmulBatch) make one group of launch_matmuls.
  bool one_matmul_group(const MatmulDst* outs, int32_t n, const float* x, int64_t x_stride,
                        int32_t n_tok) const;
  // Copies the staged logits rows (0xFF bytes when !good) and the staged greedy id (0 when
  // !good) to their host destinations.
  void copy_logits_out(bool good);
  // rope_attend_rows as one launch per 64 rows; false (nothing issued) where the rows do not
  // fit it.
  bool rope_attend_rows_fused(int32_t il, const AttentionShape& s, const RopeParams& p,
                              KvStore* const* kv, const int32_t* pos, int32_t n_rows, float* q,
                              int64_t q_stride, float* k, int64_t k_stride, const float* v,
                              int64_t v_stride, float* out, int64_t out_stride);

  std::shared_ptr<StreamCore> core_;
  cudaEvent_t staged_;          // recorded after the last copy out of the staging buffers
  cudaEvent_t join_ = nullptr;  // wait_for's event, made at its first use
  bool graphs_;                 // decode steps may run as graphs
  bool fuse_;                   // the fused ops may make their fused launches
  Scratch ids_;                 // int32 [n] token ids of get_rows
  Scratch y_tmp_;               // float [n_tok][n_out] of matmul_to_host
  Scratch dn_scratch_;          // gated_delta_rule's device scratch
  Scratch dn_count_;      // unsigned [n_v_heads] gated_delta_rule_norm's counters, zero at rest
  Scratch act_q8_;        // int8 activation codes of Q8_0 / Q4_0 prefill matmuls (matmul_ws)
  Pinned ids_host_;       // int32 [n] staged token ids
  Pinned logits_host_;    // float [1][n_out] staged logits of a one-token step
  Scratch argmax_;        // cuda::argmax_first's parts [rows][kArgmaxParts] and ids [rows]
  Scratch argmax_count_;  // and its counters [rows], zero at rest
  Pinned argmax_host_;    // int32 [rows] the staged greedy ids of a step
  Pinned step_host_;      // int32 [1] the graph step's position, copied to core_->pos_dev

  cudaGraphExec_t exec_ = nullptr;  // the decode step's graph
  bool exec_generic_ = false;       // exec_ reads positions from pos_dev: it may be replayed
  uint64_t exec_gen_ = 0;           // buffers_gen() when exec_ was captured
  size_t exec_nodes_ = 0;           // nodes of the graph exec_ was instantiated from
  bool recapture_ = false;          // the last replay did not match: the repeat is captured
  int32_t step_n_ = 0;              // tokens of the current step
  int32_t last_n_ = 0;              // tokens of the last step that ran
  bool batch_step_ = false;         // the current step is a batched decode step (n_seg == n > 1)
  bool batch_graphs_ = true;        // batched decode steps may run as graphs
  std::bitset<kMaxGraphRows + 1> warm_rows_;  // [n]: a plain batched step of n rows has run
  int single_failures_ = 0;                   // failed captures of one-token steps
  int batch_failures_ = 0;                    // failed captures of batched decode steps
  bool in_step_ = false;                      // between begin_forward and end_forward
  bool warm_ = false;                         // a plain one-token step has sized the buffers
  bool retry_plain_ = false;                  // the last capture failed: the repeat runs plainly
  CudaStepStats stats_;
  bool print_stats_ = false;  // GEIST_CUDA_STATS=1: stats_ to stderr at destruction
  std::chrono::steady_clock::time_point step_t0_{}, step_t1_{};  // the last begin / end
  float* logits_dst_ = nullptr;        // host rows of the step's logits (copied at the end)
  const float* logits_src_ = nullptr;  // a graph step's device rows copied straight to logits_dst_
  int64_t logits_stride_ = 0;          // floats between rows of logits_dst_
  int32_t logits_rows_ = 0;
  size_t logits_row_bytes_ = 0;
  int32_t* argmax_dst_ = nullptr;   // host ints of the step's greedy ids (copied at the end)
  int32_t argmax_rows_ = 0;         // how many
  std::vector<RopeRow> rope_rows_;  // [n_rows] rope_attend_rows's rows (host scratch)
};

}  // namespace geist::cuda
