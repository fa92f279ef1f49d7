// A lower tier of the prefix cache and of parked sessions (RAM -> disk -> Redis): a store of
// opaque objects by key. The prefix cache moves entries it evicts from RAM down to its tiers
// and looks a RAM miss up in them, in order. Design and object layout: docs/SERVER.md "Tiers".
//
// Contract every tier keeps:
// - get() returns the exact bytes put() was given under that key, or nullptr. An object that
//   fails verification (torn, truncated, checksum, wrong key or namespace, stale part) is a
//   miss: counted in TierStats::corrupt and deleted. Never an exception, never a crash.
// - put() never blocks the request path for long: a tier that writes slowly queues the write
//   (bounded; a full queue drops it, counted) and may refuse while paused (disk full, Redis
//   down): serving goes on from the tiers above.
// - get() returns by `deadline` (a miss when it passes, counted in timeouts).
// - Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace geist_cache {

using Image = std::shared_ptr<const std::vector<uint8_t>>;
using Deadline = std::chrono::steady_clock::time_point;

struct TierStats {
  int64_t objects = 0, bytes = 0, budget = 0;  // what the tier holds (as far as it knows)
  int64_t gets = 0, hits = 0, corrupt = 0, timeouts = 0;
  int64_t puts = 0, put_errors = 0, dropped = 0;  // dropped: queue full or paused
  bool available = true;                          // false: paused / circuit open
};

class Tier {
 public:
  virtual ~Tier() = default;
  virtual const char* name() const = 0;  // "disk", "redis": the label in /metrics
  virtual bool put(const std::string& key, Image object) = 0;
  virtual Image get(const std::string& key, Deadline deadline) = 0;
  // Cheap presence check (an index, or one round trip for a batch): which of `keys` the tier
  // probably holds. A true here may still be a miss in get().
  virtual std::vector<bool> contains(const std::vector<std::string>& keys, Deadline deadline) = 0;
  virtual void erase(const std::string& key) = 0;
  virtual TierStats stats() const = 0;
};

}  // namespace geist_cache
