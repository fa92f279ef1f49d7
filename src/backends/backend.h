// Backends: where a model's weights and a session's state live and where the kernels run.
//
// An architecture's forward pass (src/archs) is one flat sequence of calls on a Stream; the
// backend behind it decides whether those calls run the CPU kernels (src/kernels) on host
// memory or CUDA kernels on device memory. Every pointer an op takes or returns is an address
// in the backend's own memory ("device address"): the architecture code passes them along and
// never dereferences them. The only ways between host memory and device memory are
// Backend::upload_weight (at model load), Stream::upload / Stream::download (state regions for
// snapshots, token ids, logits) — the path the snapshot code uses, so an image taken on one
// backend restores on another.
//
// Backends:
//   CPU               host memory, the kernels of src/kernels on the session's thread pool.
//   CPU_DEVICE_LOCAL  the CPU backend with state buffers the engine cannot address: they are
//                     mapped PROT_NONE except while the stream runs ops or copies through
//                     upload/download, so any access outside that path faults. It exists to
//                     exercise the device-buffer snapshot path in every CI run (no GPU there).
//   CUDA              src/backends/cuda (built when nvcc is found, -DGEIST_CUDA); one NVIDIA GPU.
//
// Determinism: every op computes each output element by a fixed sequence of operations that
// depends only on its inputs and sizes (no atomics in reductions), so a stream's results do
// not depend on batching or timing; within one backend a restored session continues bitwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/deltanet.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kv/kv_cache.h"

namespace geist {

// Values match the public geist_backend (AUTO is resolved before a backend is made).
enum class BackendKind : int32_t {
  AUTO = 0,
  CPU = 1,
  CUDA = 2,
  CPU_DEVICE_LOCAL = 3,
};
// "auto", "cpu", "cuda", "cpu-devlocal".
const char* backend_kind_name(BackendKind k);
bool backend_kind_from_name(const char* name, BackendKind* out);

class Stream;

// One matmul of Stream::matmul_many: its weights and where its rows go.
struct MatmulDst {
  const WeightMatrix* w;
  float* y;  // [n_tok][y_stride]
  int64_t y_stride;
};

// A block of backend memory. data() is a device address (host memory for the CPU backends).
class Buffer {
 public:
  virtual ~Buffer() = default;
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  float* f32() const { return reinterpret_cast<float*>(data_); }

 protected:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// A session's KV cache on a backend: the same regions and byte layout as KvCache
// (src/kv/kv_cache.h) in every backend, so images move between backends.
class KvStore {
 public:
  virtual ~KvStore() = default;
  virtual KvMode mode() const = 0;
  virtual int32_t max_seq_len() const = 0;
  // KvCache::attend, with q, k, v and out device addresses.
  virtual void attend(int32_t il, const AttentionShape& s, const float* q, int64_t q_stride,
                      int32_t n, int32_t pos, const float* k, int64_t k_stride, const float* v,
                      int64_t v_stride, float* out, int64_t out_stride) = 0;
  // The same as an op of stream `on` (of this store's backend): the forward's stream, which in
  // a batched forward is the lead state's rather than the one that created the store. A device
  // store enqueues there, ordered with the ops around it; the CPU stores compute at once on
  // their own stream's pool, so the default ignores `on`.
  virtual void attend_on(Stream& on, int32_t il, const AttentionShape& s, const float* q,
                         int64_t q_stride, int32_t n, int32_t pos, const float* k, int64_t k_stride,
                         const float* v, int64_t v_stride, float* out, int64_t out_stride) {
    (void)on;
    attend(il, s, q, q_stride, n, pos, k, k_stride, v, v_stride, out, out_stride);
  }
  virtual bool can_resume_at(int32_t pos) const = 0;
  virtual int64_t bytes_per_token() const = 0;
  virtual void regions(int32_t n_pos, std::vector<KvRegion>* out) const = 0;
  // Copies a region between the store and host memory (KvCache::read_region / write_region).
  virtual void download_region(const KvRegion& r, int32_t n_pos, uint8_t* host_dst) const = 0;
  virtual void upload_region(const KvRegion& r, int32_t n_pos, const uint8_t* host_src) = 0;
};

// One segment's DeltaNet prologue (Stream::deltanet_prep): the gates (optional), the causal
// conv with SiLU, the l2 norms of q and k (the conv output's first two runs of l2_heads * d).
struct DeltaNetPrepArgs {
  int32_t n_tok = 0;
  // deltanet_gates(beta, g, n_tok, gate_heads, a, dt_bias) first; beta nullptr: no gates.
  float* beta = nullptr;  // [n_tok][gate_heads]
  float* g = nullptr;     // [n_tok][gate_heads]
  int32_t gate_heads = 0;
  const float* a = nullptr;
  const float* dt_bias = nullptr;
  // conv1d_silu(x, x_stride, n_tok, n_ch, w, kernel, state, out, out_stride)
  const float* x = nullptr;  // [n_tok][x_stride]
  int64_t x_stride = 0;
  int64_t n_ch = 0;
  const float* w = nullptr;  // [n_ch][kernel]
  int32_t kernel = 0;
  float* state = nullptr;  // [kernel - 1][n_ch]
  float* out = nullptr;    // [n_tok][out_stride]
  int64_t out_stride = 0;
  // l2 norms of q (at out, scaled by q_scale) and k (at out + l2_heads * d, unscaled).
  int32_t l2_heads = 0, d = 0;
  float eps = 0, q_scale = 1;
};

// Per-head rms_norms in front of Stream::rope_attend (Qwen3.5's q and k norms): head h of token
// t of q is rms_norm'd from q_src + (t * n_head + h) * q_src_stride (weights q_w), likewise k.
struct HeadNorms {
  const float* q_src = nullptr;
  int64_t q_src_stride = 0;
  const float* q_w = nullptr;  // [head_dim]
  const float* k_src = nullptr;
  int64_t k_src_stride = 0;
  const float* k_w = nullptr;  // [head_dim]
  float eps = 0;
};

// Per-session execution context: scratch, the CUDA stream, the thread pool of the current
// call. Not thread-safe; one per ArchState. Ops are asynchronous on devices and ordered;
// download() waits for the ops before it.
class Stream {
 public:
  virtual ~Stream() = default;
  // The pool CPU ops run on until the next call (CUDA ignores it). Set at each forward.
  virtual void set_pool(ThreadPool* pool) = 0;
  // The first failure of the stream's work, or ok. Ops and copies return nothing; a device
  // backend records a failure where it surfaces (an enqueue, or the synchronisation in
  // download() / upload(), where a kernel's fault shows) and keeps it: a stream whose device
  // failed stays failed, and its state and downloads are garbage (a failed download fills its
  // destination with 0xFF). Callers check it before they trust what a stream produced.
  virtual Status status() const { return Status::ok(); }
  // Opens / closes a span in which ops may touch state buffers (CPU_DEVICE_LOCAL maps them
  // readable inside the span only). Nested calls are counted. Use StreamScope.
  virtual void begin() {}
  virtual void end() {}
  // Bracket the ops of one forward step of n tokens at positions [pos, pos + n) (tokens are
  // host ids, the ones the step's get_rows will name). A device backend may record a step's
  // ops once and replay the recording for later steps of the same shape (CUDA graphs for
  // decode); the ops must then be issued in the same order with the same arguments at every
  // step of that shape, except the token ids and the positions. end_forward() returns false
  // when the backend ran none of the step's ops (a recording could not be made or did not
  // match): the caller issues the same step again, which then runs plainly. Use:
  //   do { s.begin_forward(tokens, n, pos); ...ops... } while (!s.end_forward());
  // A batched forward (ArchModel::forward_batch) passes its n_seg segments' n rows packed, pos
  // the smallest of its segments' positions; n_seg == n: every row is one session's one-token
  // step (a batched decode step, which a device may record like a one-token step, its
  // segments' positions relative to pos).
  virtual void begin_forward(const int32_t* /*tokens*/, int32_t /*n*/, int32_t /*pos*/,
                             int32_t /*n_seg*/ = 1) {}
  virtual bool end_forward() { return true; }
  // Orders this stream's later work after everything issued on `other` (a stream of the same
  // backend) so far: a batched forward runs every session's ops on its lead's stream, which
  // first waits for each session's own stream, and each session's stream then waits for the
  // lead. A stream that waits for a failed one takes over its failure (what it computes next
  // depends on that work). Not inside a forward step. Synchronous backends: nothing to do.
  virtual void wait_for(Stream& /*other*/) {}

  // ---- memory ----
  // Zero-filled state or scratch memory. GEIST_E_OOM on failure.
  virtual Status alloc(size_t nbytes, std::unique_ptr<Buffer>* out) = 0;
  virtual void upload(void* device_dst, const void* host_src, size_t n) = 0;
  virtual void download(void* host_dst, const void* device_src, size_t n) = 0;
  // A batch of uploads (a restore's state regions; use UploadBatch): between begin_uploads()
  // and end_uploads(), upload() and KvStore::upload_region may record their copies instead of
  // making them; end_uploads() makes the recorded ones, on `pool` where the backend copies with
  // host threads (the CPU backends: base/parallel_copy.h; pool nullptr: on the calling thread).
  // The host sources must stay valid until end_uploads(). Nothing between the two may read the
  // state. Devices copy as they are asked (their copies are ordered on the stream already).
  virtual void begin_uploads() {}
  virtual void end_uploads(ThreadPool* /*pool*/) {}
  virtual void fill_zero(void* device_dst, size_t n) = 0;
  // The session's KV cache (GEIST_E_UNSUPPORTED for a mode this backend cannot hold).
  virtual Status create_kv(KvMode mode, const std::vector<KvLayerSpec>& layers, int32_t max_seq_len,
                           std::unique_ptr<KvStore>* out) = 0;

  // ---- ops; every pointer is a device address, shapes as in the named CPU kernel ----
  // out[t][0, w.n_in) = row ids[t] of w. ids are HOST ints (< w.n_out, checked by the caller).
  virtual void get_rows(const WeightMatrix& w, const int32_t* ids, int32_t n, float* out) = 0;
  // kernels/matmul.h matmul(); w.data is a device address (Backend::upload_weight).
  virtual void matmul(const WeightMatrix& w, const float* x, int64_t x_stride, int32_t n_tok,
                      float* y, int64_t y_stride) = 0;
  // The same, y in HOST memory (logits).
  virtual void matmul_to_host(const WeightMatrix& w, const float* x, int64_t x_stride,
                              int32_t n_tok, float* host_y, int64_t y_stride) = 0;
  // matmul_to_host() of n_tok rows (x rows contiguous, stride w.n_in) wanted only for their
  // greedy choices: host_ids[t] = argmax_first(row t) (kernels/ops.h), valid when the rows
  // would be. host_y is [n_tok][w.n_out] host scratch, which a device backend leaves
  // unwritten: it picks the ids where the rows are and copies out 4 bytes a row instead of the
  // rows. The default goes through host_y.
  virtual void matmul_argmax_to_host(const WeightMatrix& w, const float* x, int32_t n_tok,
                                     float* host_y, int32_t* host_ids);
  // rms_norm() of n_rows rows of n floats: row r at x + r * x_stride -> y + r * y_stride
  // (x and y may alias). w: [n] device floats or nullptr.
  virtual void rms_norm(const float* x, int64_t x_stride, const float* w, float* y,
                        int64_t y_stride, int32_t n_rows, int64_t n, float eps) = 0;
  // rope() for n_tok tokens: token t's heads at x + t * x_stride, position pos0 + t.
  // p.freq_factors is a device address (or nullptr).
  virtual void rope(float* x, int64_t x_stride, int32_t n_tok, int32_t n_head, int32_t head_dim,
                    int32_t pos0, const RopeParams& p) = 0;
  // y[i] += x[i], i < n.
  virtual void add(float* y, const float* x, int64_t n) = 0;
  // out[i] = silu(gate[i]) * up[i] (swiglu()); out may alias gate.
  virtual void swiglu(const float* gate, const float* up, float* out, int64_t n) = 0;
  // x[r][d] *= sigmoid(gate[r][d]) for r < n_rows, d < n (rows at r * x_stride / gate_stride).
  virtual void sigmoid_mul(float* x, int64_t x_stride, const float* gate, int64_t gate_stride,
                           int32_t n_rows, int64_t n) = 0;
  // ---- fused ops (stream_fused.cpp) ----
  // Each is the sequence of plain ops its comment names, in that order, and the default runs
  // exactly those calls (so the CPU streams compute the same bits either way); a device backend
  // may run it as fewer launches with the same bits (CUDA: docs/ARCHITECTURE.md names the kernel
  // of each). An architecture calls the fused op where its forward has that sequence.
  //
  // add(y, x, n_rows * n), then rms_norm(y, n, w, out, out_stride, n_rows, n, eps): the residual
  // add and the norm after it (out may be x).
  virtual void add_rms_norm(float* y, const float* x, const float* w, float* out,
                            int64_t out_stride, int32_t n_rows, int64_t n, float eps);
  // matmul(*outs[i].w, x, x_stride, n_tok, outs[i].y, outs[i].y_stride) for i < n, in order:
  // the projections of one activation (no y may overlap x).
  virtual void matmul_many(const MatmulDst* outs, int32_t n, const float* x, int64_t x_stride,
                           int32_t n_tok);
  // matmul(gate_w, x, x_stride, n_tok, gate, gate_w.n_out), matmul(up_w, x, x_stride, n_tok, up,
  // up_w.n_out), then swiglu(gate, up, out, n_tok * gate_w.n_out): a feed-forward's gate / up
  // projections and their activation (out may be gate or up).
  virtual void matmul_swiglu(const WeightMatrix& gate_w, const WeightMatrix& up_w, const float* x,
                             int64_t x_stride, int32_t n_tok, float* gate, float* up, float* out);
  // One segment's attention: with norms, rms_norm(q_src, q_src_stride, q_w, q, head_dim, n_tok *
  // s.n_head, head_dim, eps) and the same of k (q and k rows contiguous: q_stride == s.n_head *
  // head_dim, k_stride == s.n_head_kv * head_dim); then rope(q, q_stride, n_tok, s.n_head,
  // s.head_dim_k, pos, p), rope(k, k_stride, n_tok, s.n_head_kv, s.head_dim_k, pos, p) and
  // kv.attend_on(*this, il, s, q, q_stride, n_tok, pos, k, k_stride, v, v_stride, out,
  // out_stride) (a fused op).
  virtual void rope_attend(KvStore& kv, int32_t il, const AttentionShape& s, const RopeParams& p,
                           const HeadNorms* norms, float* q, int64_t q_stride, float* k,
                           int64_t k_stride, const float* v, int64_t v_stride, int32_t n_tok,
                           int32_t pos, float* out, int64_t out_stride);
  // The attention of a batched decode step's rows (one token of each of n_rows sessions): for
  // r < n_rows in order, rope() of row r's q and k (one token at pos[r], heads of
  // s.head_dim_k), then kv[r]->attend_on(*this, il, s, ...) of that token, with row r's q, k,
  // v and out at q + r * q_stride, k + r * k_stride, v + r * v_stride, out + r * out_stride.
  // kv and pos are host arrays of n_rows. Each row bitwise those calls; a device may run the
  // rows as one launch where no two of them share a KV cache (the default is the calls, each
  // row's as one rope_attend).
  virtual void rope_attend_rows(int32_t il, const AttentionShape& s, const RopeParams& p,
                                KvStore* const* kv, const int32_t* pos, int32_t n_rows, float* q,
                                int64_t q_stride, float* k, int64_t k_stride, const float* v,
                                int64_t v_stride, float* out, int64_t out_stride) {
    for (int32_t r = 0; r < n_rows; ++r) {
      rope_attend(*kv[r], il, s, p, nullptr, q + r * q_stride, q_stride, k + r * k_stride, k_stride,
                  v + r * v_stride, v_stride, 1, pos[r], out + r * out_stride, out_stride);
    }
  }

  // ---- gated DeltaNet (kernels/deltanet.h) ----
  // For t < n_tok, h < n_heads (row t at + t * n_heads):
  //   beta[t][h] = sigmoid(beta[t][h]);  g[t][h] = a[h] * softplus(g[t][h] + dt_bias[h])
  virtual void deltanet_gates(float* beta, float* g, int32_t n_tok, int32_t n_heads, const float* a,
                              const float* dt_bias) = 0;
  // conv1d_causal() over all n_ch channels, then SiLU of every output (silu_inplace()).
  virtual void conv1d_silu(const float* x, int64_t x_stride, int32_t n_tok, int64_t n_ch,
                           const float* w, int32_t kernel, float* state, float* out,
                           int64_t out_stride) = 0;
  // For t < n_tok, h < n_heads: l2_norm_inplace(x + t * x_stride + h * d, d, eps), then
  // (when scale != 1) every element *= scale.
  virtual void l2_norm_heads(float* x, int64_t x_stride, int32_t n_tok, int32_t n_heads, int32_t d,
                             float eps, float scale) = 0;
  // The gated delta rule over a.n_tokens tokens, state updated in place: the recurrent form
  // when n_tokens == 1, the chunked form (chunk `chunk`) otherwise. Device addresses in a.
  virtual void gated_delta_rule(const GatedDeltaArgs& a, int32_t chunk) = 0;
  // gated_delta_rule(a[i], chunk) for i < n, in any order or at once: each a[i] on a state of
  // its own (no two share state memory), every head's result bitwise the one that call gives
  // (kernels/deltanet.h: a head's result does not depend on the head split). The CPU streams
  // spread all (set, head) pairs over one parallel region (a batched decode step's sessions);
  // the default runs the calls one after the other.
  virtual void gated_delta_rule_many(const GatedDeltaArgs* a, int32_t n, int32_t chunk) {
    for (int32_t i = 0; i < n; ++i) gated_delta_rule(a[i], chunk);
  }
  // A batched decode step's rows (one token of each of n_rows sessions, row r's recurrent
  // state its own): n_rows one-token conv1d_silu() calls, row r's input at x + r * x_stride,
  // its output at out + r * out_stride, its state states[r] (a host array of n_rows device
  // addresses). Each row bitwise its own call; a device may run them as one launch.
  virtual void conv1d_silu_rows(const float* x, int64_t x_stride, int32_t n_rows, int64_t n_ch,
                                const float* w, int32_t kernel, float* const* states, float* out,
                                int64_t out_stride) {
    for (int32_t r = 0; r < n_rows; ++r) {
      conv1d_silu(x + r * x_stride, x_stride, 1, n_ch, w, kernel, states[r], out + r * out_stride,
                  out_stride);
    }
  }
  // n_rows one-token gated_delta_rule() calls likewise: row r's q, k, v and out at a's
  // addresses plus r of their strides, its g and beta at + r * n_v_heads, its state states[r]
  // (a.n_tokens and a.state are ignored). Each row bitwise its own call; the default hands
  // the rows to gated_delta_rule_many (one parallel region on the CPU).
  virtual void gated_delta_rule_rows(const GatedDeltaArgs& a, int32_t n_rows, float* const* states,
                                     int32_t chunk) {
    std::vector<GatedDeltaArgs> rows(static_cast<size_t>(n_rows));
    for (int32_t r = 0; r < n_rows; ++r)
      rows[static_cast<size_t>(r)] = delta_row_args(a, r, states[r]);
    gated_delta_rule_many(rows.data(), n_rows, chunk);
  }
  // Row r's one-token arguments of gated_delta_rule_rows.
  static GatedDeltaArgs delta_row_args(const GatedDeltaArgs& a, int32_t r, float* state) {
    GatedDeltaArgs b = a;
    b.n_tokens = 1;
    b.q += r * a.q_stride;
    b.k += r * a.k_stride;
    b.v += r * a.v_stride;
    b.g += int64_t{r} * a.n_v_heads;
    b.beta += int64_t{r} * a.n_v_heads;
    b.out += r * a.out_stride;
    b.state = state;
    return b;
  }
  // l2_norm_heads(q, x_stride, n_tok, n_heads, d, eps, q_scale), then l2_norm_heads(k, x_stride,
  // n_tok, n_heads, d, eps, k_scale): DeltaNet's q and k (a fused op, see add_rms_norm).
  virtual void l2_norm_heads_pair(float* q, float q_scale, float* k, float k_scale,
                                  int64_t x_stride, int32_t n_tok, int32_t n_heads, int32_t d,
                                  float eps);
  // With p.beta: deltanet_gates(...) first; then conv1d_silu(...), then l2_norm_heads_pair(out,
  // q_scale, out + l2_heads * d, 1, out_stride, n_tok, l2_heads, d, eps) (DeltaNetPrepArgs; a
  // fused op).
  virtual void deltanet_prep(const DeltaNetPrepArgs& p);
  // gated_delta_rule_many(&a, 1, chunk), then rms_norm_gated(a.out, z, w, a.n_tokens *
  // a.n_v_heads, a.d_v, eps, a.out): one segment's delta rule and the gated norm of its output
  // (a.out's rows contiguous: a.out_stride == n_v_heads * d_v; a fused op).
  virtual void gated_delta_rule_norm(const GatedDeltaArgs& a, int32_t chunk, const float* z,
                                     const float* w, float eps);
  // rms_norm_gated() of n_rows rows of d floats: row r of x, z and out at r * d.
  virtual void rms_norm_gated(const float* x, const float* z, const float* w, int32_t n_rows,
                              int32_t d, float eps, float* out) = 0;
};

// RAII Stream::begin / end.
class StreamScope {
 public:
  explicit StreamScope(Stream& s) : s_(s) { s_.begin(); }
  ~StreamScope() { s_.end(); }
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  Stream& s_;
};

// RAII Stream::begin_uploads / end_uploads(pool).
class UploadBatch {
 public:
  UploadBatch(Stream& s, ThreadPool* pool) : s_(s), pool_(pool) { s_.begin_uploads(); }
  ~UploadBatch() { s_.end_uploads(pool_); }
  UploadBatch(const UploadBatch&) = delete;
  UploadBatch& operator=(const UploadBatch&) = delete;

 private:
  Stream& s_;
  ThreadPool* pool_;
};

// A backend instance, owned by a model: immutable after load, shared by its sessions.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  // For messages and `geist info`, e.g. "cpu" or "cuda (NVIDIA H200, sm_90)".
  virtual std::string description() const = 0;
  // The backend's copy of a host weight matrix (given in the GGUF row layout), owned by the
  // backend until it is destroyed, in whatever layout its kernels read fastest: CUDA keeps a
  // device copy (Q8_0 regrouped, see matmul_cuda.cu); the CPU backends return the host view
  // itself, or a repacked GROUPS16 copy (kernels/matmul.h).
  virtual Status upload_weight(const WeightMatrix& host, WeightMatrix* dev) = 0;
  // A device copy of n host floats (norm weights, conv kernels), owned by the backend.
  virtual Status upload_floats(const float* host, size_t n, const float** dev) = 0;
  virtual Status new_stream(std::unique_ptr<Stream>* out) const = 0;
  // Tokens per micro-batch of a prefill, given the architecture's own choice (sized for CPU
  // caches): a GPU asks for longer ones, which fill its tensor cores and halve the launches.
  virtual int32_t micro_batch(int32_t arch_default) const { return arch_default; }
};

// Makes a backend of the given kind. AUTO picks CUDA when this build has it and a device is
// present, else CPU. GEIST_E_UNSUPPORTED (with the reason) for CUDA in a build without it or
// on a machine without a device.
Status create_backend(BackendKind kind, std::unique_ptr<Backend>* out);

// Whether this build has the CUDA backend, and how many devices it sees (0 without one).
bool cuda_built();
int cuda_device_count();

}  // namespace geist
