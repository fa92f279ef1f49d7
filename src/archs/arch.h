// The architecture interface: an immutable model (config + weight views into the GGUF
// mapping) and the per-session mutable state it runs on. One file per architecture implements
// it; registry.cpp maps general.architecture to a loader.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/log.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "formats/gguf.h"

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

// Everything a session mutates while decoding (KV cache, recurrent state, scratch). Created by
// ArchModel::create_state for one model; not shareable between sessions.
class ArchState {
 public:
  virtual ~ArchState() = default;
  virtual int32_t max_seq_len() const = 0;
  // Forgets all positions (cheap: does not need to clear memory).
  virtual void reset() = 0;
};

class ArchModel {
 public:
  virtual ~ArchModel() = default;
  virtual const ModelInfo& info() const = 0;

  // GEIST_E_INVALID_ARG for max_seq_len <= 0, GEIST_E_OOM.
  virtual Status create_state(int32_t max_seq_len, std::unique_ptr<ArchState>* out) const = 0;

  // Runs tokens[0, n) at positions [pos, pos + n) and writes logits: the last token's row
  // ([n_vocab]) into `logits`, or every row ([n][n_vocab]) when all_logits is true.
  // The caller guarantees 0 < n, pos + n <= state.max_seq_len(), ids < n_vocab, and that
  // positions [0, pos) were filled by earlier calls. Results for a row are bitwise
  // independent of how the sequence was split into calls and of the thread count.
  virtual Status forward(ArchState& state, const int32_t* tokens, int32_t n, int32_t pos,
                         bool all_logits, float* logits, ThreadPool& pool) const = 0;
};

// Loads the architecture named by general.architecture. GEIST_E_UNSUPPORTED for unknown or
// refused architectures, GEIST_E_FORMAT for missing/invalid tensors or hyper-parameters,
// GEIST_E_UNSUPPORTED naming tensor and type for unsupported tensor types.
Status load_arch_model(const GgufFile& file, const Logger& log, std::unique_ptr<ArchModel>* out);

}  // namespace geist
