// A loaded model: the mapped GGUF, its tokenizer and its architecture (weights as views into
// the mapping). Immutable after load(), so any number of sessions and threads may share one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

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
  static Status load(const std::string& path, const geist_model_params& params,
                     std::unique_ptr<Model>* out);

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ArchModel& arch() const { return *arch_; }
  const ModelInfo& info() const { return arch_->info(); }
  const Logger& logger() const { return logger_; }
  int32_t n_vocab() const { return info().n_vocab; }
  // Whether encode(..., add_special=true) puts BOS in front (prefill_text drops it after
  // position 0).
  bool adds_bos() const { return adds_bos_; }
  // Identity of the model for snapshots (engine/snapshot.h, computed once at load).
  uint64_t snapshot_id() const { return snapshot_id_; }

  // Architecture, hyper-parameters, tensor counts per type and tokenizer, one item a line.
  std::string describe() const;

  // The pool of n_threads threads (0: hardware concurrency) that this model's sessions share,
  // created on first use and freed with its last user. Thread-safe. The caller checked
  // 0 <= n_threads <= kMaxThreads.
  std::shared_ptr<SharedPool> thread_pool(int n_threads) const;

 private:
  Model() = default;

  Logger logger_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ArchModel> arch_;
  bool adds_bos_ = false;
  uint64_t snapshot_id_ = 0;
  // Execution resources, not model state: the model stays immutable for its users.
  mutable std::mutex pools_mu_;
  mutable std::map<int, std::weak_ptr<SharedPool>> pools_;  // by thread count; guarded
};

}  // namespace geist
