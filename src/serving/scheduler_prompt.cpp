// The prompt path of the scheduler (docs/SERVER.md "Scheduler", "Prefix cache"): admission
// and the prompt's checkpoints, where each prefill chunk ends, what a sequence's session still
// holds of a prompt (a rewind), the checkpoints' snapshots, and the prompt's end with its first
// token.
#include <algorithm>

#include "cache/image_buffer.h"
#include "geist/geist_snapshot.h"
#include "geist/geist_util.h"
#include "serving/scheduler.h"
#include "serving/scheduler_slot.h"

namespace geist_serving {

namespace {
// Long prompts are also checkpointed every this many tokens (rounded down to the grid).
constexpr int32_t kLongPromptEvery = 2048;
}  // namespace

void Scheduler::admit(Slot& slot, std::shared_ptr<Request> req) {
  slot.req = std::move(req);
  ++active_;
  slot.res = Result{};
  slot.res.prompt_tokens = static_cast<int32_t>(slot.req->prompt.size());
  slot.t_admit = now_ms();
  slot.t_first = slot.t_prefill_done = 0;
  slot.order = ++admit_order_;
  slot.decoding = false;
  slot.pos = 0;
  slot.ns = cache_namespace(slot.req->cache_namespace);
  slot.tier_asked = false;
  slot.ram_hit = {};
  slot.fetch.reset();
  const int32_t n = slot.res.prompt_tokens;
  slot.cuts.clear();
  if (cache_) {
    // Message ends (and the server's other hints) at the deepest grid point they reach, every
    // few thousand tokens of a long prompt, the prompt's last grid point (with grid 1: its end)
    // and the prompt end itself, with its logits: an identical request reuses it, and on a grid
    // of 1 so does every request that extends it (the next turn of a chat).
    const int32_t every = std::max(grid_, kLongPromptEvery / grid_ * grid_);
    for (int32_t c : slot.req->checkpoints) slot.cuts.push_back(c / grid_ * grid_);
    for (int32_t c = every; c < n; c += every) slot.cuts.push_back(c);
    slot.cuts.push_back(n / grid_ * grid_);
    slot.cuts.push_back(n);
    std::sort(slot.cuts.begin(), slot.cuts.end());
    slot.cuts.erase(std::unique(slot.cuts.begin(), slot.cuts.end()), slot.cuts.end());
    slot.cuts.erase(std::remove_if(slot.cuts.begin(), slot.cuts.end(),
                                   [&](int32_t c) { return c <= 0 || c > n; }),
                    slot.cuts.end());
  }
  slot.waiting = true;  // the first step looks the cache up (or waits for a sibling's state)
}

int32_t Scheduler::chunk_end(const Slot& s, int32_t budget) const {
  const int32_t n = static_cast<int32_t>(s.req->prompt.size());
  int32_t end = std::min(n, s.pos + std::max(budget, 1));
  if (end < n) {
    end = end / grid_ * grid_;  // never end a call off the grid, except at the prompt end
    if (end <= s.pos) end = std::min(n, (s.pos / grid_ + 1) * grid_);
  }
  for (int32_t c : s.cuts) {
    if (c > s.pos && c < end) {
      end = c;
      break;
    }
  }
  return end;
}

int32_t Scheduler::reusable(const Slot& s, const Request& r) const {
  // Only with the prefix cache on (what a user turns off to get no reuse), within one cache
  // namespace (cache_salt keeps tenants apart), and never for a request that brings its own
  // state; at most all but the prompt's last token, whose logits a prefill must make.
  if (!cache_ || grid_ != 1 || s.prefilled <= 0 || r.start_image || r.prompt.size() < 2 ||
      s.held_ns != cache_namespace(r.cache_namespace)) {
    return 0;
  }
  const geist_token* toks = nullptr;
  size_t n = 0;
  if (geist_session_tokens(s.sess, &toks, &n) != GEIST_OK) return 0;
  const size_t lim = std::min({n, static_cast<size_t>(s.prefilled), r.prompt.size() - 1});
  size_t i = 0;
  while (i < lim && toks[i] == r.prompt[i]) ++i;
  return static_cast<int32_t>(i);
}

void Scheduler::chunk_done(Slot& s, int32_t end) {
  const auto& prompt = s.req->prompt;
  const int32_t n = static_cast<int32_t>(prompt.size());
  s.pos = end;
  s.prefilled = end;  // the chunks run from where the session was restored or rewound
  s.held_ns = s.ns;
  const bool cut = cache_ && std::find(s.cuts.begin(), s.cuts.end(), end) != s.cuts.end() &&
                   !cache_->contains(s.ns, prompt.data(), end);
  if (s.pos < n) {
    if (cut) checkpoint(s, s.ns, prompt.data(), end);
    return;
  }
  prompt_done(s, cut);
}

void Scheduler::checkpoint(Slot& s, const std::string& ns, const geist_token* prompt, int32_t end) {
  const double t0 = now_ms();
  size_t size = 0, written = 0;
  if (geist_session_snapshot_size(s.sess, &size) == GEIST_OK) {
    // A resident buffer where an evicted image gave one back (a fresh one costs a page fault
    // per page on this thread).
    std::vector<uint8_t> img = cache_->take_buffer(size);
    if (geist_session_snapshot(s.sess, img.data(), img.size(), &written) == GEIST_OK) {
      img.resize(written);
      cache_->insert(ns, prompt, end, std::move(img));
    }
  }
  s.res.checkpoint_ms += now_ms() - t0;
}

void Scheduler::prompt_done(Slot& s, bool checkpoint_end) {
  const std::shared_ptr<Request> req = s.req;  // finish() lets go of s.req
  const int32_t n = static_cast<int32_t>(req->prompt.size());
  s.decoding = true;
  s.t_prefill_done = now_ms();
  const int32_t computed = s.res.prompt_tokens - s.res.cached_tokens;
  if (computed >= kGrid) {  // a running mean of what prefilling costs, for tier deadlines
    const double per = (s.t_prefill_done - s.t_admit) / computed;
    prefill_ms_per_token_ = 0.8 * prefill_ms_per_token_ + 0.2 * per;
  }
  geist_token first = 0;
  if (checkpoint_end && !req->on_prompt_state && !req->prefill_only && !req->logprobs &&
      geist_session_peek(s.sess, &first) == GEIST_OK) {
    // The first token goes out before the prompt end's checkpoint (a snapshot of the whole
    // state, as long as the forward or longer on a GPU): peek draws it and leaves the session
    // as prefill left it, the checkpoint is taken from that state (the same bytes as before
    // the token was drawn), and decode then draws the same token for real.
    decode_one(s, &first);
    checkpoint(s, s.ns, req->prompt.data(), n);
    if (!s.req) return;  // finished on the first token (end of generation, length, gone)
    geist_token again = 0;
    const geist_status st = geist_session_decode(s.sess, &again);
    if (st != GEIST_OK || again != first) {
      finish(s, "error",
             st != GEIST_OK ? std::string(geist_session_last_error(s.sess))
                            : std::string("the first token changed between peek and decode"));
      return;
    }
    // decode_one saw the session before the token was appended.
    if (geist_session_position(s.sess) >= n_ctx_) finish(s, "length");
    return;
  }
  if (checkpoint_end) checkpoint(s, s.ns, req->prompt.data(), n);
  if (s.req->on_prompt_state) {
    size_t size = 0, written = 0;
    std::vector<uint8_t> img;
    if (geist_session_snapshot_size(s.sess, &size) == GEIST_OK) {
      geist_cache::fresh_buffer(&img, size);
      if (geist_session_snapshot(s.sess, img.data(), img.size(), &written) == GEIST_OK) {
        img.resize(written);
      } else {
        img.clear();
      }
    }
    s.req->on_prompt_state(std::move(img));
  }
  if (s.req->prefill_only) {
    finish(s, "stop");
    return;
  }
  // The first token needs no forward (the prompt's logits are pending): it is sampled and
  // handed out now, not in the next step's batched call behind the other sequences' rows.
  // The same sampler and RNG draw it either way, so the bits do not change.
  decode_one(s, nullptr);
}

}  // namespace geist_serving
