#include "serving/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "geist/geist_batch.h"
#include "geist/geist_snapshot.h"
#include "geist/geist_util.h"  // geist_model_identity
#include "serving/scheduler_slot.h"

namespace geist_serving {

const std::vector<double> kTtftBoundsMs = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000};

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

Scheduler::Scheduler(geist_model* model, const SchedulerConfig& cfg,
                     std::vector<std::unique_ptr<geist_cache::Tier>> tiers)
    : model_(model), cfg_(cfg), tiers_(std::move(tiers)) {
  stats_.ttft_bucket.assign(kTtftBoundsMs.size() + 1, 0);
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& s : slots_) {
    if (s->req) s->req->on_done(Result{"cancelled", "server shutting down"});
    geist_session_destroy(s->sess);
  }
  for (auto& r : queue_) r->on_done(Result{"cancelled", "server shutting down"});
}

bool Scheduler::start(std::string* err) {
  for (int32_t i = 0; i < cfg_.n_parallel; ++i) {
    geist_session_params sp;
    geist_session_params_default(&sp);
    sp.max_seq_len = cfg_.n_ctx;
    sp.n_threads = cfg_.n_threads;
    sp.kv_mode = cfg_.kv_mode;
    auto slot = std::make_unique<Slot>();
    if (geist_session_create(model_, &sp, &slot->sess) != GEIST_OK) {
      *err = std::string("cannot create a session: ") + geist_model_last_error(model_);
      return false;
    }
    n_ctx_ = geist_session_max_seq_len(slot->sess);
    // One model and KV mode: every session has the same grid.
    grid_ = geist_session_prefill_grid(slot->sess);
    slots_.push_back(std::move(slot));
  }
  if (grid_ <= 0) {
    *err = "the sessions report no prefill grid";
    return false;
  }
  std::string identity(512, '\0');
  size_t n_id = 0;
  geist_status st = geist_model_identity(model_, identity.data(), identity.size(), &n_id);
  if (st == GEIST_E_INVALID_ARG && n_id > identity.size()) {
    identity.assign(n_id, '\0');
    st = geist_model_identity(model_, identity.data(), identity.size(), &n_id);
  }
  if (st != GEIST_OK) {
    *err = std::string("cannot read the model's identity: ") + geist_model_last_error(model_);
    return false;
  }
  identity.resize(n_id);
  ns_prefix_ = "model:" + identity + "/kv" + std::to_string(cfg_.kv_mode) + "/ctx" +
               std::to_string(n_ctx_) + "/grid" + std::to_string(grid_) + "/salt:";
  if (cfg_.cache_bytes > 0 || !tiers_.empty()) {
    cache_ = std::make_unique<geist_cache::PrefixCache>(cfg_.cache_bytes, std::move(tiers_));
  }
  thread_ = std::thread([this] { worker(); });
  return true;
}

std::string Scheduler::cache_namespace(const std::string& salt) const { return ns_prefix_ + salt; }

bool Scheduler::submit(std::shared_ptr<Request> req) {
  req->t_submit = now_ms();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int32_t>(queue_.size()) >= cfg_.queue_max) return false;
    queue_.push_back(std::move(req));
  }
  cv_.notify_all();
  return true;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    s = stats_;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.queue_depth = static_cast<int32_t>(queue_.size());
  }
  if (cache_) s.cache = cache_->stats();
  s.active = active_.load();
  return s;
}

void Scheduler::worker() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        if (stop_ || !queue_.empty()) return true;
        for (auto& s : slots_) {
          if (s->req) return true;
        }
        return false;
      });
      if (stop_) return;
    }
    step();
  }
}

// Starts a waiting sequence unless another one is about to checkpoint a deeper prefix of its
// prompt than the cache holds now (then it waits, so a shared prefix is computed once).
static size_t common_prefix(const std::vector<geist_token>& a, const std::vector<geist_token>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

void Scheduler::decode_one(Slot& s, const geist_token* sampled) {
  Request& r = *s.req;
  TokenEvent ev;
  geist_token tok = 0;
  if (sampled != nullptr) {  // sampled in the step's batched call (no logprobs asked)
    tok = *sampled;
  } else if (r.logprobs) {
    const float* lg = nullptr;
    int32_t nv = 0;
    if (geist_session_logits(s.sess, &lg, &nv) != GEIST_OK) {
      finish(s, "error", geist_session_last_error(s.sess));
      return;
    }
    s.logits.assign(lg, lg + nv);
  }
  if (sampled == nullptr) {
    const geist_status st = geist_session_decode(s.sess, &tok);
    if (st == GEIST_E_TOO_MANY_TOKENS) {
      finish(s, "length");
      return;
    }
    if (st != GEIST_OK) {
      finish(s, "error", geist_session_last_error(s.sess));
      return;
    }
  }
  if (s.t_first == 0) s.t_first = now_ms();
  ++s.res.completion_tokens;
  if (geist_model_token_is_eog(model_, tok)) {
    finish(s, "stop");
    return;
  }
  ev.token = tok;
  if (r.logprobs && !s.logits.empty()) {
    float mx = -INFINITY;
    for (float v : s.logits) mx = std::max(mx, v);
    double sum = 0;
    for (float v : s.logits) sum += std::exp(static_cast<double>(v - mx));
    const float lse = mx + static_cast<float>(std::log(sum));
    ev.logprob = s.logits[tok] - lse;
    const int32_t k = std::min<int32_t>(r.top_logprobs, static_cast<int32_t>(s.logits.size()));
    std::vector<int32_t> idx(s.logits.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
      return s.logits[a] > s.logits[b] || (s.logits[a] == s.logits[b] && a < b);
    });
    for (int32_t i = 0; i < k; ++i) ev.top.push_back({idx[i], s.logits[idx[i]] - lse});
  }
  if (!r.on_token(ev)) {
    finish(s, "stop");
    return;
  }
  if ((r.max_tokens >= 0 && s.res.completion_tokens >= r.max_tokens) ||
      geist_session_position(s.sess) >= n_ctx_) {
    finish(s, "length");
  }
}

void Scheduler::finish(Slot& s, const char* reason, const std::string& error) {
  const double t = now_ms();
  Result& res = s.res;
  res.finish_reason = reason;
  res.error = error;
  res.queue_ms = s.t_admit - s.req->t_submit;
  res.prompt_ms = (s.t_prefill_done > 0 ? s.t_prefill_done : t) - s.t_admit;
  res.predicted_ms = s.t_prefill_done > 0 ? t - s.t_prefill_done : 0;
  res.ttft_ms = s.t_first > 0 ? s.t_first - s.req->t_submit : 0;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    if (res.finish_reason == "cancelled") {
      ++stats_.requests_cancelled;
    } else if (res.finish_reason == "error") {
      ++stats_.requests_error;
    } else {
      ++stats_.requests_done;
    }
    stats_.prompt_tokens += res.prompt_tokens;
    stats_.cached_tokens += res.cached_tokens;
    stats_.generated_tokens += res.completion_tokens;
    if (s.t_first > 0) {
      size_t b = 0;
      while (b < kTtftBoundsMs.size() && res.ttft_ms > kTtftBoundsMs[b]) ++b;
      ++stats_.ttft_bucket[b];
      stats_.ttft_sum_ms += res.ttft_ms;
      ++stats_.ttft_count;
    }
  }
  if (res.finish_reason == "error") s.prefilled = 0;  // the state may be undefined
  std::shared_ptr<Request> req = std::move(s.req);
  s.req.reset();
  --active_;
  s.waiting = s.decoding = false;
  req->on_done(res);
}

void Scheduler::step() {
  // 1. Admission, FIFO: the oldest queued request takes the free sequence whose session holds
  //    the longest prefix of its prompt (with grid 1; else the first free one).
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (;;) {
      Slot* s = nullptr;
      int32_t best = -1;
      for (auto& o : slots_) {
        if (o->req || queue_.empty()) continue;
        const int32_t kept = reusable(*o, *queue_.front());
        if (kept > best) {
          s = o.get();
          best = kept;
        }
      }
      if (s == nullptr) break;
      {
        std::shared_ptr<Request> r = std::move(queue_.front());
        queue_.pop_front();
        if (r->cancelled.load()) {
          Result res;
          res.finish_reason = "cancelled";
          res.prompt_tokens = static_cast<int32_t>(r->prompt.size());
          res.queue_ms = now_ms() - r->t_submit;
          {
            std::lock_guard<std::mutex> sl(stats_mu_);
            ++stats_.requests_cancelled;
          }
          r->on_done(res);
          continue;
        }
        admit(*s, std::move(r));
      }
    }
  }
  // 2. Cancellations end here, before any work of this step.
  for (auto& s : slots_) {
    if (s->req && s->req->cancelled.load()) finish(*s, "cancelled");
  }
  // 3. Waiting sequences start from the deepest cached prefix, unless a sibling is about to
  //    store a deeper one.
  for (auto& s : slots_) {
    if (!s->req || !s->waiting) continue;
    const auto& prompt = s->req->prompt;
    geist_cache::PrefixCache::Hit hit;
    if (s->req->start_image) {
      hit.n_tokens = s->req->start_len;
      hit.image = s->req->start_image;
    } else if (cache_ && s->fetch) {  // a tier lookup in flight: wait for it
      if (!s->fetch->done.load()) continue;
      hit = s->fetch->hit.n_tokens > s->ram_hit.n_tokens ? s->fetch->hit : s->ram_hit;
      s->fetch.reset();
      s->ram_hit = {};
    } else if (cache_) {
      bool wait = false;
      for (auto& o : slots_) {
        if (o.get() == s.get() || !o->req || o->waiting || o->decoding || o->ns != s->ns) continue;
        const size_t common = common_prefix(o->req->prompt, prompt);
        for (int32_t c : o->cuts) {
          // Only a grid point, or the sibling's whole prompt when it is ours too, is reusable.
          const bool usable = c % grid_ == 0 || (static_cast<size_t>(c) == prompt.size() &&
                                                 o->req->prompt.size() == prompt.size());
          if (c > o->pos && static_cast<size_t>(c) <= common && usable) wait = true;
        }
      }
      if (wait) continue;
      hit = cache_->lookup(s->ns, prompt.data(), prompt.size(), grid_);
      const int32_t have = std::max(hit.n_tokens, reusable(*s, *s->req));
      if (cache_->has_tiers() && !s->tier_asked && have < static_cast<int32_t>(prompt.size())) {
        // RAM has nothing as deep as the prompt: the tiers are asked in the background, with
        // as long as prefilling the rest would take (at least 500 ms).
        s->tier_asked = true;
        s->ram_hit = hit;
        const double budget_ms =
            std::max(500.0, prefill_ms_per_token_ * static_cast<double>(prompt.size() - have));
        s->fetch =
            cache_->fetch(s->ns, prompt, grid_, have,
                          std::chrono::steady_clock::now() +
                              std::chrono::microseconds(static_cast<int64_t>(budget_ms * 1000.0)));
        continue;
      }
    }
    s->waiting = false;
    // The session's own prefix, where it holds at least as much of the prompt as the cache's
    // deepest image: rewound to it, nothing copied (the same bits as restoring that image).
    const int32_t keep = reusable(*s, *s->req);
    if (keep > 0 && keep >= hit.n_tokens && geist_session_rewind(s->sess, keep) == GEIST_OK) {
      if (geist_session_set_sampler(s->sess, &s->req->sampler) != GEIST_OK) {
        finish(*s, "error", geist_session_last_error(s->sess));
        continue;
      }
      s->pos = s->prefilled = keep;
      s->held_ns = s->ns;
      s->res.cached_tokens = keep;  // < the prompt: its rest is prefilled by the next steps
      {
        std::lock_guard<std::mutex> lock(stats_mu_);
        stats_.rewound_tokens += keep;
      }
      continue;
    }
    bool restored = false;
    if (hit.n_tokens > 0) {
      // Every image here has been verified already, so the restore skips its own XXH3 pass (as
      // long as the copy): the cache's entries are this process's snapshots or tier objects
      // that passed the tier's checksum and the entry codec's XXH3-128; a session's image is
      // its own snapshot, a tier object verified likewise, or an upload that a full
      // geist_session_restore accepted. The structural checks still run.
      const double t0 = now_ms();
      restored =
          geist_session_restore_trusted(s->sess, hit.image->data(), hit.image->size()) == GEIST_OK;
      s->res.restore_ms += now_ms() - t0;
    }
    if (!restored && s->req->start_image) {
      finish(
          *s, "error",
          std::string("cannot restore the session's state: ") + geist_session_last_error(s->sess));
      continue;
    }
    if (!restored && hit.n_tokens > 0) {
      // A stored image the engine refuses (a tier's bytes that passed every checksum but not
      // the snapshot reader): a miss, never a failed request; it is not offered again.
      cache_->reject(s->ns, prompt.data(), static_cast<size_t>(hit.n_tokens));
    }
    if (!restored) geist_session_reset(s->sess);
    if (geist_session_set_sampler(s->sess, &s->req->sampler) != GEIST_OK) {
      finish(*s, "error", geist_session_last_error(s->sess));
      continue;
    }
    s->pos = restored ? hit.n_tokens : 0;
    // An image of the cache is prefill's by the cache's contract; a request's own need not be.
    s->prefilled = s->req->start_image ? 0 : s->pos;
    s->held_ns = s->ns;
    s->res.cached_tokens = s->pos;
    if (s->pos == static_cast<int32_t>(prompt.size())) prompt_done(*s, false);
  }
  // 4. The step's work, one geist_batch_forward: the owed forward of every decoding sequence
  //    (its last sampled token) and its next token sampled in the same call (where logprobs
  //    are asked for, the sequence samples afterwards from its pending logits, no forward),
  //    and prefill chunks in admission order within the token budget.
  std::vector<Slot*> decoders, prefillers;
  for (auto& s : slots_) {
    if (!s->req || s->waiting) continue;
    (s->decoding ? decoders : prefillers).push_back(s.get());
  }
  std::sort(prefillers.begin(), prefillers.end(),
            [](const Slot* a, const Slot* b) { return a->order < b->order; });
  std::vector<geist_batch_item> items;
  std::vector<Slot*> owners;
  std::vector<int32_t> ends;  // prefill items: the chunk's end; decode items: -1
  items.reserve(decoders.size() + prefillers.size());
  for (Slot* s : decoders) {
    geist_batch_item& it = items.emplace_back();
    geist_batch_item_init(&it, s->sess, nullptr, 0);
    it.decode = s->req->logprobs ? 0 : 1;
    owners.push_back(s);
    ends.push_back(-1);
  }
  int32_t budget =
      std::max<int32_t>(kGrid, cfg_.step_tokens - static_cast<int32_t>(decoders.size()));
  int32_t prefill_tokens = 0;
  for (Slot* s : prefillers) {
    if (budget <= 0) break;
    const int32_t end = chunk_end(*s, budget);
    geist_batch_item_init(&items.emplace_back(), s->sess, s->req->prompt.data() + s->pos,
                          static_cast<size_t>(end - s->pos));
    owners.push_back(s);
    ends.push_back(end);
    budget -= end - s->pos;
    prefill_tokens += end - s->pos;
  }
  if (!items.empty()) {
    const geist_status st = geist_batch_forward(model_, items.data(), items.size());
    if (st != GEIST_OK) {
      // Nothing ran (a bad argument: cannot happen with the scheduler's own sessions); fail
      // the step's requests rather than loop on it.
      const std::string err =
          std::string("batched forward refused: ") + geist_model_last_error(model_);
      for (Slot* s : owners) finish(*s, "error", err);
    } else {
      {
        std::lock_guard<std::mutex> lock(stats_mu_);
        ++stats_.batch_forwards;
        stats_.batch_sequences += static_cast<int64_t>(items.size());
        stats_.batch_decode_rows += static_cast<int64_t>(decoders.size());
        stats_.batch_prefill_tokens += prefill_tokens;
        stats_.batch_max_sequences =
            std::max<int32_t>(stats_.batch_max_sequences, static_cast<int32_t>(items.size()));
      }
      for (size_t i = 0; i < items.size(); ++i) {
        Slot& s = *owners[i];
        const geist_status ist = items[i].status;
        if (ends[i] < 0) {
          // A full session cannot run its owed forward: the request ends by length, as a
          // decode that finds the session full does.
          if (ist == GEIST_E_TOO_MANY_TOKENS) {
            finish(s, "length");
          } else if (ist != GEIST_OK) {
            finish(s, "error", geist_session_last_error(s.sess));
          } else {
            decode_one(s, items[i].decode ? &items[i].token : nullptr);
          }
        } else if (ist != GEIST_OK) {
          finish(s, "error", geist_session_last_error(s.sess));
        } else {
          chunk_done(s, ends[i]);
        }
      }
    }
  }
  // All sequences waiting on one another cannot happen (a sibling that others wait on is
  // prefilling); a step with only waiting sequences just loops to the next step.
  bool busy = false;
  for (auto& s : slots_) busy = busy || (s->req && !s->waiting);
  if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace geist_serving
