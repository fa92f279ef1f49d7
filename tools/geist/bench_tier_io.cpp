#include "bench_tier_io.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "cache/image_buffer.h"
#include "cache/redis_conn.h"
#include "cli_common.h"

namespace geist_cli {

namespace {

int free_tcp_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(s);
  return port;
}

struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextFree>;
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

Reply command(redisContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> p;
  std::vector<size_t> l;
  for (const std::string& a : argv) {
    p.push_back(a.data());
    l.push_back(a.size());
  }
  return Reply(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), p.data(), l.data())));
}

// A blocking hiredis connection to `url` (AUTH and SELECT as it says); null with *err.
Context redis_connect(const std::string& url, std::string* err) {
  geist_cache::RedisEndpoint ep;
  if (!geist_cache::parse_redis_url(url, &ep, err)) return nullptr;
  const timeval tv{10, 0};
  Context c(ep.host.empty() ? redisConnectUnixWithTimeout(ep.unix_path.c_str(), tv)
                            : redisConnectWithTimeout(ep.host.c_str(), ep.port, tv));
  if (!c || c->err != 0) {
    *err = c ? c->errstr : "out of memory";
    return nullptr;
  }
  redisSetTimeout(c.get(), timeval{60, 0});  // a GET of a few hundred MiB on a loaded machine
  if (!ep.password.empty()) {
    Reply r = ep.user.empty() ? command(c.get(), {"AUTH", ep.password})
                              : command(c.get(), {"AUTH", ep.user, ep.password});
    if (!r || r->type == REDIS_REPLY_ERROR) {
      *err = "AUTH failed";
      return nullptr;
    }
  }
  if (ep.db != 0) {
    Reply r = command(c.get(), {"SELECT", std::to_string(ep.db)});
    if (!r || r->type == REDIS_REPLY_ERROR) {
      *err = "SELECT failed";
      return nullptr;
    }
  }
  return c;
}

// Pre-faulted buffer of n bytes.
std::vector<uint8_t> warm_buffer(size_t n, uint8_t fill) { return std::vector<uint8_t>(n, fill); }

bool read_whole(int fd, uint8_t* dst, size_t n, size_t chunk) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, dst + got, std::min(chunk, n - got), static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

RedisProcess::~RedisProcess() { stop(); }

bool RedisProcess::start(const std::string& binary, size_t maxmemory_bytes, std::string* err) {
  char tmpl[] = "/tmp/geist_bench_redis_XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    *err = "mkdtemp failed";
    return false;
  }
  dir_ = tmpl;
  port_ = free_tcp_port();
  if (port_ == 0) {
    *err = "no free localhost port";
    return false;
  }
  std::vector<std::string> args{binary,
                                "--port",
                                std::to_string(port_),
                                "--bind",
                                "127.0.0.1",
                                "--save",
                                "",
                                "--appendonly",
                                "no",
                                "--dir",
                                dir_,
                                "--maxmemory",
                                std::to_string(maxmemory_bytes),
                                "--maxmemory-policy",
                                "noeviction",
                                "--logfile",
                                dir_ + "/redis.log",
                                "--daemonize",
                                "no"};
  pid_ = ::fork();
  if (pid_ < 0) {
    *err = "fork failed";
    return false;
  }
  if (pid_ == 0) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    _exit(127);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    std::string e;
    if (Context c = redis_connect(url(), &e)) {
      Reply r = command(c.get(), {"PING"});
      if (r && r->type == REDIS_REPLY_STATUS) return true;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      *err = "redis-server exited at start (see " + dir_ + "/redis.log)";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  *err = "redis-server did not answer PING within 10 s";
  stop();
  return false;
}

void RedisProcess::stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (::waitpid(pid_, nullptr, WNOHANG) != pid_) {
      if (std::chrono::steady_clock::now() >= until) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
  }
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    dir_.clear();
  }
}

void time_memory(size_t n, int reps, RawRefs* out) {
  std::vector<uint8_t> src = warm_buffer(n, 1), dst = warm_buffer(n, 2);
  std::vector<double> warm, fresh, fresh_huge, hash;
  uint64_t sink = 0;
  for (int r = 0; r <= reps; ++r) {
    double t0 = now_seconds();
    std::memcpy(dst.data(), src.data(), n);
    const double t_warm = now_seconds() - t0;
    sink += dst[n / 2];
    // A fresh allocation: the copy pays the first touch of every page.
    std::unique_ptr<uint8_t[]> f(new uint8_t[n]);
    t0 = now_seconds();
    std::memcpy(f.get(), src.data(), n);
    const double t_fresh = now_seconds() - t0;
    sink += f[n / 2];
    f.reset();
    std::vector<uint8_t> h;
    t0 = now_seconds();
    geist_cache::fresh_buffer(&h, n);
    std::memcpy(h.data(), src.data(), n);
    const double t_fresh_huge = now_seconds() - t0;
    sink += h[n / 2];
    t0 = now_seconds();
    sink += XXH3_64bits(src.data(), n);
    const double t_hash = now_seconds() - t0;
    if (r == 0) continue;
    warm.push_back(t_warm);
    fresh.push_back(t_fresh);
    fresh_huge.push_back(t_fresh_huge);
    hash.push_back(t_hash);
  }
  if (sink == 42) std::fprintf(stderr, " ");  // keeps the work observable
  out->memcpy_warm = summarize(warm);
  out->memcpy_fresh = summarize(fresh);
  out->memcpy_fresh_huge = summarize(fresh_huge);
  out->xxh3 = summarize(hash);
}

bool drop_file_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ::fdatasync(fd);  // dirty pages are not dropped
  const bool ok = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  ::close(fd);
  return ok;
}

void time_file(const std::string& path, int reps, RawRefs* out) {
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0 || sb.st_size <= 0) {
    out->note += "file reference: cannot stat " + path + "; ";
    return;
  }
  const size_t n = static_cast<size_t>(sb.st_size);
  std::vector<uint8_t> buf = warm_buffer(n, 3);
  std::vector<double> cached, dropped, direct;
  for (int r = 0; r <= reps; ++r) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    double t0 = now_seconds();
    const bool ok = read_whole(fd, buf.data(), n, n);
    const double t_cached = now_seconds() - t0;
    ::close(fd);
    if (!ok) return;
    out->dropped_ok = drop_file_cache(path);
    const int fd2 = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd2 < 0) return;
    t0 = now_seconds();
    read_whole(fd2, buf.data(), n, n);
    const double t_dropped = now_seconds() - t0;
    ::close(fd2);
    if (r > 0) {
      cached.push_back(t_cached);
      dropped.push_back(t_dropped);
    }
  }
  out->file_cached = summarize(cached);
  out->file_dropped = summarize(dropped);
  // O_DIRECT: aligned buffer and length (the file's tail rounds up to the block).
  const size_t align = 4096, len = (n + align - 1) / align * align;
  void* p = nullptr;
  if (::posix_memalign(&p, align, len) != 0) return;
  std::unique_ptr<uint8_t, decltype(&std::free)> abuf(static_cast<uint8_t*>(p), &std::free);
  std::memset(abuf.get(), 0, len);
  for (int r = 0; r <= reps; ++r) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0) {
      out->note += "O_DIRECT: not supported by this file system; ";
      return;
    }
    const double t0 = now_seconds();
    size_t got = 0;
    bool ok = true;
    while (got < n) {
      const ssize_t rd = ::pread(fd, abuf.get() + got, std::min<size_t>(len - got, size_t{8} << 20),
                                 static_cast<off_t>(got));
      if (rd < 0 && errno == EINTR) continue;
      if (rd <= 0) {
        ok = false;
        break;
      }
      got += static_cast<size_t>(rd);
    }
    const double t = now_seconds() - t0;
    ::close(fd);
    if (!ok) {
      out->note += "O_DIRECT: read refused; ";
      return;
    }
    if (r > 0) direct.push_back(t);
  }
  out->file_direct = summarize(direct);
  out->direct_ok = true;
}

void time_redis_get(const std::string& url, const std::string& key, size_t n, int reps,
                    RawRefs* out) {
  std::string err;
  Context c = redis_connect(url, &err);
  if (!c) {
    out->note += "raw GET: " + err + "; ";
    return;
  }
  std::string value(n, '\x5a');
  Reply set = command(c.get(), {"SET", key, value});
  if (!set || set->type == REDIS_REPLY_ERROR) {
    out->note += "raw GET: SET refused (" + std::string(set ? set->str : c->errstr) + "); ";
    return;
  }
  std::vector<double> t;
  for (int r = 0; r <= reps; ++r) {
    const double t0 = now_seconds();
    Reply g = command(c.get(), {"GET", key});
    const double dt = now_seconds() - t0;
    if (!g || g->type != REDIS_REPLY_STRING || g->len != n) {
      out->note += "raw GET: bad reply; ";
      break;
    }
    if (r > 0) t.push_back(dt);
  }
  command(c.get(), {"DEL", key});
  out->redis_get = summarize(t);
  out->redis_ok = !t.empty();
}

int64_t redis_value_bytes(const std::string& url, const std::string& pattern) {
  std::string err;
  Context c = redis_connect(url, &err);
  if (!c) return -1;
  Reply keys = command(c.get(), {"KEYS", pattern});
  if (!keys || keys->type != REDIS_REPLY_ARRAY) return -1;
  int64_t total = 0;
  for (size_t i = 0; i < keys->elements; ++i) {
    Reply len =
        command(c.get(), {"STRLEN", std::string(keys->element[i]->str, keys->element[i]->len)});
    if (!len || len->type != REDIS_REPLY_INTEGER) return -1;
    total += len->integer;
  }
  return total;
}

void redis_delete_matching(const std::string& url, const std::string& pattern) {
  std::string err;
  Context c = redis_connect(url, &err);
  if (!c) return;
  Reply keys = command(c.get(), {"KEYS", pattern});
  if (!keys || keys->type != REDIS_REPLY_ARRAY) return;
  for (size_t i = 0; i < keys->elements; ++i) {
    command(c.get(), {"DEL", std::string(keys->element[i]->str, keys->element[i]->len)});
  }
}

}  // namespace geist_cli
