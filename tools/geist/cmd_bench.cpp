// geist bench: prefill and decode speed of a model, as llama-bench measures them (pp = a
// prompt of P random tokens in one prefill, tg = N single-token decode steps from an empty
// context), repeated R times after one warm-up run.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"

namespace geist_cli {
namespace {

// Peak resident set of this process in MiB (VmHWM), or -1 where /proc is not available.
double peak_rss_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  return -1;
}

bool fail(const char* verb, const SessionHandle& s, const char* what) {
  cli_error(verb, "%s failed: %s", what, s.last_error());
  return false;
}

// One prefill of `prompt` from an empty context; tokens per second.
bool time_prefill(const char* verb, SessionHandle& s, const std::vector<geist_token>& prompt,
                  double* tps) {
  if (s.reset() != GEIST_OK) return fail(verb, s, "reset");
  const double t0 = now_seconds();
  if (s.prefill(prompt) != GEIST_OK) return fail(verb, s, "prefill");
  *tps = static_cast<double>(prompt.size()) / (now_seconds() - t0);
  return true;
}

// n decode steps after a one-token context; each step's forward pass is included (the last
// one is forced by asking for its logits).
bool time_decode(const char* verb, SessionHandle& s, geist_token first, int32_t n, double* tps) {
  if (s.reset() != GEIST_OK) return fail(verb, s, "reset");
  if (s.prefill(&first, 1) != GEIST_OK) return fail(verb, s, "prefill");
  const double t0 = now_seconds();
  for (int32_t i = 0; i < n; ++i) {
    geist_token tok;
    if (s.decode(&tok) != GEIST_OK) return fail(verb, s, "decode");
  }
  const float* logits;
  int32_t n_vocab;
  if (s.logits(&logits, &n_vocab) != GEIST_OK) return fail(verb, s, "logits");
  *tps = static_cast<double>(n) / (now_seconds() - t0);
  return true;
}

}  // namespace

const VerbSpec& bench_spec() {
  static const VerbSpec spec = {
      "bench",
      "-m FILE [-p 512] [-n 128] [-t T] [-r 5] [--kv-mode M] [--parallel B,...] [--json]",
      "Measures prefill (a prompt of P random tokens in one call) and decode (N single-token\n"
      "steps from an empty context) speed in tokens per second: median and min-max of R runs\n"
      "after one warm-up. Decode also reports the model file's bytes read per second.",
      {
          {"-m", "--model", "FILE", "GGUF model (required)"},
          {"-p", "--n-prompt", "P", "prompt tokens of the prefill test (default 512; 0: skip)"},
          {"-n", "--n-gen", "N", "decode steps of the decode test (default 128; 0: skip)"},
          {"-t", "--threads", "T", "compute threads (default: all cores)"},
          {"-r", "--repetitions", "R", "measured runs per test (default 5)"},
          {nullptr, "--kv-mode", "M", "KV cache: f32, f16 (default), q8, q4, kivi4, kivi2"},
          {nullptr, "--parallel", "B,...",
           "B sessions together per test (geist_batch_forward): aggregate prefill and decode "
           "tok/s, time to first token, RSS per B, its growth per added session and one "
           "session's state bytes"},
          {nullptr, "--json", nullptr,
           "print one JSON object on stdout (one line per B with --parallel) instead of a "
           "table"},
      }};
  return spec;
}

int cmd_bench(int argc, char** argv) {
  const VerbSpec& spec = bench_spec();
  Args args;
  if (int rc = parse_verb_args(spec, argc, argv, &args); rc >= 0) return rc;
  if (!args.has("--model")) {
    cli_error(spec.name, "missing -m FILE (the model to measure)");
    return kExitUsage;
  }
  int32_t n_prompt = 512, n_gen = 128, n_threads = 0, reps = 5;
  if (!args.get_i32("--n-prompt", &n_prompt) || !args.get_i32("--n-gen", &n_gen) ||
      !args.get_i32("--threads", &n_threads) || !args.get_i32("--repetitions", &reps)) {
    return kExitUsage;
  }
  if (n_prompt < 0 || n_gen < 0 || n_threads < 0 || reps < 1) {
    cli_error(spec.name, "-p, -n and -t must not be negative and -r must be at least 1");
    return kExitUsage;
  }
  geist_session_params sp;
  geist_session_params_default(&sp);
  if (args.has("--kv-mode") && !parse_kv_mode(spec.name, args.str("--kv-mode"), &sp.kv_mode)) {
    return kExitUsage;
  }
  if (n_threads == 0)
    n_threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string path = args.str("--model");
  std::error_code ec;
  const double file_bytes = static_cast<double>(std::filesystem::file_size(path, ec));

  ModelHandle m;
  if (!load_model(args, path, &m)) return kExitFailure;
  sp.n_threads = n_threads;
  sp.max_seq_len = std::max(n_prompt, n_gen + 1) + 1;
  sp.sampler.temperature = 0;  // greedy: sampling cost stays negligible, as in llama-bench
  if (args.has("--parallel")) {
    return bench_parallel(spec.name, args.str("--parallel"), m, sp, n_prompt, n_gen, reps,
                          args.has("--json"), std::filesystem::path(path).filename().string());
  }
  SessionHandle s;
  if (SessionHandle::create(m, &s, &sp) != GEIST_OK) {
    cli_error(spec.name, "cannot create a session: %s", m.last_error());
    return kExitFailure;
  }
  // Random ids (fixed seed) away from the special tokens at the ends of most vocabularies.
  const int32_t n_vocab = m.n_vocab();
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> pick(std::min(n_vocab - 1, 10),
                                              std::max(0, n_vocab - 300));
  std::vector<geist_token> prompt(static_cast<size_t>(n_prompt));
  for (geist_token& t : prompt) t = pick(rng);
  const geist_token first = pick(rng);

  std::vector<double> pp, tg;
  for (int32_t r = 0; r <= reps; ++r) {  // run 0 warms caches and page-ins up
    double v = 0;
    if (n_prompt > 0) {
      if (!time_prefill(spec.name, s, prompt, &v)) return kExitFailure;
      if (r > 0) pp.push_back(v);
    }
    if (n_gen > 0) {
      if (!time_decode(spec.name, s, first, r == 0 ? std::min(n_gen, 8) : n_gen, &v)) {
        return kExitFailure;
      }
      if (r > 0) tg.push_back(v);
    }
  }
  const BenchStats p = summarize(pp), g = summarize(tg);
  const double gbps = file_bytes > 0 ? file_bytes * g.median / 1e9 : 0;
  const double rss = peak_rss_mib();
  const std::string name = std::filesystem::path(path).filename().string();
  if (args.has("--json")) {
    std::printf("{\"model\": ");
    json_string(name);
    std::printf(
        ", \"model_bytes\": %.0f, \"threads\": %d, \"n_prompt\": %d, \"n_gen\": %d, "
        "\"repetitions\": %d, \"prefill_tps\": %.3f, \"prefill_tps_min\": %.3f, "
        "\"prefill_tps_max\": %.3f, \"decode_tps\": %.3f, \"decode_tps_min\": %.3f, "
        "\"decode_tps_max\": %.3f, \"decode_weight_gbps\": %.3f, \"peak_rss_mib\": %.1f, "
        "\"kv_mode\": \"%s\"}\n",
        file_bytes, n_threads, n_prompt, n_gen, reps, p.median, p.min, p.max, g.median, g.min,
        g.max, gbps, rss, geist::kv_mode_name(sp.kv_mode));
    return 0;
  }
  std::printf("model %s (%.1f MiB), %d threads, KV mode %s, %d runs after a warm-up\n\n",
              name.c_str(), file_bytes / 1048576.0, n_threads, geist::kv_mode_name(sp.kv_mode),
              reps);
  std::printf("%-8s %12s %22s\n", "test", "tok/s", "min - max");
  if (n_prompt > 0) {
    std::printf("pp%-6d %12.2f %10.2f - %-10.2f\n", n_prompt, p.median, p.min, p.max);
  }
  if (n_gen > 0) {
    std::printf("tg%-6d %12.2f %10.2f - %-10.2f (%.2f GB/s of weights)\n", n_gen, g.median, g.min,
                g.max, gbps);
  }
  std::printf("\npeak resident memory %.1f MiB\n", rss);
  return 0;
}

}  // namespace geist_cli
