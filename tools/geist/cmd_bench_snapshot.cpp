// geist bench-snapshot: what a snapshot costs and what it saves. For each KV mode and prefix
// length: the image size; snapshot and restore times next to memcpy of the same number of
// bytes in this process (the bandwidth ceiling of any host copy) and next to the backend's own
// copy of those bytes out of / into its memory (cudaMemcpy on a GPU: the ceiling of a device
// snapshot); and the time to first token of restore + a short suffix against a full prefill
// of prefix + suffix.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "geist/geist.hpp"

namespace geist_cli {
namespace {

constexpr const char* kVerb = "bench-snapshot";

bool session_fail(const SessionHandle& s, const char* what) {
  cli_error(kVerb, "%s failed: %s", what, s.last_error());
  return false;
}

struct Case {
  std::string kv_mode;  // name as given on the command line
  int32_t prefix = 0;
};

struct Result {
  size_t image_bytes = 0;
  BenchStats snapshot_s, restore_s, memcpy_s;  // seconds per operation
  BenchStats download_s, upload_s;             // backend copy of image_bytes out of / into it
  BenchStats ttft_restore_s, ttft_full_s;      // seconds to the first token
};

bool set_kv_mode(const std::string& name, geist_session_params* sp) {
  return parse_kv_mode(kVerb, name, &sp->kv_mode);
}

std::vector<std::string> all_kv_modes() {
  return {std::begin(geist::kKvModeNames), std::end(geist::kKvModeNames)};
}

// The first token after `suffix`: sampled greedily, so the only cost is the forward passes.
bool first_token(SessionHandle& s, const std::vector<geist_token>& toks, size_t from) {
  if (s.prefill(toks.data() + from, toks.size() - from) != GEIST_OK) {
    return session_fail(s, "prefill");
  }
  geist_token t = 0;
  if (s.decode(&t) != GEIST_OK) return session_fail(s, "decode");
  return true;
}

bool run_case(const ModelHandle& m, const Case& c, int32_t suffix, int32_t n_threads, int32_t reps,
              Result* out) {
  geist_session_params sp;
  geist_session_params_default(&sp);
  if (!set_kv_mode(c.kv_mode, &sp)) return false;
  sp.n_threads = n_threads;
  sp.max_seq_len = c.prefix + suffix + 1;
  sp.sampler.temperature = 0;
  SessionHandle src, dst;
  if (SessionHandle::create(m, &src, &sp) != GEIST_OK ||
      SessionHandle::create(m, &dst, &sp) != GEIST_OK) {
    cli_error(kVerb, "cannot create a session: %s", m.last_error());
    return false;
  }
  // Random ids (fixed seed) away from the special tokens at the ends of most vocabularies.
  const int32_t n_vocab = m.n_vocab();
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> pick(std::min(n_vocab - 1, 10),
                                              std::max(0, n_vocab - 300));
  std::vector<geist_token> toks(static_cast<size_t>(c.prefix + suffix));
  for (geist_token& t : toks) t = pick(rng);
  const size_t np = static_cast<size_t>(c.prefix);

  if (src.prefill(toks.data(), np) != GEIST_OK) return session_fail(src, "prefill");
  if (src.snapshot_size(&out->image_bytes) != GEIST_OK) {
    return session_fail(src, "snapshot size");
  }
  // Every buffer is written once before timing so page faults are not measured.
  std::vector<unsigned char> image(out->image_bytes, 0), copy(out->image_bytes, 1);
  std::vector<double> snap, rest, mc, down, up, ttft_r, ttft_f;
  for (int32_t r = 0; r <= reps; ++r) {  // run 0 warms caches up and is not counted
    size_t written = 0;
    double t0 = now_seconds();
    if (src.snapshot(image.data(), image.size(), &written) != GEIST_OK) {
      return session_fail(src, "snapshot");
    }
    const double t_snap = now_seconds() - t0;
    t0 = now_seconds();
    std::memcpy(copy.data(), image.data(), image.size());
    const double t_mc = now_seconds() - t0;
    // Keeps the copy observable so it cannot be elided.
    if (copy[image.size() / 2] != image[image.size() / 2]) return false;
    double t_up = 0, t_down = 0;
    if (m.time_copies(image.size(), &t_up, &t_down) != GEIST_OK) {
      cli_error(kVerb, "timing the backend's copies failed: %s", m.last_error());
      return false;
    }
    t0 = now_seconds();
    if (dst.restore(image.data(), written) != GEIST_OK) return session_fail(dst, "restore");
    const double t_rest = now_seconds() - t0;
    if (!first_token(dst, toks, np)) return false;
    const double t_ttft_r = now_seconds() - t0;
    // The warm-up skips the full prefill: the source's prefill has just paged the weights in,
    // and on a 1B model it is the most expensive step by far.
    if (r == 0) continue;
    if (dst.reset() != GEIST_OK) return session_fail(dst, "reset");
    t0 = now_seconds();
    if (!first_token(dst, toks, 0)) return false;
    const double t_ttft_f = now_seconds() - t0;
    snap.push_back(t_snap);
    mc.push_back(t_mc);
    down.push_back(t_down);
    up.push_back(t_up);
    rest.push_back(t_rest);
    ttft_r.push_back(t_ttft_r);
    ttft_f.push_back(t_ttft_f);
  }
  out->snapshot_s = summarize(snap);
  out->restore_s = summarize(rest);
  out->memcpy_s = summarize(mc);
  out->download_s = summarize(down);
  out->upload_s = summarize(up);
  out->ttft_restore_s = summarize(ttft_r);
  out->ttft_full_s = summarize(ttft_f);
  return true;
}

bool parse_list(const std::string& text, std::vector<std::string>* out) {
  out->clear();
  size_t i = 0;
  while (i <= text.size()) {
    const size_t j = std::min(text.find(',', i), text.size());
    if (j > i) out->push_back(text.substr(i, j - i));
    i = j + 1;
  }
  return !out->empty();
}

double gbps(size_t bytes, double s) { return s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0; }

// "median (GB/s) [min-max]" of a copy-like operation over `bytes`, times in ms.
std::string copy_cell(const BenchStats& t, size_t bytes) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%.3f (%.2f) [%.3f-%.3f]", t.median * 1e3, gbps(bytes, t.median),
                t.min * 1e3, t.max * 1e3);
  return buf;
}

std::string time_cell(const BenchStats& t) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f [%.1f-%.1f]", t.median * 1e3, t.min * 1e3, t.max * 1e3);
  return buf;
}

// One Markdown table row, so the output pastes into docs/BENCHMARKS.md as it is.
void print_table_row(const Case& c, const Result& r) {
  std::printf(
      "| %s | %d | %.2f | %s | %s | %s | %s | %s | %s | %s | %.1fx |\n", c.kv_mode.c_str(),
      c.prefix, static_cast<double>(r.image_bytes) / 1048576.0,
      copy_cell(r.snapshot_s, r.image_bytes).c_str(), copy_cell(r.restore_s, r.image_bytes).c_str(),
      copy_cell(r.memcpy_s, r.image_bytes).c_str(), copy_cell(r.download_s, r.image_bytes).c_str(),
      copy_cell(r.upload_s, r.image_bytes).c_str(), time_cell(r.ttft_restore_s).c_str(),
      time_cell(r.ttft_full_s).c_str(), r.ttft_full_s.median / r.ttft_restore_s.median);
}

void print_json_row(const std::string& model, int32_t threads, int32_t reps, const Case& c,
                    int32_t suffix, const Result& r) {
  auto stats = [](const char* key, const BenchStats& s) {
    std::printf(", \"%s\": [%.6g, %.6g, %.6g]", key, s.median, s.min, s.max);
  };
  std::printf("{\"model\": ");
  json_string(model);
  std::printf(
      ", \"threads\": %d, \"repetitions\": %d, \"kv_mode\": \"%s\", \"prefix\": %d, "
      "\"suffix\": %d, \"image_bytes\": %zu",
      threads, reps, c.kv_mode.c_str(), c.prefix, suffix, r.image_bytes);
  stats("snapshot_s", r.snapshot_s);
  stats("restore_s", r.restore_s);
  stats("memcpy_s", r.memcpy_s);
  stats("backend_download_s", r.download_s);
  stats("backend_upload_s", r.upload_s);
  stats("ttft_restore_s", r.ttft_restore_s);
  stats("ttft_full_s", r.ttft_full_s);
  std::printf("}\n");
}

}  // namespace

const VerbSpec& bench_snapshot_spec() {
  static const VerbSpec spec = {
      "bench-snapshot",
      "-m FILE [--kv-mode all|M,...] [--prefix 512,2048] [--suffix 32] [-t T] [-r 5] [--json]",
      "Per KV mode and prefix length: image size; snapshot and restore time and GB/s next to\n"
      "memcpy of the same bytes in this process and the backend's own copy of them out of and\n"
      "into its memory (cudaMemcpy on a GPU); time to first token of restore + suffix vs a\n"
      "full prefill of prefix + suffix (greedy). Medians of R runs after one warm-up.",
      {
          {"-m", "--model", "FILE", "GGUF model (required)"},
          {nullptr, "--kv-mode", "M",
           "KV modes, comma separated, or 'all' (default: the session default)"},
          {nullptr, "--prefix", "N,...", "prefix lengths in tokens (default 512,2048)"},
          {nullptr, "--suffix", "N", "suffix tokens prefilled after the restore (default 32)"},
          {"-t", "--threads", "T", "compute threads (default: all cores)"},
          {"-r", "--repetitions", "R", "measured runs per case (default 5)"},
          {nullptr, "--json", nullptr, "one JSON object per case on stdout instead of a table"},
      }};
  return spec;
}

int cmd_bench_snapshot(int argc, char** argv) {
  const VerbSpec& spec = bench_snapshot_spec();
  Args args;
  if (int rc = parse_verb_args(spec, argc, argv, &args); rc >= 0) return rc;
  if (!args.has("--model")) {
    cli_error(kVerb, "missing -m FILE (the model to measure)");
    return kExitUsage;
  }
  int32_t suffix = 32, n_threads = 0, reps = 5;
  if (!args.get_i32("--suffix", &suffix) || !args.get_i32("--threads", &n_threads) ||
      !args.get_i32("--repetitions", &reps)) {
    return kExitUsage;
  }
  if (suffix < 1 || n_threads < 0 || reps < 1) {
    cli_error(kVerb, "--suffix and -r must be at least 1 and -t must not be negative");
    return kExitUsage;
  }
  if (n_threads == 0) {
    n_threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  }
  geist_session_params defaults;
  geist_session_params_default(&defaults);
  std::vector<std::string> modes = {geist::kv_mode_name(defaults.kv_mode)};
  std::vector<std::string> prefix_words = {"512", "2048"};
  if (args.has("--kv-mode") && !parse_list(args.str("--kv-mode"), &modes)) {
    cli_error(kVerb, "--kv-mode needs at least one mode");
    return kExitUsage;
  }
  if (modes.size() == 1 && modes[0] == "all") modes = all_kv_modes();
  if (args.has("--prefix") && !parse_list(args.str("--prefix"), &prefix_words)) {
    cli_error(kVerb, "--prefix needs at least one length");
    return kExitUsage;
  }
  std::vector<int32_t> prefixes;
  for (const std::string& w : prefix_words) {
    char* end = nullptr;
    const long v = std::strtol(w.c_str(), &end, 10);
    if (end == w.c_str() || *end != '\0' || v < 1 || v > (1 << 24)) {
      cli_error(kVerb, "invalid prefix length '%s': expected a positive integer", w.c_str());
      return kExitUsage;
    }
    prefixes.push_back(static_cast<int32_t>(v));
  }
  geist_session_params probe = defaults;
  for (const std::string& mode : modes) {
    if (!set_kv_mode(mode, &probe)) return kExitUsage;
  }

  const std::string path = args.str("--model");
  ModelHandle m;
  if (!load_model(args, path, &m)) return kExitFailure;
  const std::string name = std::filesystem::path(path).filename().string();
  const bool json = args.has("--json");
  if (!json) {
    std::printf("model %s, %d threads, medians of %d runs after a warm-up [min-max]\n\n",
                name.c_str(), n_threads, reps);
    std::printf(
        "| KV | prefix | image MiB | snapshot ms (GB/s) [min-max] | restore ms (GB/s) [min-max] "
        "| memcpy ms (GB/s) [min-max] | backend copy out ms (GB/s) | backend copy in ms (GB/s) "
        "| TTFT restore + %d ms | TTFT full prefill ms | speedup "
        "|\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        suffix);
  }
  for (const std::string& mode : modes) {
    for (int32_t p : prefixes) {
      const Case c{mode, p};
      Result r;
      if (!run_case(m, c, suffix, n_threads, reps, &r)) return kExitFailure;
      if (json) {
        print_json_row(name, n_threads, reps, c, suffix, r);
      } else {
        print_table_row(c, r);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace geist_cli
