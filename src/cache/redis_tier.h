// The Redis tier (`geist serve --redis URL`): objects shared by every replica that points at one
// Redis, stored as a manifest and parts (cache/redis_object.h) under a caller-given key prefix
// that binds them to what produced them. Design: docs/SERVER.md "Tiers" / "Redis".
//
// - Reads run on the caller's thread, bounded by the caller's deadline (connect included); a
//   pool of connections is reused between calls.
// - Writes (put, erase, the TTL refresh on a hit, deleting a bad object) go through one bounded
//   background queue served by one writer thread; put() only enqueues, and a full queue drops.
// - A circuit breaker: after `breaker.failures` failures in a row (connect errors, I/O errors,
//   a silent Redis past the deadline), nobody tries for a backoff period; then one probe.
//   Redis down, slow or full never fails a request: it only loses hits.
// - Every object verifies on read; anything that does not is a miss, counted in `corrupt` and
//   deleted (only if the manifest is still the one read: another replica may have rewritten it).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/circuit_breaker.h"
#include "cache/image_buffer.h"
#include "cache/redis_conn.h"
#include "cache/tier.h"

namespace geist_cache {

struct RedisTierConfig {
  RedisEndpoint endpoint;
  // Namespace of every key; the caller appends what binds the objects to their producer.
  std::string prefix = "geist:v1:";
  size_t part_bytes = size_t{8} << 20;  // largest stored value (part header included)
  int64_t ttl_seconds = 86400;          // on every key; refreshed when an object is hit
  size_t queue_items = 256;             // the write queue's bounds
  size_t queue_bytes = size_t{512} << 20;
  std::chrono::milliseconds write_timeout{2000};   // per command of the writer thread
  std::chrono::milliseconds stats_every{2000};     // INFO / DBSIZE refresh for TierStats
  std::chrono::milliseconds shutdown_flush{2000};  // the destructor waits this long, at most
  uint64_t max_object_bytes = uint64_t{16} << 30;
  size_t pool_max = 8;  // idle read connections kept
  CircuitBreaker::Config breaker;
  // One line per notable event (breaker opens / closes, a corrupt object and why). May be empty.
  std::function<void(const std::string&)> log;
};

class RedisTier : public Tier {
 public:
  // Starts the writer thread; does not connect (the first call does), so a server starts even
  // with Redis down.
  explicit RedisTier(RedisTierConfig cfg);
  // Gives queued writes up to shutdown_flush, then stops the writer (the rest is dropped).
  ~RedisTier() override;

  const char* name() const override { return "redis"; }
  bool put(const std::string& key, Image object) override;
  Image get(const std::string& key, Deadline deadline) override;
  std::vector<bool> contains(const std::vector<std::string>& keys, Deadline deadline) override;
  void erase(const std::string& key) override;
  TierStats stats() const override;

  // Waits until the write queue is empty and the writer idle, or `timeout` passes. For tests
  // and an orderly shutdown. True when drained.
  bool drain(std::chrono::milliseconds timeout);
  int64_t breaker_opens() const { return breaker_.opens(); }

 private:
  struct Job {
    enum class Kind { kPut, kErase, kTouch, kDeleteIf } kind;
    std::string key;
    Image object;                   // kPut
    std::vector<std::string> keys;  // kTouch, kDeleteIf: the keys (the manifest first)
    std::string expect;             // kDeleteIf: the manifest value read (empty: not a string)
  };

  std::unique_ptr<RedisConn> acquire(Deadline deadline, bool* reused);
  void release(std::unique_ptr<RedisConn> conn);
  // Records the outcome of a call for the breaker (and logs its transitions).
  void note_failure(const std::string& what, const std::string& err);
  void note_success();
  bool enqueue(Job job, bool bounded);
  Image get_once(RedisConn& conn, const std::string& key, Deadline deadline, bool* io_failed);
  void writer_loop();
  bool writer_conn(std::unique_ptr<RedisConn>& conn);
  void write_object(std::unique_ptr<RedisConn>& conn, const Job& job);
  void run_small(std::unique_ptr<RedisConn>& conn, const Job& job);
  void refresh_stats(std::unique_ptr<RedisConn>& conn);
  void log(const std::string& line) const;

  const RedisTierConfig cfg_;
  CircuitBreaker breaker_;

  mutable std::mutex pool_mu_;
  std::vector<std::unique_ptr<RedisConn>> pool_;

  std::mutex q_mu_;
  std::condition_variable q_cv_, idle_cv_;
  std::deque<Job> queue_;
  size_t queued_bytes_ = 0;
  bool busy_ = false, stop_ = false;
  std::mt19937_64 rng_;  // write ids (writer thread only)

  mutable std::mutex st_mu_;
  TierStats st_;
  // What get() assembles parts into: a buffer comes back once its object is dropped (one
  // spare, at most 1 GiB), so the next get copies into resident pages.
  std::shared_ptr<BufferPool> buffers_ = BufferPool::create(1, size_t{1} << 30);
  std::thread writer_;
};

}  // namespace geist_cache
