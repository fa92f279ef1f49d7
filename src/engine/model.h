// A loaded model: the mapped GGUF, its tokenizer and its architecture (weights as views into
// the mapping). Immutable after load(), so any number of sessions and threads may share one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "archs/arch.h"
#include "base/log.h"
#include "base/status.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace geist {

// The most compute threads a session may ask for: more is refused (GEIST_E_INVALID_ARG), so a
// typo like `-t 100000` cannot exhaust the machine's process table.
constexpr int kMaxThreads = 256;

// A thread pool shared by the sessions of one model that ask for the same thread count, so N
// sessions on a machine cost one set of threads, not N. The pool's run() is not reentrant and
// serves one caller at a time: whoever runs ops on it holds `mu` for the whole micro-batch
// (Session does, around each ArchModel::forward call). Two sessions used from two threads at
// once therefore take turns micro-batch by micro-batch, never oversubscribing the cores.
struct SharedPool {
  explicit SharedPool(int n_threads) : pool(n_threads) {}
  std::mutex mu;
  ThreadPool pool;
  // forward_batch's logits rows ([rows][n_vocab], engine/batch.cpp), guarded by mu: grown to
  // the largest batch once, so decode steps neither allocate nor zero-fill megabytes each.
  std::vector<float> batch_logits;
};

class Model {
 public:
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Opens and validates `path`. Reports progress 0 at the start and 1 at the end (and steps
  // in between) through params.progress_fn; a non-zero return from it cancels the load with
  // GEIST_E_INVALID_STATE. Errors: those of GgufFile::open, Tokenizer::load and
  // load_arch_model; GEIST_E_FORMAT when tokenizer and weights disagree on the vocabulary.
  // params.vocab_only: only the tokenizer is built (any architecture, no tensors needed);
  // arch() must then not be called (require_weights says so).
  static Status load(const std::string& path, const geist_model_params& params,
                     std::unique_ptr<Model>* out);

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // The architecture; only for a model with weights (vocab_only() false).
  const ArchModel& arch() const {
    GEIST_CHECK(arch_ != nullptr, "Model::arch() on a vocab-only model");
    return *arch_;
  }
  // For a vocab-only model: the architecture name (may be empty), n_vocab and n_ctx_train
  // from the metadata, everything else 0.
  const ModelInfo& info() const { return arch_ ? arch_->info() : vocab_info_; }
  bool vocab_only() const { return arch_ == nullptr; }
  // GEIST_E_INVALID_STATE naming `what` when the model was loaded vocab-only, else ok.
  Status require_weights(const char* what) const;
  const Logger& logger() const { return logger_; }
  int32_t n_vocab() const { return info().n_vocab; }
  // Whether encode(..., add_special=true) puts BOS in front (prefill_text drops it after
  // position 0).
  bool adds_bos() const { return adds_bos_; }
  // Identity of the model for snapshots (engine/snapshot.h, computed once at load).
  uint64_t snapshot_id() const { return snapshot_id_; }

  // The chat template stored as tokenizer.chat_template ("" name) or
  // tokenizer.chat_template.NAME; nullptr when the file has none of that name.
  const std::string* chat_template(std::string_view name) const;
  const std::vector<std::pair<std::string, std::string>>& chat_templates() const {
    return chat_templates_;
  }
  // The texts of the BOS / EOS tokens ("" when the model has none), as templates see them.
  const std::string& bos_text() const { return bos_text_; }
  const std::string& eos_text() const { return eos_text_; }

  // Architecture, hyper-parameters, tensor counts per type and tokenizer, one item a line.
  std::string describe() const;

  // The pool of n_threads threads (0: hardware concurrency) that this model's sessions share,
  // created on first use and freed with its last user. Thread-safe. The caller checked
  // 0 <= n_threads <= kMaxThreads.
  std::shared_ptr<SharedPool> thread_pool(int n_threads) const;

 private:
  Model() = default;
  // Chat templates and the bos / eos texts, read before the string arrays are released.
  void read_chat_metadata();

  Logger logger_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ArchModel> arch_;  // null for a vocab-only load
  ModelInfo vocab_info_;             // info() of a vocab-only load
  bool adds_bos_ = false;
  uint64_t snapshot_id_ = 0;
  std::vector<std::pair<std::string, std::string>> chat_templates_;  // (name, source), file order
  std::string bos_text_;
  std::string eos_text_;
  // Execution resources, not model state: the model stays immutable for its users.
  mutable std::mutex pools_mu_;
  mutable std::map<int, std::weak_ptr<SharedPool>> pools_;  // by thread count; guarded
};

}  // namespace geist
