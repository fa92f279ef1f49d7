// The architecture interface: an immutable model (config + weight views into the GGUF
// mapping) and the per-session mutable state it runs on. One file per architecture implements
// it; registry.cpp maps general.architecture to a loader.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "archs/workspace.h"
#include "backends/backend.h"
#include "base/log.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "formats/gguf.h"
#include "kv/kv_cache.h"

namespace geist {

// Hyper-parameters every architecture reports (for the engine, CLI info and snapshots).
struct ModelInfo {
  std::string architecture;  // general.architecture
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t n_ff = 0;
  int32_t head_dim = 0;
};

// Kinds of state regions; the values are the snapshot section kinds.
constexpr uint32_t kStateKvPart0 = 16;    // + KvPart: a KV cache part of an attention layer
constexpr uint32_t kStateConv = 48;       // a DeltaNet layer's conv state, f32
constexpr uint32_t kStateRecurrent = 49;  // a DeltaNet layer's recurrent state, f32

struct StateRegion {
  uint32_t kind = 0;  // kStateKvPart0 + part, kStateConv or kStateRecurrent
  int32_t layer = 0;  // model layer index
  uint64_t nbytes = 0;
};

// The KV cache's regions as state regions (helpers for ArchState implementations).
inline void kv_state_regions(const KvStore& kv, int32_t n_pos, std::vector<StateRegion>* out) {
  std::vector<KvRegion> kr;
  kv.regions(n_pos, &kr);
  for (const KvRegion& r : kr) out->push_back({kStateKvPart0 + r.part, r.layer, r.nbytes});
}
inline KvRegion kv_region_of(const StateRegion& r) {
  return KvRegion{r.layer, r.kind - kStateKvPart0, r.nbytes};
}

// Everything a session keeps between forward calls (KV cache, recurrent state; on device
// backends also its activation workspace). Created by ArchModel::create_state for one model;
// not shareable between sessions.
class ArchState {
 public:
  virtual ~ArchState() = default;
  virtual int32_t max_seq_len() const = 0;
  // Forgets all positions (cheap: does not need to clear memory).
  virtual void reset() = 0;
  // Its stream's status (Stream::status): not ok once the device behind the state failed,
  // after which the state's contents are undefined.
  Status status() const { return compute_stream().status(); }
  // The execution context every op of this state's forward runs on.
  virtual Stream& compute_stream() const = 0;
  // Rows per micro-batch of a forward on this state (ArchModel::micro_batch, at most
  // max_seq_len); the workspace a forward uses holds at least these.
  virtual int32_t micro_batch() const = 0;
  // The activation workspace this state owns, or nullptr: a forward then borrows one from its
  // model's pool (archs/workspace.h; the CPU backends). Device backends keep one per state,
  // since a stream's asynchronous kernels and recorded graphs hold its addresses.
  virtual ArchWorkspace* own_workspace() const = 0;

  // Forward hooks (ArchModel::forward). Whether the state can take positions from pos on,
  // given that the caller filled [0, pos): GEIST_E_INVALID_STATE when it cannot (a recurrent
  // state elsewhere, a KIVI residual overwritten), naming why and what to do.
  virtual Status can_continue_at(int32_t /*pos*/) const { return Status::ok(); }
  // Called before the first micro-batch at pos (a recurrent state starts over at 0), and after
  // each completed micro-batch with the position it reached.
  virtual void begin_at(int32_t /*pos*/) {}
  virtual void advanced_to(int32_t /*pos*/) {}

  // Snapshot contract (docs/SNAPSHOT_FORMAT.md). The state that decides the continuation after
  // positions [0, n_pos) is a fixed list of byte regions: per attention layer its KV parts, per
  // recurrent layer its conv and recurrent buffers; layer ascending, then kind ascending.
  // download/upload copy a region in its host representation (a GPU state would copy across
  // here). After uploading every region of n_pos, set_positions(n_pos) makes the state continue
  // at n_pos exactly as the source did.
  virtual KvMode kv_mode() const = 0;
  virtual void state_regions(int32_t n_pos, std::vector<StateRegion>* out) const = 0;
  virtual void download_region(const StateRegion& r, int32_t n_pos, uint8_t* dst) const = 0;
  virtual void upload_region(const StateRegion& r, int32_t n_pos, const uint8_t* src) = 0;
  virtual void set_positions(int32_t n_pos) = 0;
};

// Uploads a weight matrix to b. When the backend keeps its own copy (a device, or the CPU's
// repacked layout), the file pages behind the host view are released, so the weights are not
// resident twice.
inline Status upload_matrix(Backend& b, const GgufFile& file, WeightMatrix* w) {
  const WeightMatrix host = *w;
  const Status st = b.upload_weight(host, w);
  if (!st.is_ok()) {  // name the tensor: a backend refuses a type the CPU reads (CUDA)
    for (const GgufTensorInfo& t : file.tensors()) {
      if (t.data == host.data) return st.with_prefix("tensor '" + std::string(t.name) + "'");
    }
    return st;
  }
  if (w->data != host.data) {
    file.release_pages(host.data, static_cast<size_t>(host.n_out) * host.row_bytes);
  }
  return Status::ok();
}

// Uploads the token embedding and the output projection to b, once when they are the same
// tensor (tied embeddings): both views then name the one device copy.
inline Status upload_embeddings(Backend& b, const GgufFile& file, WeightMatrix* tok_embd,
                                WeightMatrix* output) {
  const bool tied = output->data == tok_embd->data;
  GEIST_RETURN_IF_ERROR(upload_matrix(b, file, tok_embd));
  if (tied) {
    *output = *tok_embd;
    return Status::ok();
  }
  return upload_matrix(b, file, output);
}

// What forward() writes of the logits. rows: host floats, the last token's row ([n_vocab]), or
// every row ([n][n_vocab]) when `all` is set. argmax (a one-token step, `all` unset): the row is
// wanted only for its greedy choice, *argmax = argmax_first(row) (kernels/ops.h); rows is then
// [n_vocab] scratch that a device backend leaves unwritten (Stream::matmul_argmax_to_host).
struct LogitsOut {
  float* rows = nullptr;
  bool all = false;
  int32_t* argmax = nullptr;
};

// The prefill grid (docs/ARCHITECTURE.md "Determinism"): every micro-batch of a forward, and
// every chunk of the delta rule inside it, starts and ends at an absolute position that is a
// multiple of kPrefillGrid, or at the call's own first or last position. So a prefill split at
// grid points gives the same bits as the unsplit one, whatever the micro-batch size.
constexpr int32_t kPrefillGrid = 64;

// One session's rows in a micro-batch: tokens[0, n) at positions [pos, pos + n) of `state`,
// rows [row0, row0 + n) of the micro-batch. logits: whether this segment's logits are wanted
// (every row with MicroBatch::all, else its last row).
struct Segment {
  ArchState* state = nullptr;
  const int32_t* tokens = nullptr;
  int32_t n = 0;
  int32_t pos = 0;
  int32_t row0 = 0;
  bool logits = false;
};

// One micro-batch for ArchModel::run_micro_batch: the rows of n_seg segments, n_rows in all
// (<= the lead state's micro_batch()). Matmuls run over all rows at once (each weight read
// once); attention, conv and the delta rule run per segment on its own state and positions,
// segments in order within each layer (so two segments of one state see each other's rows).
// The forward's workspace and the lead state's stream carry the rows: every op of the
// micro-batch, a segment's attention on its own KV cache included (KvStore::attend_on), is
// issued on that one stream. The wanted logits
// rows go to `logits` one after the other, segment order ([rows][n_vocab], host memory); all:
// every row of a wanted segment, else its last. argmax (`all` unset): every wanted row is
// wanted only for its greedy choice, argmax[k] = argmax_first(row k) (LogitsOut::argmax);
// logits is then [rows][n_vocab] scratch that a device backend leaves unwritten.
struct MicroBatch {
  const Segment* seg = nullptr;
  int32_t n_seg = 0;
  int32_t n_rows = 0;
  const int32_t* tokens = nullptr;  // [n_rows] host ids: every segment's tokens, packed by row
  float* logits = nullptr;
  bool all = false;
  int32_t* argmax = nullptr;
};

// The segments of a micro-batch, for range-for.
struct SegmentRange {
  const Segment* b;
  const Segment* e;
  const Segment* begin() const { return b; }
  const Segment* end() const { return e; }
};
inline SegmentRange segments(const MicroBatch& mb) { return {mb.seg, mb.seg + mb.n_seg}; }

// The output head of a micro-batch, the same for every architecture: x += res over all
// n_rows rows (the last block's residual add; res nullptr: none), then the wanted rows of x
// ([n_rows][e]) normed (norm_w, eps) into xn's first rows, then one matmul with `output` into
// mb.logits (or their argmax, MicroBatch::argmax). The add and a norm of every row from row 0
// are one Stream::add_rms_norm.
void logits_head(Stream& s, const MicroBatch& mb, float* x, const float* res, float* xn, int64_t e,
                 const float* norm_w, float eps, const WeightMatrix& output, int32_t n_vocab);

class ArchModel {
 public:
  virtual ~ArchModel() = default;
  virtual const ModelInfo& info() const = 0;
  // The backend the weights live on and the forward runs on.
  virtual const Backend& backend() const = 0;

  // A state whose attention layers keep their KV cache in kv_mode (recurrent state is f32
  // whatever the mode). GEIST_E_INVALID_ARG for max_seq_len <= 0 or an unknown mode,
  // GEIST_E_OOM.
  virtual Status create_state(int32_t max_seq_len, KvMode kv_mode,
                              std::unique_ptr<ArchState>* out) const = 0;
  // The same with an f32 KV cache, the representation the external references were made with.
  Status create_state(int32_t max_seq_len, std::unique_ptr<ArchState>* out) const {
    return create_state(max_seq_len, KvMode::F32, out);
  }

  // Runs tokens[0, n) at positions [pos, pos + n) and writes logits as `out` asks (LogitsOut).
  // The forward protocol, the same for every architecture (archs/arch.cpp): it checks the
  // state, ids and positions, cuts the rows into micro-batches on the prefill grid
  // (micro_batch_end), opens the stream's scope, and runs each micro-batch through
  // run_micro_batch, again when the backend asks (graph capture, Stream::end_forward).
  // Positions [0, pos) must have been filled by earlier calls. Results for a row are bitwise
  // independent of the thread count and of the micro-batch size; an attention-only model's
  // rows do not depend on how the sequence was split into calls, a recurrent one's do not
  // when the calls are split at grid points (docs/ARCHITECTURE.md "Determinism").
  // GEIST_E_INVALID_ARG for a state of another model, n <= 0, positions outside
  // [0, max_seq_len), an id outside the vocabulary, out.argmax with n != 1, out.all or no
  // out.rows; GEIST_E_INVALID_STATE when the state cannot continue at pos
  // (ArchState::can_continue_at); GEIST_E_BACKEND for a failed device; GEIST_E_OOM when the
  // model's pool needs a new workspace and cannot allocate it.
  Status forward(ArchState& state, const int32_t* tokens, int32_t n, int32_t pos,
                 const LogitsOut& out, ThreadPool& pool) const;
  // The same, logits rows into `logits`: the last token's ([n_vocab]), or every row
  // ([n][n_vocab]) when all_logits is true.
  Status forward(ArchState& state, const int32_t* tokens, int32_t n, int32_t pos, bool all_logits,
                 float* logits, ThreadPool& pool) const {
    return forward(state, tokens, n, pos, LogitsOut{logits, all_logits, nullptr}, pool);
  }
  // One micro-batch over several sessions' states (engine/batch.cpp packs them): segs[n_seg]
  // of this model's states, n_rows rows in all, at most lead.micro_batch(); every segment lies
  // between two grid points (a micro_batch_end cut) and can continue at its position (the
  // caller checked both, and ids and capacity). Each wanted segment's logits row (its last)
  // goes to logits[k][n_vocab] in segment order, or, with argmax, only its greedy choice to
  // argmax[k] (logits then scratch, LogitsOut::argmax). Every row's bits equal those of its session
  // run alone (the kernels compute each row with a fixed reduction order, whatever the number
  // of rows). Every op runs on lead's stream, in its workspace; on a device backend that stream
  // first waits for each segment state's own (Stream::wait_for), and each of those then waits
  // for it, so a state's lone forwards and copies stay ordered with the batch's. GEIST_E_OOM
  // as forward's; GEIST_E_BACKEND for a failed device (every segment's state then reports it).
  Status forward_batch(ArchState& lead, const Segment* segs, int32_t n_seg, float* logits,
                       int32_t* argmax, ThreadPool& pool) const;
  // Rows per micro-batch on this model's backend: a multiple of kPrefillGrid.
  int32_t micro_batch() const;
  // Where the micro-batch that starts at pos ends when the rows run to `end`: the last grid
  // point within micro_batch() rows of pos, or `end` when that comes first.
  int32_t micro_batch_end(int32_t pos, int32_t end) const;

  // For descriptions (geist info): one letter per layer of the main stack, 'A' for a layer
  // that keeps a KV cache (attention), 'D' for a gated DeltaNet layer (fixed-size state).
  virtual std::string layer_kinds() const {
    return std::string(static_cast<size_t>(info().n_layer), 'A');
  }
  // Bytes of per-session state that do not grow with the context (recurrent + conv state, f32).
  virtual uint64_t fixed_state_bytes() const { return 0; }
  // Whether a layer keeps state whose bits depend on where a prefill call ends (a DeltaNet
  // layer's recurrent state: the chunked delta rule rounds it where a chunk ends, and chunks
  // end on the grid or where a call does).
  virtual bool has_recurrent_layers() const { return false; }
  // The prefill grid of a state in kv_mode (docs/ARCHITECTURE.md "Determinism"): the smallest
  // G such that prefill(0:N) and prefill(0:k) + snapshot + restore + prefill(k:N) give
  // memcmp-equal logits and state for every k that is a multiple of G, whatever the call sizes.
  // lcm(kPrefillGrid if has_recurrent_layers() else 1, kv_mode_split_grid(kv_mode)): 64 for
  // Qwen3.5, 1 for an attention-only model. Verified bitwise on the CPU backends
  // (tests/api/test_api_exact_split.cpp, tests/api/test_api_grid.cpp).
  int32_t prefill_grid(KvMode kv_mode) const;

  // The pool of activation workspaces forwards borrow on the CPU backends (archs/workspace.h):
  // how many exist (one per forward that ran at once, at most), and freeing the idle ones.
  size_t workspaces() const { return workspaces_.size(); }
  void drop_idle_workspaces() const { workspaces_.drop_idle(); }

 protected:
  // What an architecture file describes: whether `state` is one of its states, its rows per
  // micro-batch on the CPU (Backend::micro_batch may raise it), and the ops of one micro-batch
  // (the protocol has checked everything and opened the stream's scope; the ops run on
  // state.compute_stream() with their activations in `ws`, and may be recorded and run
  // again), and its workspace of `rows` rows, allocated on `s`.
  virtual bool owns(const ArchState& state) const = 0;
  virtual int32_t cpu_micro_batch() const = 0;
  virtual void run_micro_batch(ArchState& state, ArchWorkspace& ws, const MicroBatch& mb) const = 0;
  virtual Status create_workspace(Stream& s, int32_t rows,
                                  std::unique_ptr<ArchWorkspace>* out) const = 0;
  // For create_state: the state's own workspace on device backends, nullptr (the pool's) on
  // the CPU backends.
  Status state_workspace(Stream& s, int32_t rows, std::unique_ptr<ArchWorkspace>* out) const;

 private:
  // The workspace of one forward on `lead`: its own, or one of micro_batch() rows from the
  // pool (made on a stream of its own). GEIST_E_OOM when a new one cannot be allocated.
  Status lend_workspace(const ArchState& lead, WorkspaceLease* out) const;
  // Only the CPU backends' workspaces are pooled: their buffers and streams do not refer to
  // the Backend object, so the pool may outlive the derived model's backend_.
  mutable WorkspacePool workspaces_;
};

// Loads the architecture named by general.architecture. GEIST_E_UNSUPPORTED for unknown or
// refused architectures, GEIST_E_FORMAT for missing/invalid tensors or hyper-parameters,
// GEIST_E_UNSUPPORTED naming tensor and type for unsupported tensor types.
// The weights are uploaded to a backend of the given kind (create_backend; AUTO picks CUDA
// when available). GEIST_E_UNSUPPORTED also for a backend the build or machine lacks.
Status load_arch_model(const GgufFile& file, BackendKind backend, const Logger& log,
                       std::unique_ptr<ArchModel>* out);
// The same on the CPU backend.
inline Status load_arch_model(const GgufFile& file, const Logger& log,
                              std::unique_ptr<ArchModel>* out) {
  return load_arch_model(file, BackendKind::CPU, log, out);
}

}  // namespace geist
