#include "cache/redis_conn.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace geist_cache {
namespace {

bool parse_int(std::string_view s, int lo, int hi, int* out) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// %XX escapes in the user info (a password may hold '@' or ':').
bool percent_decode(std::string_view s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      *out += s[i];
      continue;
    }
    int v = 0;
    if (i + 2 >= s.size()) return false;
    auto [p, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
    if (ec != std::errc() || p != s.data() + i + 3) return false;
    *out += static_cast<char>(v);
    i += 2;
  }
  return true;
}

bool parse_userinfo(std::string_view ui, RedisEndpoint* ep, std::string* err) {
  const size_t colon = ui.find(':');
  std::string_view user =
      colon == std::string_view::npos ? std::string_view() : ui.substr(0, colon);
  std::string_view pass = colon == std::string_view::npos ? ui : ui.substr(colon + 1);
  if (!percent_decode(user, &ep->user) || !percent_decode(pass, &ep->password)) {
    *err = "bad %-escape in the Redis URL's user info";
    return false;
  }
  return true;
}

}  // namespace

bool parse_redis_url(const std::string& url, RedisEndpoint* out, std::string* err) {
  RedisEndpoint ep;
  std::string_view u(url);
  const bool is_unix = u.starts_with("unix://");
  if (u.starts_with("rediss://")) {
    *err = "rediss:// (TLS) is not supported; use redis:// or unix://";
    return false;
  }
  if (!is_unix && !u.starts_with("redis://")) {
    *err = "a Redis URL starts with redis:// or unix:// (got '" + url + "')";
    return false;
  }
  u.remove_prefix(is_unix ? 7 : 8);
  // User info ends at the last '@' before the path (a password may hold '/').
  const size_t at = u.rfind('@');
  if (at != std::string_view::npos) {
    if (!parse_userinfo(u.substr(0, at), &ep, err)) return false;
    u.remove_prefix(at + 1);
  }
  if (is_unix) {
    std::string_view path = u;
    const size_t q = u.find('?');
    if (q != std::string_view::npos) {
      path = u.substr(0, q);
      std::string_view query = u.substr(q + 1);
      if (!query.starts_with("db=") || !parse_int(query.substr(3), 0, 1 << 20, &ep.db)) {
        *err = "unix:// URLs take one query parameter, ?db=N";
        return false;
      }
    }
    if (!path.starts_with("/") || path.size() < 2) {
      *err = "unix:// needs an absolute socket path (unix:///path/to/redis.sock)";
      return false;
    }
    ep.unix_path = std::string(path);
    *out = std::move(ep);
    return true;
  }
  std::string_view hostport = u;
  const size_t slash = u.find('/');
  if (slash != std::string_view::npos) {
    hostport = u.substr(0, slash);
    std::string_view db = u.substr(slash + 1);
    if (!db.empty() && !parse_int(db, 0, 1 << 20, &ep.db)) {
      *err = "the Redis URL's database ('/N') must be a number";
      return false;
    }
  }
  std::string_view port;
  if (hostport.starts_with("[")) {  // [IPv6]:port
    const size_t close = hostport.find(']');
    if (close == std::string_view::npos) {
      *err = "unclosed '[' in the Redis URL";
      return false;
    }
    ep.host = std::string(hostport.substr(1, close - 1));
    std::string_view rest = hostport.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') {
        *err = "junk after ']' in the Redis URL";
        return false;
      }
      port = rest.substr(1);
    }
  } else {
    const size_t colon = hostport.rfind(':');
    ep.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) port = hostport.substr(colon + 1);
  }
  if (ep.host.empty()) {
    *err = "the Redis URL names no host";
    return false;
  }
  if (!port.empty() && !parse_int(port, 1, 65535, &ep.port)) {
    *err = "the Redis URL's port must be a number in 1..65535";
    return false;
  }
  *out = std::move(ep);
  return true;
}

std::string describe(const RedisEndpoint& ep) {
  std::string s;
  if (ep.host.empty()) {
    s.append("unix://").append(ep.unix_path);
    if (ep.db != 0) s.append("?db=").append(std::to_string(ep.db));
  } else {
    s.append("redis://").append(ep.host).append(":").append(std::to_string(ep.port));
    if (ep.db != 0) s.append("/").append(std::to_string(ep.db));
  }
  return s;
}

void ReplyFree::operator()(redisReply* r) const { freeReplyObject(r); }

RedisConn::~RedisConn() { redisFree(c_); }

std::unique_ptr<RedisConn> RedisConn::open(const RedisEndpoint& ep, RedisDeadline deadline,
                                           IoResult* result, std::string* err) {
  *result = IoResult::kError;
  // Non-blocking connect: connect() returns at once, poll() below waits until the deadline.
  redisContext* c = ep.host.empty() ? redisConnectUnixNonBlock(ep.unix_path.c_str())
                                    : redisConnectNonBlock(ep.host.c_str(), ep.port);
  if (c == nullptr) {
    *err = "out of memory";
    return nullptr;
  }
  if (c->err != 0) {
    *err = std::string("connect: ") + c->errstr;
    redisFree(c);
    return nullptr;
  }
  std::unique_ptr<RedisConn> conn(new RedisConn(c));
  *result = conn->wait(POLLOUT, deadline, err);
  if (*result != IoResult::kOk) return nullptr;
  int so_error = 0;
  socklen_t len = sizeof so_error;
  if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0 || so_error != 0) {
    *err = std::string("connect: ") + std::strerror(so_error != 0 ? so_error : errno);
    *result = IoResult::kError;
    return nullptr;
  }
  RedisReply r;
  if (!ep.password.empty()) {
    std::vector<std::string_view> argv{"AUTH"};
    if (!ep.user.empty()) argv.push_back(ep.user);
    argv.push_back(ep.password);
    *result = conn->command(argv, deadline, &r, err);
    if (*result != IoResult::kOk) return nullptr;
    if (r->type == REDIS_REPLY_ERROR) {
      *err = "AUTH refused: " + std::string(r->str, r->len);
      *result = IoResult::kError;
      return nullptr;
    }
  }
  if (ep.db != 0) {
    const std::string db = std::to_string(ep.db);
    *result = conn->command({"SELECT", db}, deadline, &r, err);
    if (*result != IoResult::kOk) return nullptr;
    if (r->type == REDIS_REPLY_ERROR) {
      *err = "SELECT refused: " + std::string(r->str, r->len);
      *result = IoResult::kError;
      return nullptr;
    }
  }
  return conn;
}

IoResult RedisConn::wait(short events, RedisDeadline deadline, std::string* err) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      broken_ = true;
      *err = "deadline passed";
      return IoResult::kTimeout;
    }
    pollfd p{c_->fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30)));
    if (n > 0) {
      if ((p.revents & (POLLERR | POLLNVAL)) != 0 && (p.revents & events) == 0) {
        broken_ = true;
        *err = "socket error";
        return IoResult::kError;
      }
      return IoResult::kOk;  // readable / writable, or hung up (recv() then reports it)
    }
    if (n < 0 && errno != EINTR) {
      broken_ = true;
      *err = std::string("poll: ") + std::strerror(errno);
      return IoResult::kError;
    }
  }
}

void RedisConn::append(const std::vector<std::string_view>& argv) {
  std::vector<const char*> ptrs(argv.size());
  std::vector<size_t> lens(argv.size());
  for (size_t i = 0; i < argv.size(); ++i) {
    ptrs[i] = argv[i].data();
    lens[i] = argv[i].size();
  }
  char* cmd = nullptr;
  const int n =
      redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), ptrs.data(), lens.data());
  if (n < 0 || cmd == nullptr) {
    broken_ = true;  // out of memory: send() reports it
    return;
  }
  out_.append(cmd, static_cast<size_t>(n));
  redisFreeCommand(cmd);
}

IoResult RedisConn::send(RedisDeadline deadline, std::string* err) {
  if (broken_) {
    *err = "connection unusable";
    return IoResult::kError;
  }
  size_t done = 0;
  while (done < out_.size()) {
    const ssize_t n =
        ::send(c_->fd, out_.data() + done, out_.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      const IoResult w = wait(POLLOUT, deadline, err);
      if (w != IoResult::kOk) return w;
      continue;
    }
    broken_ = true;
    *err = std::string("send: ") + std::strerror(errno);
    return IoResult::kError;
  }
  out_.clear();
  return IoResult::kOk;
}

IoResult RedisConn::read(RedisDeadline deadline, RedisReply* out, std::string* err) {
  if (broken_) {
    *err = "connection unusable";
    return IoResult::kError;
  }
  if (in_buf_.empty()) in_buf_.resize(size_t{256} << 10);
  for (;;) {
    void* reply = nullptr;
    if (redisReaderGetReply(c_->reader, &reply) != REDIS_OK) {
      broken_ = true;
      *err = std::string("protocol: ") + c_->reader->errstr;
      return IoResult::kError;
    }
    if (reply != nullptr) {
      out->reset(static_cast<redisReply*>(reply));
      return IoResult::kOk;
    }
    const ssize_t n = ::recv(c_->fd, in_buf_.data(), in_buf_.size(), MSG_DONTWAIT);
    if (n > 0) {
      if (redisReaderFeed(c_->reader, in_buf_.data(), static_cast<size_t>(n)) != REDIS_OK) {
        broken_ = true;
        *err = "protocol: reader refused input";
        return IoResult::kError;
      }
      continue;
    }
    if (n == 0) {
      broken_ = true;
      *err = "Redis closed the connection";
      return IoResult::kError;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      const IoResult w = wait(POLLIN, deadline, err);
      if (w != IoResult::kOk) return w;
      continue;
    }
    broken_ = true;
    *err = std::string("recv: ") + std::strerror(errno);
    return IoResult::kError;
  }
}

IoResult RedisConn::command(const std::vector<std::string_view>& argv, RedisDeadline deadline,
                            RedisReply* out, std::string* err) {
  append(argv);
  const IoResult s = send(deadline, err);
  if (s != IoResult::kOk) return s;
  return read(deadline, out, err);
}

}  // namespace geist_cache
