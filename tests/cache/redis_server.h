// A real redis-server for tests: started on a unix socket in a fresh temp dir (and a free
// localhost TCP port when asked), no persistence, bounded memory; killed, paused or restarted
// on demand, stopped at the end. A raw hiredis client inspects and tampers with what the tier
// stored, so tests check Redis itself rather than the tier's own view.
#pragma once

#include <hiredis/hiredis.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "support/fixtures.h"

namespace geist::test {

bool redis_server_available();  // redis-server on PATH

// GEIST_REQUIRE_FIXTURES=1 (CI) makes a missing redis-server a failure; otherwise the test is
// skipped and one loud line says so.
#define GEIST_REQUIRE_REDIS()                                                         \
  do {                                                                                \
    if (!::geist::test::redis_server_available()) {                                   \
      if (::geist::test::fixtures_required()) {                                       \
        FAIL() << "redis-server required (GEIST_REQUIRE_FIXTURES=1) but not on PATH"; \
      }                                                                               \
      ::geist::test::note_redis_skip();                                               \
      GTEST_SKIP() << "redis-server not on PATH (scripts/install_deps.sh)";           \
    }                                                                                 \
  } while (0)
void note_redis_skip();

struct RawReply {
  int type = 0;  // REDIS_REPLY_*, 0: no reply (I/O error)
  long long integer = 0;
  std::string str;
  std::vector<std::string> elements;  // of an array of strings
};

class RedisServer {
 public:
  struct Options {
    int tcp_port = 0;  // 0: unix socket only; -1: pick a free port
    std::string maxmemory = "256mb";
    std::string policy = "noeviction";
    std::string password;
  };
  RedisServer() : RedisServer(Options{}) {}
  explicit RedisServer(Options opt);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  bool start(std::string* err);  // waits (up to 10 s) until it answers PING
  void kill();                   // SIGKILL: a crash; data lost
  void pause();                  // SIGSTOP: a hung Redis, connections stay open
  void resume();                 // SIGCONT
  void stop();

  std::string unix_url() const { return "unix://" + socket_; }
  const std::string& socket_path() const { return socket_; }
  int tcp_port() const { return opt_.tcp_port; }

  // One command through a fresh blocking connection (unix socket, AUTH if set).
  RawReply cmd(const std::vector<std::string>& argv) const;
  std::vector<std::string> keys(const std::string& pattern) const;

 private:
  Options opt_;
  std::string dir_, socket_;
  pid_t pid_ = -1;
};

}  // namespace geist::test
