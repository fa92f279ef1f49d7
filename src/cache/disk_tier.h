// The disk tier (`geist serve --cache-dir DIR --cache-disk MiB`): one file per object in DIR,
// written to a temporary name, fsync'd, renamed, the directory fsync'd; each file carries its
// key, its length and an XXH3-128 over all of it, so a torn, truncated, corrupted or misplaced
// file is a miss (counted in `corrupt`, deleted), never a wrong answer. An LRU by bytes keeps
// the files within the budget; the index is rebuilt by scanning DIR at start (recency from
// the files' mtimes), so a restarted server is warm. Writes go through a bounded background
// queue; a failed write (disk full, I/O error, the directory gone) pauses writes for
// `retry_after_ms` (counted in put_errors; puts meanwhile are dropped) while reads go on.
// File layout: docs/SERVER.md "Tiers". Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/image_buffer.h"
#include "cache/tier.h"

namespace geist_cache {

struct DiskTierConfig {
  std::string dir;
  size_t budget_bytes = 0;                 // the files' bytes at most
  size_t queue_bytes = size_t{512} << 20;  // objects waiting to be written at most
  int32_t retry_after_ms = 5000;           // writes paused this long after a failed one
  // A read's buffer, once its object is dropped, is kept for the next read when at most this
  // large (one at a time: cache/image_buffer.h BufferPool), so a read lands in resident pages.
  size_t spare_read_bytes = size_t{1} << 30;
};

class DiskTier : public Tier {
 public:
  // Creates DIR if it is missing, deletes temporary files a crash left, and indexes the
  // objects there (evicting the least recent beyond the budget). Null with *err when DIR
  // cannot be created or read.
  static std::unique_ptr<DiskTier> open(const DiskTierConfig& cfg, std::string* err);
  // Writes what is queued (unless paused), then stops the writer.
  ~DiskTier() override;

  const char* name() const override { return "disk"; }
  bool put(const std::string& key, Image object) override;
  Image get(const std::string& key, Deadline deadline) override;
  std::vector<bool> contains(const std::vector<std::string>& keys, Deadline deadline) override;
  void erase(const std::string& key) override;
  TierStats stats() const override;

  // Waits until every queued write is done or dropped (tests, shutdown).
  void flush();
  // The file an object of `key` lives in ("" when the key cannot be a file name).
  std::string path_of(const std::string& key) const;

 private:
  explicit DiskTier(const DiskTierConfig& cfg);
  struct Item {
    int64_t file_bytes = 0;
    std::list<std::string>::iterator lru;  // into lru_, most recent first
  };
  void scan();
  void writer();
  bool write_file(const std::string& key, const std::vector<uint8_t>& object, std::string* err);
  void index_locked(const std::string& key, int64_t file_bytes);  // most recent
  void unindex_locked(const std::string& key);
  bool paused_locked() const;

  DiskTierConfig cfg_;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::unordered_map<std::string, Item> index_;
  std::list<std::string> lru_;
  int64_t bytes_ = 0;
  // Queued writes, oldest first; a get of a queued key is served from here.
  std::deque<std::pair<std::string, Image>> queue_;
  std::unordered_map<std::string, Image> pending_;
  size_t queue_bytes_ = 0;
  bool writing_ = false, stop_ = false;
  Deadline paused_until_{};
  TierStats st_;
  std::shared_ptr<BufferPool> buffers_;  // what get() reads into
  std::thread thread_;
};

// The file name an object key becomes: bytes outside [A-Za-z0-9._-] as %XX, then ".gobj";
// decode_file_name inverts it (false for a name it did not make).
std::string encode_file_name(const std::string& key);
bool decode_file_name(const std::string& name, std::string* key);

// Verifies the bytes of a file of `key` (magic, version, the key itself, lengths against
// `size` exactly, XXH3-128) and finds its payload. False for anything that does not check;
// never reads past `size`.
bool disk_file_payload(const uint8_t* f, size_t size, const std::string& key, size_t* payload_off,
                       size_t* payload_len);

}  // namespace geist_cache
