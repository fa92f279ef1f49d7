// The architecture interface: an immutable model (config + weight views into the GGUF
// mapping) and the per-session mutable state it runs on. One file per architecture implements
// it; registry.cpp maps general.architecture to a loader.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

// Everything a session mutates while decoding (KV cache, recurrent state, scratch). Created by
// ArchModel::create_state for one model; not shareable between sessions.
class ArchState {
 public:
  virtual ~ArchState() = default;
  virtual int32_t max_seq_len() const = 0;
  // Forgets all positions (cheap: does not need to clear memory).
  virtual void reset() = 0;
  // Its stream's status (Stream::status): not ok once the device behind the state failed,
  // after which the state's contents are undefined.
  virtual Status status() const = 0;

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
  // The caller guarantees 0 < n, pos + n <= state.max_seq_len(), ids < n_vocab, and that
  // positions [0, pos) were filled by earlier calls. Results for a row are bitwise
  // independent of the thread count, and of how the sequence was split into calls for
  // attention-only models (recurrent layers round their state where calls end: within 1e-4
  // on f32 weights, more where 8-bit activation codes flip; docs/ARCHITECTURE.md
  // "Determinism").
  // GEIST_E_INVALID_ARG for out.argmax with n != 1, out.all or no out.rows.
  virtual Status forward(ArchState& state, const int32_t* tokens, int32_t n, int32_t pos,
                         const LogitsOut& out, ThreadPool& pool) const = 0;
  // The same, logits rows into `logits`: the last token's ([n_vocab]), or every row
  // ([n][n_vocab]) when all_logits is true.
  Status forward(ArchState& state, const int32_t* tokens, int32_t n, int32_t pos, bool all_logits,
                 float* logits, ThreadPool& pool) const {
    return forward(state, tokens, n, pos, LogitsOut{logits, all_logits, nullptr}, pool);
  }

  // For descriptions (geist info): one letter per layer of the main stack, 'A' for a layer
  // that keeps a KV cache (attention), 'D' for a gated DeltaNet layer (fixed-size state).
  virtual std::string layer_kinds() const {
    return std::string(static_cast<size_t>(info().n_layer), 'A');
  }
  // Bytes of per-session state that do not grow with the context (recurrent + conv state, f32).
  virtual uint64_t fixed_state_bytes() const { return 0; }
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
