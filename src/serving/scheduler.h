// The serving scheduler: a fixed set of sequences (one geist_session each), a bounded FIFO
// queue of requests, and one worker thread that advances every active sequence step by step.
// A step is one batched forward (include/geist/geist_batch.h): each decoding sequence's owed
// forward plus prefill chunks of the sequences still reading their prompts (in admission
// order, within the rest of the step's token budget), so a long prompt never stalls users that
// are already decoding; then every decoding sequence samples its next token.
//
// Determinism: a request's tokens depend only on its prompt, its sampler settings and its seed.
// Prefill chunks end only at absolute positions that are multiples of the sessions' prefill
// grid (geist_session_prefill_grid: 64 with recurrent layers, 1 for attention-only models), or
// at the prompt end, where the engine's results do not depend on how the prompt was split;
// sampling is per session; the prefix cache only restores states that a prefill produced at
// such a point.
//
// Uses only the public C ABI (include/geist). Threading: submit / cancel / stats from any
// thread; the callbacks of a request run on the worker thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cache/prefix_cache.h"
#include "geist/geist.h"

namespace geist_serving {

// The prefill grid of models with recurrent layers (Qwen3.5's delta-rule chunk). The scheduler
// cuts and checkpoints on its sessions' own grid (grid()), which is 1 for attention-only models;
// this one is the least prefill a step carries, and the spacing of the checkpoint a plain-text
// prompt gets before its end (docs/SERVER.md "Prefix cache").
constexpr int32_t kGrid = 64;

struct TopLogprob {
  geist_token token;
  float logprob;
};

// One generated token as the request's callback sees it.
struct TokenEvent {
  geist_token token = 0;
  float logprob = 0.0f;         // log-softmax of the raw logits (when logprobs were asked)
  std::vector<TopLogprob> top;  // the n most likely tokens, best first
};

struct Result {
  std::string finish_reason;  // "stop", "length", "cancelled", "error"
  std::string error;          // for "error"
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens restored from the prefix cache
  int32_t completion_tokens = 0;
  double queue_ms = 0, prompt_ms = 0, predicted_ms = 0;  // waiting, prefill, generation
  double ttft_ms = 0;                                    // from submission to the first token
  // Parts of prompt_ms: restoring the cached prefix, and snapshotting its checkpoints.
  double restore_ms = 0, checkpoint_ms = 0;
};

struct Request {
  std::vector<geist_token> prompt;  // non-empty
  geist_sampler_params sampler{};
  int32_t max_tokens = -1;  // -1: until the context is full
  bool logprobs = false;
  int32_t top_logprobs = 0;
  std::string cache_namespace;       // cache_salt etc.; "" is the default namespace
  std::vector<int32_t> checkpoints;  // extra prefix lengths worth caching (message ends)
  // Called on the worker for each token that is not end-of-generation; return false to end
  // the request with finish_reason "stop" (a stop string matched).
  std::function<bool(const TokenEvent&)> on_token;
  std::function<void(const Result&)> on_done;  // called exactly once, last
  std::atomic<bool> cancelled{false};          // set by anyone: ends within one step
  // Sessions (docs/SERVER.md "Sessions"): start from this image (holding prompt[0, start_len))
  // instead of the prefix cache; prefill_only ends the request once the prompt is in; and
  // on_prompt_state receives the snapshot taken when the whole prompt is in (before decoding).
  geist_cache::Image start_image;
  int32_t start_len = 0;
  bool prefill_only = false;
  std::function<void(std::vector<uint8_t>)> on_prompt_state;
  // Filled by the scheduler.
  double t_submit = 0;
};

struct SchedulerConfig {
  int32_t n_parallel = 1;
  int32_t n_ctx = 0;  // per sequence; 0: the engine default
  int32_t n_threads = 0;
  int32_t kv_mode = 1;        // GEIST_KV_F16
  int32_t queue_max = 64;     // requests waiting for a sequence
  int32_t step_tokens = 512;  // token budget of one step (decode tokens + prefill chunks)
  size_t cache_bytes = 0;     // prefix cache RAM budget; 0: no cache
};

struct SchedulerStats {
  int64_t requests_done = 0, requests_cancelled = 0, requests_error = 0;
  int64_t prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
  int32_t queue_depth = 0, active = 0;
  geist_cache::CacheStats cache;
  // Time to first token of requests that produced one: Prometheus-style buckets (cumulative
  // at print time) over kTtftBoundsMs, their sum and count.
  std::vector<int64_t> ttft_bucket;
  double ttft_sum_ms = 0;
  int64_t ttft_count = 0;
  // Batched forwards (one per step with work): their number, the sequences they carried in
  // all, the decode rows and prefill tokens among them, and the most sequences in one.
  int64_t batch_forwards = 0, batch_sequences = 0, batch_decode_rows = 0, batch_prefill_tokens = 0;
  int32_t batch_max_sequences = 0;
  // Prompt tokens a request found in its sequence's own session and kept (a rewind, no
  // restore); they count among cached_tokens too.
  int64_t rewound_tokens = 0;
};

extern const std::vector<double> kTtftBoundsMs;

class Scheduler {
 public:
  // tiers: the prefix cache's lower tiers, in order (disk, Redis; docs/SERVER.md "Tiers").
  Scheduler(geist_model* model, const SchedulerConfig& cfg,
            std::vector<std::unique_ptr<geist_cache::Tier>> tiers = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Creates the sessions; on failure *err says why.
  bool start(std::string* err);
  // Queues a request; false when the queue is full (the caller answers 503).
  bool submit(std::shared_ptr<Request> req);
  SchedulerStats stats() const;
  const SchedulerConfig& config() const { return cfg_; }
  int32_t n_ctx() const { return n_ctx_; }
  // The sessions' prefill grid (geist_session_prefill_grid), known once start() succeeded:
  // prefill chunks end, checkpoints are taken and prefixes are reused at its multiples (or at
  // a prompt's end).
  int32_t grid() const { return grid_; }
  // The prefix cache (null when off) and the namespace of a request's cache_salt in it: the
  // model identity (geist_model_identity), KV mode, context and grid(), then the salt.
  geist_cache::PrefixCache* cache() const { return cache_.get(); }
  std::string cache_namespace(const std::string& salt) const;

 private:
  struct Slot;
  void worker();
  void step();
  void admit(Slot& slot, std::shared_ptr<Request> req);
  int32_t chunk_end(const Slot& slot, int32_t budget) const;
  // How many of the request's prompt tokens the slot's session holds as prefill left them
  // (a rewind to there reuses them): 0 where that reuse does not apply.
  int32_t reusable(const Slot& slot, const Request& req) const;
  void chunk_done(Slot& slot, int32_t end);
  // Stores the session's state as the cache's entry for the first `end` tokens of `prompt`.
  void checkpoint(Slot& slot, const std::string& ns, const geist_token* prompt, int32_t end);
  // The sequence's next token: `sampled` when the step's batched call sampled it (or peek
  // drew it), else geist_session_decode (logprobs read the pending logits first).
  void decode_one(Slot& slot, const geist_token* sampled = nullptr);
  // The prompt is in the session; `checkpoint_end`: its end is to be checkpointed.
  void prompt_done(Slot& slot, bool checkpoint_end);
  void finish(Slot& slot, const char* reason, const std::string& error = "");

  geist_model* model_;
  SchedulerConfig cfg_;
  int32_t n_ctx_ = 0;
  int32_t grid_ = kGrid;      // the sessions' prefill grid (start())
  uint64_t admit_order_ = 0;  // admissions so far (Slot::order)
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::unique_ptr<geist_cache::Tier>> tiers_;  // handed to cache_ at start()
  std::unique_ptr<geist_cache::PrefixCache> cache_;
  std::string ns_prefix_;              // cache_namespace() without the salt
  double prefill_ms_per_token_ = 1.0;  // running estimate: what a tier read must beat
  std::atomic<int32_t> active_{0};     // sequences holding a request

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Request>> queue_;
  bool stop_ = false;
  std::thread thread_;

  mutable std::mutex stats_mu_;
  SchedulerStats stats_;
};

double now_ms();

}  // namespace geist_serving
