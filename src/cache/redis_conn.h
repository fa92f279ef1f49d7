// One connection to Redis with a deadline on everything: hiredis for the protocol (connect,
// command formatting, the reply parser), our own poll()/send()/recv() on its socket so that no
// call waits past the caller's deadline and no write raises SIGPIPE. Not thread-safe: one user
// at a time (the tier keeps a pool).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct redisContext;
struct redisReply;

namespace geist_cache {

using RedisDeadline = std::chrono::steady_clock::time_point;

// Where Redis is: redis://[[user]:password@]host[:port][/db] or unix:///path/to/socket[?db=N]
// (also unix://[[user]:password@]/path). TLS (rediss://) is not supported.
struct RedisEndpoint {
  std::string host;  // empty: unix socket at unix_path
  int port = 6379;
  std::string unix_path;
  int db = 0;
  std::string user, password;  // empty password: no AUTH
};
// False with *err set on a malformed URL.
bool parse_redis_url(const std::string& url, RedisEndpoint* out, std::string* err);
// The endpoint as a URL without its password, for logs.
std::string describe(const RedisEndpoint& ep);

struct ReplyFree {
  void operator()(redisReply* r) const;
};
using RedisReply = std::unique_ptr<redisReply, ReplyFree>;

enum class IoResult { kOk, kTimeout, kError };

class RedisConn {
 public:
  ~RedisConn();
  RedisConn(const RedisConn&) = delete;
  RedisConn& operator=(const RedisConn&) = delete;

  // Connects (non-blocking connect, waited on until `deadline`), then AUTH and SELECT as the
  // endpoint asks. nullptr with *err and *result (kTimeout or kError) on failure.
  static std::unique_ptr<RedisConn> open(const RedisEndpoint& ep, RedisDeadline deadline,
                                         IoResult* result, std::string* err);

  // Queues one command (arguments are binary-safe); send() writes everything queued.
  void append(const std::vector<std::string_view>& argv);
  IoResult send(RedisDeadline deadline, std::string* err);
  // The next reply, in command order. Error replies (REDIS_REPLY_ERROR) come back as kOk.
  IoResult read(RedisDeadline deadline, RedisReply* out, std::string* err);
  // append + send + read for one command.
  IoResult command(const std::vector<std::string_view>& argv, RedisDeadline deadline,
                   RedisReply* out, std::string* err);

  // After a timeout or an error the stream is out of step: the connection must be dropped.
  bool broken() const { return broken_; }
  // Marks the connection unusable (replies the caller will not read are still due).
  void abandon() { broken_ = true; }

 private:
  explicit RedisConn(redisContext* c) : c_(c) {}
  IoResult wait(short events, RedisDeadline deadline, std::string* err);

  redisContext* c_;
  std::string out_;           // formatted commands not yet sent
  std::vector<char> in_buf_;  // recv() buffer
  bool broken_ = false;
};

}  // namespace geist_cache
