// The exact automatic prefix cache: a RAM-budgeted store of session snapshot images, keyed by
// the token prefix they hold, under a namespace of everything else that changes the bits
// (model identity, KV mode, context, grid, cache_salt), over an optional chain of lower tiers
// (disk, Redis: cache/tier.h). Layout and rules: docs/SERVER.md "Prefix cache" and "Tiers".
//
// The cache knows nothing of sessions: it stores opaque images (the engine's snapshot reader
// validates each one on restore). Which states may be stored (prefill-produced, on the grid
// or at the prompt end) is the scheduler's rule.
//
// Tiers: every insert is also written down to every tier (write-through, so a restarted or
// another server finds it), by a background thread that encodes the entry
// (cache/entry_codec.h) and hands it to the tiers' own queues: never on the request path. A RAM
// miss is looked up in the tiers by fetch(), on a background thread: one contains() per tier
// for the batch of usable prefix lengths, then get() of the deepest one found, verified by the
// codec (namespace and tokens in full) and promoted to RAM. An object that fails is erased
// from its tier and counted (`rejected`). Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/image_buffer.h"
#include "cache/tier.h"
#include "geist/geist.h"

namespace geist_cache {

struct CacheStats {
  int64_t bytes = 0;  // bytes of images held (exact: the sum of image sizes)
  int64_t budget = 0;
  int64_t entries = 0;
  int64_t lookups = 0, hits = 0, hit_tokens = 0, inserts = 0, evictions = 0;
  // Tiers: lookups that went down (RAM had nothing as deep), their hits and the tokens those
  // restored, entries the write-through queue had no room for, and images the engine refused
  // to restore (dropped from RAM and every tier).
  int64_t tier_lookups = 0, tier_hits = 0, tier_hit_tokens = 0, spill_dropped = 0;
  int64_t restore_rejected = 0;
};

struct TierReport {
  std::string name;
  TierStats stats;
  int64_t rejected = 0;  // objects the tier returned that the codec refused (erased)
};

class PrefixCache {
 public:
  explicit PrefixCache(size_t budget_bytes, std::vector<std::unique_ptr<Tier>> tiers = {});
  // Hands what is queued to the tiers, then stops the threads (the tiers flush their own).
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  struct Hit {
    int32_t n_tokens = 0;  // 0: nothing usable
    Image image;           // stays valid while held, even if the entry is evicted meanwhile
  };
  // RAM only: the deepest entry whose tokens are a prefix of tokens[0, n): its length is n
  // itself or a multiple of `grid` below n (the only lengths a prefix may be reused at; the
  // session's prefill grid, geist_session_prefill_grid). Only lengths that some entry has are
  // tried, their keys hashed in one pass over the tokens: O(n + entries' distinct lengths),
  // whatever the grid.
  Hit lookup(const std::string& ns, const geist_token* tokens, size_t n, int32_t grid);
  bool contains(const std::string& ns, const geist_token* tokens, size_t n) const;
  // Stores an image of the state after prefilling tokens[0, n). Evicts by value (hits x tokens
  // saved per byte, then age) until it fits; an image larger than the budget is not kept in
  // RAM. Written through to the tiers either way.
  void insert(const std::string& ns, const geist_token* tokens, size_t n,
              std::vector<uint8_t> image);
  // A buffer of n bytes (contents unspecified) to take a snapshot into for insert(): a spare
  // one whose pages are resident when an image the cache let go of holds n (an evicted entry's
  // buffer comes back for the next checkpoint), else a fresh one. A fresh buffer's first touch
  // costs more than the snapshot written into it (a page fault per 4 KiB or 2 MiB page:
  // cache/image_buffer.h), so each call also has the pool fault in the next one off this
  // thread (BufferPool::keep_warm): from the second checkpoint on, while the cache fills, a
  // checkpoint finds resident pages too. Thread-safe; throws std::bad_alloc like vector::resize.
  std::vector<uint8_t> take_buffer(size_t n) {
    std::vector<uint8_t> v = image_buffers_->take(n);
    image_buffers_->keep_warm(n);
    return v;
  }
  CacheStats stats() const;

  // ---- tiers ----
  bool has_tiers() const { return !tiers_.empty(); }
  struct Fetch {
    std::atomic<bool> done{false};
    Hit hit;  // valid once done: a usable prefix deeper than asked, or none
  };
  // Looks the tiers up for a usable prefix of tokens deeper than `deeper_than`, in the
  // background; the result (promoted to RAM) is in the returned Fetch once `done`.
  std::shared_ptr<Fetch> fetch(const std::string& ns, std::vector<geist_token> tokens, int32_t grid,
                               int32_t deeper_than, Deadline deadline);
  // The engine refused to restore the image of tokens[0, n): a miss from now on, in RAM and
  // in every tier.
  void reject(const std::string& ns, const geist_token* tokens, size_t n);
  // Parked sessions: writes (ns, tokens, image) to the tiers only (queued, as write-through);
  // in_tiers says whether a tier holds it now; load_from_tiers reads and verifies it (null
  // when no tier has a valid copy). Blocking; not for the scheduler's thread.
  void store_in_tiers(const std::string& ns, const std::vector<geist_token>& tokens, Image image);
  bool in_tiers(const std::string& ns, const std::vector<geist_token>& tokens);
  Image load_from_tiers(const std::string& ns, const std::vector<geist_token>& tokens,
                        Deadline deadline);
  // Named records (a parked session's conversation): mutable objects under the key of
  // (`name`, no tokens), holding `tokens` and an opaque payload, in every tier. Each write
  // carries a generation, max(wall clock in µs, the last generation this cache saw of the
  // name + 1), so a write that follows a read of the record is newer whatever the clocks say.
  // put_record replaces what a tier holds (queued, as write-through). get_record reads every
  // tier and returns the valid copy of the highest generation (ties: the upper tier), so a
  // stale copy in a replica's own disk never wins over what another replica wrote to the
  // shared tier since; tiers that held an older copy are given the newest (queued). False
  // when no tier has a valid copy. erase_record removes it everywhere.
  void put_record(const std::string& name, const std::vector<geist_token>& tokens,
                  std::vector<uint8_t> payload);
  bool get_record(const std::string& name, Deadline deadline, std::vector<geist_token>* tokens,
                  std::vector<uint8_t>* payload);
  void erase_record(const std::string& name);
  std::vector<TierReport> tier_stats() const;
  // Waits until the write-through queue is empty (tests).
  void flush_to_tiers();

 private:
  struct Entry {
    std::string ns;
    std::vector<geist_token> tokens;
    Image image;
    int64_t hits = 0;
    uint64_t last_use = 0;  // logical clock
  };
  struct Spill {
    std::string ns;
    std::vector<geist_token> tokens;
    Image image;
    uint32_t to = 0;      // bit t: write to tier t
    bool record = false;  // a named record: keyed by its name alone, replaces the old one
  };
  struct FetchJob {
    std::string ns;
    std::vector<geist_token> tokens;
    int32_t grid = 0, deeper_than = 0;
    Deadline deadline;
    std::shared_ptr<Fetch> out;
  };
  static uint64_t key_of(const std::string& ns, const geist_token* tokens, size_t n);
  // key_of in steps: the namespace, then each token, then the final mix.
  static uint64_t key_begin(const std::string& ns);
  static uint64_t key_add(uint64_t h, geist_token t);
  static uint64_t key_end(uint64_t h);
  const Entry* find_locked(const std::string& ns, const geist_token* tokens, size_t n) const;
  const Entry* find_locked(uint64_t key, const std::string& ns, const geist_token* tokens,
                           size_t n) const;
  void erase_locked(std::unordered_multimap<uint64_t, Entry>::iterator it);
  void evict_for_locked(size_t need);
  // The entry's image (the one held already, or `image`, kept when it fits the budget).
  Image insert_locked(const std::string& ns, const geist_token* tokens, size_t n, Image image);
  uint32_t all_tiers() const { return tiers_.size() >= 32 ? ~0u : (1u << tiers_.size()) - 1; }
  void enqueue_spill(Spill s);
  void spill_worker();
  void fetch_worker();
  Hit fetch_now(const FetchJob& job);
  // get() + decode + match from tier t; erases and counts an object that fails.
  Image read_tier(size_t t, const std::string& key, const std::string& ns,
                  const geist_token* tokens, size_t n, Deadline deadline);

  size_t budget_;
  mutable std::mutex mu_;
  std::unordered_multimap<uint64_t, Entry> map_;
  std::map<size_t, int64_t> lens_;  // token lengths of the entries in map_ -> how many
  uint64_t clock_ = 0;
  std::unordered_map<std::string, uint64_t> record_gen_;  // name -> newest generation seen
  CacheStats st_;

  std::vector<std::unique_ptr<Tier>> tiers_;
  std::vector<std::atomic<int64_t>> rejected_;  // per tier
  // Every image RAM holds is a buffer of this pool (an inserted one, a tier hit's decoded
  // one): one RAM does not keep, or evicts later, gives its buffer back for the next
  // take_buffer() or tier read (at most 2 spare buffers, 1 GiB in all).
  std::shared_ptr<BufferPool> image_buffers_;
  std::mutex q_mu_;
  std::condition_variable spill_cv_, fetch_cv_, idle_cv_;
  std::deque<Spill> spills_;
  std::deque<FetchJob> fetches_;
  bool spilling_ = false, stop_ = false;
  std::thread spill_thread_, fetch_thread_;
};

}  // namespace geist_cache
