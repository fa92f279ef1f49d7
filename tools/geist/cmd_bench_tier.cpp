// geist bench-tier: what a prefix hit from each tier of the server's cache costs. Per prefix
// length: the time to first token of a suffix after a hit from RAM, from the disk tier (page
// cache warm, and after its pages were dropped) and from the Redis tier, against the suffix
// alone (the state already in place) and a full prefill; the bytes each tier moves and its
// GB/s next to what moving those bytes costs on this machine (memcpy between warm buffers, a
// file read, one Redis GET: bench_tier_io.h). It drives the server's own cache layer
// (src/cache: PrefixCache over DiskTier and RedisTier, lookups and background fetches as the
// scheduler makes them) and sessions through the public API. Not a test: it prints numbers
// and whether the targets of issue 24 are met, and fails only when something cannot run.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_tier_io.h"
#include "cache/disk_tier.h"
#include "cache/entry_codec.h"
#include "cache/prefix_cache.h"
#include "cache/redis_tier.h"
#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "geist/geist.hpp"

namespace geist_cli {
namespace {

constexpr const char* kVerb = "bench-tier";
constexpr int32_t kGrid = 64;  // the scheduler's prefix grid (src/serving/scheduler.h)

using geist_cache::PrefixCache;

struct Path {
  int64_t bytes = 0;                // what the tier moves per hit
  BenchStats fetch, restore, ttft;  // seconds: tier read, engine restore, to the first token
};

struct Result {
  size_t image_bytes = 0;
  BenchStats full, suffix;  // TTFT of a full prefill; of the suffix with the state in place
  BenchStats verified;      // geist_session_restore of the image (its XXH3 checksum included)
  Path ram, disk, disk_cold, redis;
  RawRefs refs;
};

struct Setup {
  int32_t prefix = 0, suffix = 32, threads = 1, reps = 3, full_runs = 1, kv_mode = 0;
  std::string model_name, dir, redis_url;
};

bool fail(const SessionHandle& s, const char* what) {
  cli_error(kVerb, "%s failed: %s", what, s.last_error());
  return false;
}

// Prefill of toks[from, end) and one greedy decode: the first token.
bool first_token(SessionHandle& s, const std::vector<geist_token>& toks, size_t from) {
  if (s.prefill(toks.data() + from, toks.size() - from) != GEIST_OK) return fail(s, "prefill");
  geist_token t = 0;
  if (s.decode(&t) != GEIST_OK) return fail(s, "decode");
  return true;
}

std::unique_ptr<geist_cache::DiskTier> open_disk(const Setup& su, size_t image_bytes,
                                                 geist_cache::DiskTier** raw) {
  geist_cache::DiskTierConfig cfg;
  cfg.dir = su.dir + "/disk-" + std::to_string(su.prefix);
  cfg.budget_bytes = 2 * image_bytes + (size_t{64} << 20);
  cfg.queue_bytes = std::max(cfg.queue_bytes, 2 * image_bytes);
  std::string err;
  auto t = geist_cache::DiskTier::open(cfg, &err);
  if (!t) cli_error(kVerb, "disk tier: %s", err.c_str());
  *raw = t.get();
  return t;
}

std::unique_ptr<geist_cache::RedisTier> open_redis(const Setup& su, size_t image_bytes,
                                                   const std::string& prefix,
                                                   geist_cache::RedisTier** raw) {
  geist_cache::RedisTierConfig cfg;
  std::string err;
  if (!geist_cache::parse_redis_url(su.redis_url, &cfg.endpoint, &err)) {
    cli_error(kVerb, "--redis: %s", err.c_str());
    return nullptr;
  }
  cfg.prefix = prefix;
  cfg.queue_bytes = std::max(cfg.queue_bytes, 2 * image_bytes);
  cfg.write_timeout = std::chrono::milliseconds(60000);
  cfg.ttl_seconds = 3600;
  auto t = std::make_unique<geist_cache::RedisTier>(cfg);
  *raw = t.get();
  return t;
}

std::vector<std::unique_ptr<geist_cache::Tier>> just(std::unique_ptr<geist_cache::Tier> t) {
  std::vector<std::unique_ptr<geist_cache::Tier>> v;
  v.push_back(std::move(t));
  return v;
}

// Times one kind of hit: `get` returns the image (RAM lookup or a tier fetch), then restore
// into the warm session and the suffix to the first token.
template <class Get>
bool time_path(SessionHandle& dst, const std::vector<geist_token>& toks, size_t np, int32_t reps,
               Get get, const std::function<void()>& before, Path* out) {
  std::vector<double> fetch, restore, ttft;
  for (int32_t r = 0; r <= reps; ++r) {  // run 0 warms up
    if (before) before();
    const double t0 = now_seconds();
    geist_cache::Image img = get();
    const double t1 = now_seconds();
    if (!img) {
      cli_error(kVerb, "a hit expected, none came back (see the tier's counters)");
      return false;
    }
    // As the scheduler does: the bytes were verified on their way into the cache.
    if (dst.restore_trusted(img->data(), img->size()) != GEIST_OK) return fail(dst, "restore");
    const double t2 = now_seconds();
    if (!first_token(dst, toks, np)) return false;
    const double t3 = now_seconds();
    if (r == 0) continue;
    fetch.push_back(t1 - t0);
    restore.push_back(t2 - t1);
    ttft.push_back(t3 - t0);
  }
  out->fetch = summarize(fetch);
  out->restore = summarize(restore);
  out->ttft = summarize(ttft);
  return true;
}

// A fetch as the scheduler makes it (the background thread), waited for.
geist_cache::Image fetch_wait(PrefixCache& c, const std::string& ns,
                              const std::vector<geist_token>& toks, size_t np) {
  auto f = c.fetch(ns, toks, kGrid, 0, std::chrono::steady_clock::now() + std::chrono::minutes(2));
  while (!f->done.load()) std::this_thread::yield();
  return f->hit.n_tokens == static_cast<int32_t>(np) ? f->hit.image : nullptr;
}

bool run_case(const ModelHandle& m, const Setup& su, Result* out) {
  geist_session_params sp;
  geist_session_params_default(&sp);
  sp.kv_mode = su.kv_mode;
  sp.n_threads = su.threads;
  sp.max_seq_len = su.prefix + su.suffix + 1;
  sp.sampler.temperature = 0;
  SessionHandle src, dst;
  if (SessionHandle::create(m, &src, &sp) != GEIST_OK ||
      SessionHandle::create(m, &dst, &sp) != GEIST_OK) {
    cli_error(kVerb, "cannot create a session: %s", m.last_error());
    return false;
  }
  const int32_t n_vocab = m.n_vocab();
  std::mt19937 rng(42);  // random ids away from the special tokens at the vocabulary's ends
  std::uniform_int_distribution<int32_t> pick(std::min(n_vocab - 1, 10),
                                              std::max(0, n_vocab - 300));
  std::vector<geist_token> toks(static_cast<size_t>(su.prefix + su.suffix));
  for (geist_token& t : toks) t = pick(rng);
  const size_t np = static_cast<size_t>(su.prefix);

  // The state after the prefix, as the scheduler stores it at a grid point.
  if (src.prefill(toks.data(), np) != GEIST_OK) return fail(src, "prefill");
  size_t size = 0, written = 0;
  if (src.snapshot_size(&size) != GEIST_OK) return fail(src, "snapshot size");
  std::vector<uint8_t> image(size);
  if (src.snapshot(image.data(), image.size(), &written) != GEIST_OK) {
    return fail(src, "snapshot");
  }
  image.resize(written);
  out->image_bytes = image.size();
  const std::string ns = "bench-tier/" + su.model_name + "/" + geist::kv_mode_name(su.kv_mode);
  const std::string key = geist_cache::entry_key(ns, toks.data(), np);

  PrefixCache ram(2 * image.size() + (size_t{1} << 20));
  ram.insert(ns, toks.data(), np, image);
  out->ram.bytes = static_cast<int64_t>(image.size());

  geist_cache::DiskTier* disk = nullptr;
  auto disk_tier = open_disk(su, image.size(), &disk);
  if (!disk_tier) return false;
  PrefixCache on_disk(0, just(std::move(disk_tier)));  // RAM budget 0: every hit reads the file
  on_disk.insert(ns, toks.data(), np, image);
  on_disk.flush_to_tiers();
  disk->flush();
  const std::string file = disk->path_of(key);
  struct stat sb;
  if (::stat(file.c_str(), &sb) != 0) {
    cli_error(kVerb, "the disk tier did not write the entry (%s)", file.c_str());
    return false;
  }
  out->disk.bytes = out->disk_cold.bytes = static_cast<int64_t>(sb.st_size);

  const std::string rprefix =
      "geist:bench:" + std::to_string(::getpid()) + ":" + std::to_string(su.prefix) + ":";
  geist_cache::RedisTier* redis = nullptr;
  auto redis_tier = open_redis(su, image.size(), rprefix, &redis);
  if (!redis_tier) return false;
  PrefixCache in_redis(0, just(std::move(redis_tier)));
  in_redis.insert(ns, toks.data(), np, image);
  in_redis.flush_to_tiers();
  if (!redis->drain(std::chrono::minutes(2)) || redis->stats().put_errors != 0 ||
      !in_redis.in_tiers(ns, std::vector<geist_token>(toks.begin(), toks.begin() + np))) {
    cli_error(kVerb, "the Redis tier did not store the entry (maxmemory? see its log)");
    return false;
  }
  out->redis.bytes = redis_value_bytes(su.redis_url, rprefix + "*");

  // The suffix alone: the state restored untimed, then the suffix to the first token.
  std::vector<double> suffix_s, verified_s;
  for (int32_t r = 0; r <= su.reps; ++r) {
    const double t0 = now_seconds();
    if (dst.restore(image.data(), image.size()) != GEIST_OK) return fail(dst, "restore");
    const double t1 = now_seconds();
    if (!first_token(dst, toks, np)) return false;
    if (r == 0) continue;
    suffix_s.push_back(now_seconds() - t1);
    verified_s.push_back(t1 - t0);
  }
  out->suffix = summarize(suffix_s);
  out->verified = summarize(verified_s);

  const std::function<void()> none;
  const auto ram_get = [&] {
    PrefixCache::Hit h = ram.lookup(ns, toks.data(), toks.size(), kGrid);
    return h.n_tokens == static_cast<int32_t>(np) ? h.image : nullptr;
  };
  if (!time_path(dst, toks, np, su.reps, ram_get, none, &out->ram)) return false;
  const auto disk_get = [&] { return fetch_wait(on_disk, ns, toks, np); };
  if (!time_path(dst, toks, np, su.reps, disk_get, none, &out->disk)) return false;
  const std::function<void()> drop = [&] { drop_file_cache(file); };
  if (!time_path(dst, toks, np, su.reps, disk_get, drop, &out->disk_cold)) return false;
  const auto redis_get = [&] { return fetch_wait(in_redis, ns, toks, np); };
  if (!time_path(dst, toks, np, su.reps, redis_get, none, &out->redis)) return false;

  std::vector<double> full_s;  // the source's prefill has just paged the weights in
  for (int32_t r = 0; r < su.full_runs; ++r) {
    if (dst.reset() != GEIST_OK) return fail(dst, "reset");
    const double t0 = now_seconds();
    if (!first_token(dst, toks, 0)) return false;
    full_s.push_back(now_seconds() - t0);
  }
  out->full = summarize(full_s);

  time_memory(image.size(), su.reps, &out->refs);
  time_file(file, su.reps, &out->refs);
  time_redis_get(su.redis_url, rprefix + "raw",
                 static_cast<size_t>(std::max<int64_t>(out->redis.bytes, 1)), su.reps, &out->refs);
  redis_delete_matching(su.redis_url, rprefix + "*");  // a shared Redis keeps nothing of ours
  return true;
}

double gbps(int64_t bytes, double s) { return s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0; }

std::string copy_cell(const BenchStats& t, int64_t bytes) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2f (%.2f) [%.2f-%.2f]", t.median * 1e3, gbps(bytes, t.median),
                t.min * 1e3, t.max * 1e3);
  return buf;
}

std::string time_cell(const BenchStats& t) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f [%.1f-%.1f]", t.median * 1e3, t.min * 1e3, t.max * 1e3);
  return buf;
}

std::string mib(int64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(b) / 1048576.0);
  return buf;
}

void print_rows(const Setup& su, const Result& r) {
  const char* kv = geist::kv_mode_name(su.kv_mode);
  auto row = [&](const char* path, const std::string& bytes, const std::string& fetch,
                 const std::string& restore, const std::string& ttft, const char* ref,
                 const std::string& ref_cell) {
    std::printf("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", su.model_name.c_str(), kv,
                su.prefix, path, bytes.c_str(), fetch.c_str(), restore.c_str(), ttft.c_str(), ref,
                ref_cell.c_str());
  };
  const int64_t img = static_cast<int64_t>(r.image_bytes);
  const RawRefs& x = r.refs;
  row("full prefill", "-", "-", "-", time_cell(r.full), "-", "-");
  row("suffix only", "-", "-", "-", time_cell(r.suffix), "-", "-");
  char lookup[48];  // a RAM lookup moves no bytes: its time alone
  std::snprintf(lookup, sizeof lookup, "lookup %.4f", r.ram.fetch.median * 1e3);
  row("RAM", mib(r.ram.bytes), lookup, copy_cell(r.ram.restore, img), time_cell(r.ram.ttft),
      "memcpy, warm buffers", copy_cell(x.memcpy_warm, img));
  row("disk, page cache", mib(r.disk.bytes), copy_cell(r.disk.fetch, r.disk.bytes),
      copy_cell(r.disk.restore, img), time_cell(r.disk.ttft), "pread, page cache",
      copy_cell(x.file_cached, r.disk.bytes));
  row("disk, pages dropped", mib(r.disk_cold.bytes), copy_cell(r.disk_cold.fetch, r.disk.bytes),
      copy_cell(r.disk_cold.restore, img), time_cell(r.disk_cold.ttft),
      x.direct_ok ? "pread, O_DIRECT" : "pread after DONTNEED",
      x.direct_ok ? copy_cell(x.file_direct, r.disk.bytes)
                  : copy_cell(x.file_dropped, r.disk.bytes));
  row("Redis", mib(r.redis.bytes), copy_cell(r.redis.fetch, r.redis.bytes),
      copy_cell(r.redis.restore, img), time_cell(r.redis.ttft), "one GET of as many bytes",
      x.redis_ok ? copy_cell(x.redis_get, r.redis.bytes) : "n/a");
  row("(reference)", mib(img), "-", "-", "-", "memcpy into a fresh buffer",
      copy_cell(x.memcpy_fresh, img));
  row("(reference)", mib(img), "-", "-", "-", "fresh_buffer (huge pages) + memcpy",
      copy_cell(x.memcpy_fresh_huge, img));
  row("(reference)", mib(img), "-", "-", "-", "XXH3-64 over the image", copy_cell(x.xxh3, img));
  row("(reference)", mib(img), "-", "-", "-", "geist_session_restore (checksum included)",
      copy_cell(r.verified, img));
  if (x.direct_ok) {
    row("(reference)", mib(r.disk.bytes), "-", "-", "-", "pread after DONTNEED",
        copy_cell(x.file_dropped, r.disk.bytes));
  }
}

void print_targets(const Setup& su, const Result& r) {
  const double ram_s = r.ram.fetch.median + r.ram.restore.median;
  const double ratio = gbps(r.ram.bytes, ram_s) / gbps(r.ram.bytes, r.refs.memcpy_warm.median);
  const double share = ram_s / r.suffix.median;
  std::printf(
      "%s prefix %d: a RAM hit moves its image at %.2f GB/s = %.2fx memcpy between warm buffers "
      "(target >= 0.8x: %s); lookup + restore = %.2f ms = %.1f %% of the suffix's %.1f ms TTFT "
      "(target <= 5 %%: %s); RAM hit TTFT %.1fx sooner than a full prefill\n",
      su.model_name.c_str(), su.prefix, gbps(r.ram.bytes, ram_s), ratio,
      ratio >= 0.8 ? "met" : "NOT met", ram_s * 1e3, share * 100, r.suffix.median * 1e3,
      share <= 0.05 ? "met" : "NOT met", r.full.median / r.ram.ttft.median);
  if (!r.refs.note.empty()) std::printf("  notes: %s\n", r.refs.note.c_str());
}

void print_json(const Setup& su, const Result& r) {
  auto stats = [](const char* k, const BenchStats& s) {
    std::printf(", \"%s\": [%.6g, %.6g, %.6g]", k, s.median, s.min, s.max);
  };
  auto path = [&](const char* k, const Path& p) {
    std::printf(", \"%s\": {\"bytes\": %lld", k, static_cast<long long>(p.bytes));
    stats("fetch_s", p.fetch);
    stats("restore_s", p.restore);
    stats("ttft_s", p.ttft);
    std::printf("}");
  };
  std::printf("{\"model\": ");
  json_string(su.model_name);
  std::printf(
      ", \"kv_mode\": \"%s\", \"threads\": %d, \"repetitions\": %d, \"prefix\": %d, "
      "\"suffix\": %d, \"image_bytes\": %zu",
      geist::kv_mode_name(su.kv_mode), su.threads, su.reps, su.prefix, su.suffix, r.image_bytes);
  stats("ttft_full_s", r.full);
  stats("ttft_suffix_s", r.suffix);
  stats("restore_verified_s", r.verified);
  path("ram", r.ram);
  path("disk", r.disk);
  path("disk_dropped", r.disk_cold);
  path("redis", r.redis);
  const RawRefs& x = r.refs;
  stats("memcpy_warm_s", x.memcpy_warm);
  stats("memcpy_fresh_s", x.memcpy_fresh);
  stats("memcpy_fresh_huge_s", x.memcpy_fresh_huge);
  stats("xxh3_s", x.xxh3);
  stats("file_cached_s", x.file_cached);
  stats("file_dropped_s", x.file_dropped);
  if (x.direct_ok) stats("file_direct_s", x.file_direct);
  if (x.redis_ok) stats("redis_get_s", x.redis_get);
  std::printf("}\n");
}

}  // namespace

const VerbSpec& bench_tier_spec() {
  static const VerbSpec spec = {
      "bench-tier",
      "-m FILE [--prefix 2048,8192] [--suffix 32] [--kv-mode M] [-t T] [-r 3] [--redis URL] "
      "[--json]",
      "Time to first token after a prefix hit from RAM, the disk tier (page cache warm and\n"
      "dropped) and the Redis tier, against the suffix alone and a full prefill, through the\n"
      "server's cache layer; the bytes each tier moves and its GB/s next to memcpy, a file\n"
      "read and one Redis GET of as many bytes. Starts its own redis-server unless --redis.",
      {
          {"-m", "--model", "FILE", "GGUF model (required)"},
          {nullptr, "--prefix", "N,...", "prefix lengths in tokens (default 2048,8192)"},
          {nullptr, "--suffix", "N", "suffix tokens prefilled after the hit (default 32)"},
          {nullptr, "--kv-mode", "M", "KV mode (default: the session default)"},
          {"-t", "--threads", "T", "compute threads (default: all cores)"},
          {"-r", "--repetitions", "R", "measured runs per path (default 3, after a warm-up)"},
          {nullptr, "--full-runs", "N", "full prefills measured per prefix (default 1)"},
          {nullptr, "--dir", "DIR", "where the disk tier writes (default: a temp dir, removed)"},
          {nullptr, "--redis", "URL", "an existing Redis (default: start redis-server here)"},
          {nullptr, "--redis-server", "PATH", "the redis-server to start (default: on PATH)"},
          {nullptr, "--json", nullptr, "one JSON object per prefix instead of a table"},
      }};
  return spec;
}

int cmd_bench_tier(int argc, char** argv) {
  const VerbSpec& spec = bench_tier_spec();
  Args args;
  if (int rc = parse_verb_args(spec, argc, argv, &args); rc >= 0) return rc;
  if (!args.has("--model")) {
    cli_error(kVerb, "missing -m FILE (the model to measure)");
    return kExitUsage;
  }
  Setup su;
  if (!args.get_i32("--suffix", &su.suffix) || !args.get_i32("--threads", &su.threads) ||
      !args.get_i32("--repetitions", &su.reps) || !args.get_i32("--full-runs", &su.full_runs)) {
    return kExitUsage;
  }
  if (su.suffix < 1 || su.threads < 0 || su.reps < 1 || su.full_runs < 1) {
    cli_error(kVerb, "--suffix, -r and --full-runs must be at least 1, -t not negative");
    return kExitUsage;
  }
  if (su.threads == 0) {
    su.threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  }
  geist_session_params defaults;
  geist_session_params_default(&defaults);
  su.kv_mode = defaults.kv_mode;
  if (args.has("--kv-mode") && !parse_kv_mode(kVerb, args.str("--kv-mode"), &su.kv_mode)) {
    return kExitUsage;
  }
  std::vector<int32_t> prefixes;
  const std::string list = args.has("--prefix") ? args.str("--prefix") : "2048,8192";
  for (size_t i = 0; i <= list.size();) {
    const size_t j = std::min(list.find(',', i), list.size());
    const std::string w = list.substr(i, j - i);
    char* end = nullptr;
    const long v = std::strtol(w.c_str(), &end, 10);
    if (w.empty() || *end != '\0' || v < kGrid || v % kGrid != 0 || v > (1 << 24)) {
      cli_error(kVerb, "invalid prefix length '%s': expected a positive multiple of %d", w.c_str(),
                kGrid);
      return kExitUsage;
    }
    prefixes.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  if (args.has("--redis") && args.has("--redis-server")) {
    cli_error(kVerb, "--redis and --redis-server exclude each other");
    return kExitUsage;
  }

  const std::string path = args.str("--model");
  ModelHandle m;
  if (!load_model(args, path, &m)) return kExitFailure;
  su.model_name = std::filesystem::path(path).filename().string();

  bool temp_dir = false;
  if (args.has("--dir")) {
    su.dir = args.str("--dir");
  } else {
    char tmpl[] = "/tmp/geist_bench_tier_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      cli_error(kVerb, "cannot create a temporary directory");
      return kExitFailure;
    }
    su.dir = tmpl;
    temp_dir = true;
  }
  RedisProcess redis;
  if (args.has("--redis")) {
    su.redis_url = args.str("--redis");
  } else {
    // Bounded: the largest case's object, its raw-GET twin and room to spare.
    std::string err;
    const std::string bin =
        args.has("--redis-server") ? args.str("--redis-server") : "redis-server";
    if (!redis.start(bin, size_t{4} << 30, &err)) {
      cli_error(kVerb, "cannot start %s: %s (or pass --redis URL)", bin.c_str(), err.c_str());
      return kExitFailure;
    }
    su.redis_url = redis.url();
  }

  const bool json = args.has("--json");
  if (!json) {
    std::printf(
        "model %s, KV %s, %d threads, suffix %d, disk tier in %s, Redis %s; medians of %d runs "
        "after a warm-up [min-max], ms (GB/s of the bytes moved)\n\n",
        su.model_name.c_str(), geist::kv_mode_name(su.kv_mode), su.threads, su.suffix,
        su.dir.c_str(), args.has("--redis") ? "given" : "started here on localhost", su.reps);
    std::printf(
        "| model | KV | prefix | path | MiB moved | tier read ms (GB/s) | restore ms (GB/s) | "
        "TTFT ms | reference | reference ms (GB/s) |\n"
        "|---|---|---:|---|---:|---:|---:|---:|---|---:|\n");
  }
  std::vector<std::pair<Setup, Result>> done;
  int rc = 0;
  for (int32_t p : prefixes) {
    su.prefix = p;
    Result r;
    if (!run_case(m, su, &r)) {
      rc = kExitFailure;
      break;
    }
    if (json) {
      print_json(su, r);
    } else {
      print_rows(su, r);
    }
    std::fflush(stdout);
    done.emplace_back(su, r);
  }
  if (!json) {
    std::printf("\n");
    for (const auto& [s, r] : done) print_targets(s, r);
  }
  redis.stop();
  if (temp_dir) {
    std::error_code ec;
    std::filesystem::remove_all(su.dir, ec);
  }
  return rc;
}

}  // namespace geist_cli
