// geist serve: the OpenAI-compatible HTTP server (src/server, docs/SERVER.md).
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "geist/geist.hpp"
#include "server/server.h"

namespace geist_cli {

const VerbSpec& serve_spec() {
  static const VerbSpec spec = {
      "serve",
      "-m FILE [--host H] [--port P] [--parallel N] [--ctx N] [options]",
      "Serves the model over HTTP with the OpenAI API (/v1/chat/completions, /v1/completions,\n"
      "/v1/models), llama-server's extras (/health, /tokenize, /detokenize, /apply-template,\n"
      "/metrics) and an exact automatic prefix cache. One log line per request on stderr.\n"
      "Stops on SIGINT / SIGTERM. See docs/SERVER.md.",
      {
          {"-m", "--model", "FILE", "GGUF model (required)"},
          {nullptr, "--host", "H", "address to listen on (default 127.0.0.1)"},
          {nullptr, "--port", "P", "TCP port (default 8080; 0: any free port)"},
          {nullptr, "--parallel", "N", "sequences decoded together (default 1, at most 256)"},
          {nullptr, "--ctx", "N",
           "context of each sequence in tokens (default: min(training "
           "context, 4096))"},
          {nullptr, "--kv-mode", "M", "KV cache: f32, f16 (default), q8, q4, kivi4, kivi2"},
          {"-t", "--threads", "T",
           "compute threads per sequence (default: all cores; at most "
           "1024)"},
          {nullptr, "--cache-ram", "MiB", "prefix cache RAM budget (default 1024; 0: off)"},
          {nullptr, "--cache-dir", "DIR",
           "disk tier: prefix-cache entries and parked sessions as files in DIR, kept across "
           "restarts"},
          {nullptr, "--cache-disk", "MiB", "disk tier budget (default 4096)"},
          {nullptr, "--redis", "URL",
           "Redis tier shared by replicas: redis://[:PASSWORD@]HOST[:PORT][/DB] or "
           "unix:///PATH[?db=N] (password also from $GEIST_REDIS_PASSWORD)"},
          {nullptr, "--redis-ttl", "SECONDS",
           "expiry of Redis objects, refreshed on each hit (default 86400)"},
          {nullptr, "--park-after", "SECONDS",
           "park named sessions idle this long out of RAM into the tiers (default 0: never)"},
          {nullptr, "--api-key", "KEY", "require 'Authorization: Bearer KEY' (not on /health)"},
          {nullptr, "--alias", "NAME", "model id in responses (default: the file name)"},
          {nullptr, "--chat-template", "FILE", "Jinja chat template instead of the model's"},
          {nullptr, "--queue", "N",
           "requests that may wait for a sequence (default 64; more: "
           "503 with Retry-After)"},
          {nullptr, "--batch", "N", "token budget of one scheduler step (default 512)"},
          {nullptr, "--max-body", "BYTES",
           "largest request body accepted (default 8 MiB; "
           "more: 413)"},
          {nullptr, "--ping-ms", "MS", "idle time before an SSE ': ping' (default 1000)"},
      }};
  return spec;
}

int cmd_serve(int argc, char** argv) {
  const VerbSpec& spec = serve_spec();
  Args args;
  if (int rc = parse_verb_args(spec, argc, argv, &args); rc >= 0) return rc;
  if (!args.has("--model")) {
    cli_error(spec.name, "missing -m FILE (the model to serve)");
    return kExitUsage;
  }
  geist_server::ServerConfig cfg;
  cfg.model_path = args.str("--model");
  int32_t port = 8080, parallel = 1, ctx = 0, threads = 0, cache_mib = 1024, queue = 64;
  int32_t batch = 512, max_body = 8 << 20, ping_ms = 1000, cache_disk_mib = 4096, park_after = 0;
  int32_t redis_ttl = 86400;
  if (!args.get_i32("--port", &port) || !args.get_i32("--parallel", &parallel) ||
      !args.get_i32("--ctx", &ctx) || !args.get_i32("--threads", &threads) ||
      !args.get_i32("--cache-ram", &cache_mib) || !args.get_i32("--queue", &queue) ||
      !args.get_i32("--batch", &batch) || !args.get_i32("--max-body", &max_body) ||
      !args.get_i32("--ping-ms", &ping_ms) || !args.get_i32("--cache-disk", &cache_disk_mib) ||
      !args.get_i32("--park-after", &park_after) || !args.get_i32("--redis-ttl", &redis_ttl)) {
    return kExitUsage;
  }
  struct Range {
    const char* name;
    int32_t v, lo, hi;
  };
  for (const Range& r :
       {Range{"--port", port, 0, 65535}, Range{"--parallel", parallel, 1, 256},
        Range{"--ctx", ctx, 0, 1 << 24}, Range{"--threads", threads, 0, 1024},
        Range{"--cache-ram", cache_mib, 0, 1 << 22}, Range{"--queue", queue, 0, 4096},
        Range{"--batch", batch, 1, 1 << 20}, Range{"--max-body", max_body, 1024, 1 << 30},
        Range{"--ping-ms", ping_ms, 10, 600000}, Range{"--cache-disk", cache_disk_mib, 1, 1 << 24},
        Range{"--park-after", park_after, 0, 1 << 24},
        Range{"--redis-ttl", redis_ttl, 1, 1 << 30}}) {
    if (r.v < r.lo || r.v > r.hi) {
      cli_error(spec.name, "%s must be in [%d, %d], got %d", r.name, r.lo, r.hi, r.v);
      return kExitUsage;
    }
  }
  if (args.has("--kv-mode") &&
      !parse_kv_mode(spec.name, args.str("--kv-mode"), &cfg.sched.kv_mode)) {
    return kExitUsage;
  }
  if (args.has("--backend")) {  // validated by parse_args
    (void)geist::backend_from_name(args.str("--backend"), &cfg.backend);
  }
  if (args.has("--host")) cfg.host = args.str("--host");
  if (args.has("--api-key")) cfg.api_key = args.str("--api-key");
  if (args.has("--alias")) cfg.alias = args.str("--alias");
  if (args.has("--chat-template")) cfg.chat_template_file = args.str("--chat-template");
  if (args.has("--cache-dir")) cfg.cache_dir = args.str("--cache-dir");
  if (args.has("--cache-disk") && cfg.cache_dir.empty()) {
    cli_error(spec.name, "--cache-disk needs --cache-dir DIR");
    return kExitUsage;
  }
  cfg.cache_disk_bytes = static_cast<size_t>(cache_disk_mib) << 20;
  if (args.has("--redis")) cfg.redis_url = args.str("--redis");
  if (args.has("--redis-ttl") && cfg.redis_url.empty()) {
    cli_error(spec.name, "--redis-ttl needs --redis URL");
    return kExitUsage;
  }
  if (const char* pw = std::getenv("GEIST_REDIS_PASSWORD")) cfg.redis_password = pw;
  cfg.redis_ttl_s = redis_ttl;
  cfg.park_after_s = park_after;
  cfg.port = port;
  cfg.max_body_bytes = static_cast<size_t>(max_body);
  cfg.ping_ms = ping_ms;
  cfg.sched.n_parallel = parallel;
  cfg.sched.n_ctx = ctx;
  cfg.sched.n_threads = threads;
  cfg.sched.queue_max = queue;
  cfg.sched.step_tokens = batch;
  cfg.sched.cache_bytes = static_cast<size_t>(cache_mib) << 20;

  // SIGINT / SIGTERM end the server from a thread that waits for them (every other thread
  // inherits the blocked mask); a closed client socket must not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  geist_server::Server server(cfg);
  std::thread sig([&] {
    int signo = 0;
    sigwait(&set, &signo);
    if (signo != 0) {
      std::fprintf(stderr, "geist serve: signal %d, stopping\n", signo);
      server.stop();
    }
  });
  const int rc = server.run();
  if (sig.joinable()) {
    pthread_kill(sig.native_handle(), SIGTERM);  // wakes the waiter if the server ended itself
    sig.join();
  }
  return rc;
}

}  // namespace geist_cli
