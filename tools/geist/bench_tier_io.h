// What `geist bench-tier` compares the tiers with (cmd_bench_tier.cpp): the raw costs of moving
// N bytes on this machine, measured in the same process: memcpy between warm buffers and into
// a fresh one, an XXH3 pass, a file read from the page cache and from the disk (after
// posix_fadvise DONTNEED, and with O_DIRECT where the file system allows it), and one Redis
// GET of a value of N bytes through hiredis; plus a redis-server of its own for the tier.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cli_common.h"

namespace geist_cli {

// A redis-server child on a free 127.0.0.1 port, no persistence, maxmemory bounded, its files
// in a fresh temp dir; stopped (SIGTERM, then SIGKILL after 5 s) and cleaned up by stop() or
// the destructor.
class RedisProcess {
 public:
  RedisProcess() = default;
  ~RedisProcess();
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;
  // Starts `binary` and waits up to 10 s for PING. False with *err set.
  bool start(const std::string& binary, size_t maxmemory_bytes, std::string* err);
  void stop();
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string dir_;
};

// The references, each timed `reps` times after one untimed run.
struct RawRefs {
  BenchStats memcpy_warm, memcpy_fresh, memcpy_fresh_huge, xxh3;
  BenchStats file_cached, file_dropped, file_direct;  // file_direct: all zero when unsupported
  bool direct_ok = false, dropped_ok = false;
  BenchStats redis_get;
  bool redis_ok = false;
  std::string note;  // why a reference is missing
};

// memcpy warm / into a fresh buffer (plain, and made by cache/image_buffer.h's fresh_buffer:
// huge pages asked for, zeroed, then copied) and XXH3-64 over n bytes.
void time_memory(size_t n, int reps, RawRefs* out);
// Reads the whole file at `path` (pread into a warm buffer) from the page cache, after
// dropping its pages (posix_fadvise DONTNEED; the file is fsync'd first), and with O_DIRECT.
void time_file(const std::string& path, int reps, RawRefs* out);
// SET then GET of one value of n bytes under `key` on the Redis at `url` (hiredis, blocking).
// The key is deleted after.
void time_redis_get(const std::string& url, const std::string& key, size_t n, int reps,
                    RawRefs* out);
// Drops the page cache's copy of a file (fsync + posix_fadvise DONTNEED). False when it could
// not be opened.
bool drop_file_cache(const std::string& path);

// Sum of STRLEN over the keys matching `pattern` on the Redis at `url`: the bytes its values
// hold. -1 on failure.
int64_t redis_value_bytes(const std::string& url, const std::string& pattern);
// Deletes the keys matching `pattern` (best effort).
void redis_delete_matching(const std::string& url, const std::string& pattern);

}  // namespace geist_cli
