// The scheduler's sequence (a Scheduler::Slot), shared by the files that make up the scheduler
// (scheduler.cpp: the worker and its steps; scheduler_prompt.cpp: a request's prompt, from
// admission to its first token). Internal to src/serving.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/prefix_cache.h"
#include "serving/scheduler.h"

namespace geist_serving {

struct Scheduler::Slot {
  geist_session* sess = nullptr;
  std::shared_ptr<Request> req;  // null: free
  bool waiting = false;          // admitted, waiting for another sequence's checkpoint
  bool decoding = false;
  int32_t pos = 0;  // prompt tokens in the session
  // The session's first `prefilled` positions were written by prefill (restored from the
  // cache, whose images prefill made, or this slot's chunks since): a later request that
  // shares them continues there (geist_session_rewind) instead of restoring (grid 1 only).
  int32_t prefilled = 0;
  std::string held_ns;        // the cache namespace of the request that put those positions there
  std::vector<int32_t> cuts;  // ascending prefix lengths to checkpoint (> pos)
  std::string ns;             // cache namespace of the request
  Result res;
  double t_admit = 0, t_prefill_done = 0, t_first = 0;
  uint64_t order = 0;         // admission order (FIFO among prefilling sequences)
  std::vector<float> logits;  // copy of the pending logits when logprobs are asked
  // Tiers: the RAM hit found first, and the lookup in the tiers for something deeper.
  bool tier_asked = false;
  geist_cache::PrefixCache::Hit ram_hit;
  std::shared_ptr<geist_cache::PrefixCache::Fetch> fetch;
};

}  // namespace geist_serving
