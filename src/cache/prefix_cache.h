// The exact automatic prefix cache: a RAM-budgeted store of session snapshot images, keyed by
// the token prefix they hold, under a namespace of everything else that changes the bits
// (model, KV mode, context, cache_salt). Layout and rules: docs/SERVER.md "Prefix cache".
//
// The cache knows nothing of sessions: it stores opaque images (the engine's snapshot reader
// validates each one on restore). Which states may be stored (prefill-produced, on the grid
// or at the prompt end) is the scheduler's rule. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/tier.h"
#include "geist/geist.h"

namespace geist_cache {

struct CacheStats {
  int64_t bytes = 0;  // bytes of images held (exact: the sum of image sizes)
  int64_t budget = 0;
  int64_t entries = 0;
  int64_t lookups = 0, hits = 0, hit_tokens = 0, inserts = 0, evictions = 0;
};

class PrefixCache {
 public:
  explicit PrefixCache(size_t budget_bytes) : budget_(budget_bytes) {}

  struct Hit {
    int32_t n_tokens = 0;  // 0: nothing usable
    Image image;           // stays valid while held, even if the entry is evicted meanwhile
  };
  // The deepest entry whose tokens are a prefix of tokens[0, n): its length is n itself or a
  // multiple of `grid` below n (the only lengths a prefix may be reused at).
  Hit lookup(const std::string& ns, const geist_token* tokens, size_t n, int32_t grid);
  bool contains(const std::string& ns, const geist_token* tokens, size_t n) const;
  // Stores an image of the state after prefilling tokens[0, n). Evicts by value (hits x tokens
  // saved per byte, then age) until it fits; an image larger than the budget is not stored.
  void insert(const std::string& ns, const geist_token* tokens, size_t n,
              std::vector<uint8_t> image);
  CacheStats stats() const;

 private:
  struct Entry {
    std::string ns;
    std::vector<geist_token> tokens;
    Image image;
    int64_t hits = 0;
    uint64_t last_use = 0;  // logical clock
  };
  static uint64_t key_of(const std::string& ns, const geist_token* tokens, size_t n);
  const Entry* find_locked(const std::string& ns, const geist_token* tokens, size_t n) const;
  void evict_for_locked(size_t need);

  size_t budget_;
  mutable std::mutex mu_;
  std::unordered_multimap<uint64_t, Entry> map_;
  uint64_t clock_ = 0;
  CacheStats st_;
};

}  // namespace geist_cache
