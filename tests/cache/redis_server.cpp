#include "cache/redis_server.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace geist::test {
namespace {

int free_tcp_port() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(s);
  return port;
}

}  // namespace

bool redis_server_available() {
  return std::system("command -v redis-server >/dev/null 2>&1") == 0;
}

void note_redis_skip() {
  static bool said = false;  // test-process bookkeeping: one loud line per run
  if (!said) {
    std::fprintf(stderr,
                 "\n*** WARNING: SKIPPING REDIS TESTS: redis-server is not installed "
                 "(scripts/install_deps.sh) ***\n\n");
    said = true;
  }
}

RedisServer::RedisServer(Options opt) : opt_(std::move(opt)) {
  if (opt_.tcp_port < 0) opt_.tcp_port = free_tcp_port();
  char tmpl[] = "/tmp/geist_redis_XXXXXX";
  if (mkdtemp(tmpl) != nullptr) dir_ = tmpl;
  socket_ = dir_ + "/redis.sock";
}

RedisServer::~RedisServer() {
  stop();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

bool RedisServer::start(std::string* err) {
  if (dir_.empty()) {
    *err = "mkdtemp failed";
    return false;
  }
  std::vector<std::string> args{"redis-server",
                                "--port",
                                std::to_string(opt_.tcp_port),
                                "--bind",
                                "127.0.0.1",
                                "--unixsocket",
                                socket_,
                                "--unixsocketperm",
                                "700",
                                "--dir",
                                dir_,
                                "--save",
                                "",
                                "--appendonly",
                                "no",
                                "--maxmemory",
                                opt_.maxmemory,
                                "--maxmemory-policy",
                                opt_.policy,
                                "--logfile",
                                dir_ + "/redis.log",
                                "--daemonize",
                                "no"};
  if (!opt_.password.empty()) {
    args.push_back("--requirepass");
    args.push_back(opt_.password);
  }
  pid_ = fork();
  if (pid_ < 0) {
    *err = "fork failed";
    return false;
  }
  if (pid_ == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp("redis-server", argv.data());
    _exit(127);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    if (cmd({"PING"}).str == "PONG") return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      *err = "redis-server exited at start (see " + dir_ + "/redis.log)";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  *err = "redis-server did not answer PING within 10 s";
  return false;
}

void RedisServer::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  std::error_code ec;
  std::filesystem::remove(socket_, ec);
}

void RedisServer::pause() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void RedisServer::resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

void RedisServer::stop() { kill(); }

RawReply RedisServer::cmd(const std::vector<std::string>& argv) const {
  RawReply out;
  timeval tv{2, 0};
  redisContext* c = redisConnectUnixWithTimeout(socket_.c_str(), tv);
  if (c == nullptr || c->err != 0) {
    if (c != nullptr) redisFree(c);
    return out;
  }
  redisSetTimeout(c, tv);
  auto run = [&](const std::vector<std::string>& a) -> redisReply* {
    std::vector<const char*> p;
    std::vector<size_t> l;
    for (const auto& s : a) {
      p.push_back(s.data());
      l.push_back(s.size());
    }
    return static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(a.size()), p.data(), l.data()));
  };
  if (!opt_.password.empty()) {
    if (redisReply* r = run({"AUTH", opt_.password})) freeReplyObject(r);
  }
  if (redisReply* r = run(argv)) {
    out.type = r->type;
    out.integer = r->integer;
    if (r->str != nullptr) out.str.assign(r->str, r->len);
    for (size_t i = 0; i < r->elements; ++i) {
      if (r->element[i]->str != nullptr) {
        out.elements.emplace_back(r->element[i]->str, r->element[i]->len);
      }
    }
    freeReplyObject(r);
  }
  redisFree(c);
  return out;
}

std::vector<std::string> RedisServer::keys(const std::string& pattern) const {
  return cmd({"KEYS", pattern}).elements;
}

}  // namespace geist::test
