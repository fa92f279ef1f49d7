// geist bench --parallel B1,B2,...: B sessions advanced together through geist_batch_forward,
// as llama-batched-bench measures them: each session prefills its own P-token prompt and
// samples its first token (all B in one batched call), then N decode steps, each one batched
// call that runs the B owed tokens and samples B more (geist_batch_item.decode). Aggregate tok/s
// over all sessions, time to first token, the resident memory with B sessions alive, its growth per
// session added since the previous B, and one session's state (its snapshot size: KV cache and
// recurrent state, plus the image's small header and token list), which that growth should match.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "geist/geist.hpp"

namespace geist_cli {
namespace {

// Resident set of this process now in MiB (VmRSS), or -1.
double rss_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  return -1;
}

struct Row {
  int32_t parallel = 0;
  double prefill_tps = 0, decode_tps = 0, ttft_ms = 0, rss = 0;
  size_t state_bytes = 0;  // one session's snapshot size at the end of the run
};

bool run_b(const char* verb, const ModelHandle& m, const geist_session_params& sp, int32_t b,
           int32_t n_prompt, int32_t n_gen, Row* out) {
  std::vector<SessionHandle> ss(static_cast<size_t>(b));
  for (SessionHandle& s : ss) {
    if (SessionHandle::create(m, &s, &sp) != GEIST_OK) {
      cli_error(verb, "cannot create a session: %s", m.last_error());
      return false;
    }
  }
  const int32_t n_vocab = m.n_vocab();
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> pick(std::min(n_vocab - 1, 10),
                                              std::max(0, n_vocab - 300));
  std::vector<std::vector<geist_token>> prompts(static_cast<size_t>(b));
  for (auto& p : prompts) {
    p.resize(static_cast<size_t>(std::max(1, n_prompt)));
    for (geist_token& t : p) t = pick(rng);
  }
  std::vector<geist_batch_item> items(static_cast<size_t>(b));
  // One batched call: the owed tokens (and the prompts), then with decode every next token.
  auto forward = [&](bool with_prompt, bool decode) {
    for (size_t k = 0; k < ss.size(); ++k) {
      items[k] = geist::batch_item(ss[k], with_prompt ? &prompts[k] : nullptr, decode);
    }
    if (geist::batch_forward(m, &items) != GEIST_OK) {
      cli_error(verb, "batched forward failed: %s", m.last_error());
      return false;
    }
    for (size_t k = 0; k < items.size(); ++k) {
      if (items[k].status != GEIST_OK) {
        cli_error(verb, "batched forward failed: %s", ss[k].last_error());
        return false;
      }
    }
    return true;
  };
  const double t0 = now_seconds();
  if (!forward(true, true)) return false;  // the prompts and every session's first token
  const double t2 = now_seconds();
  for (int32_t step = 1; step < n_gen; ++step) {
    if (!forward(false, true)) return false;
  }
  if (n_gen > 1 && !forward(false, false)) return false;  // the last token's forward is timed too
  const double t3 = now_seconds();
  out->parallel = b;
  out->prefill_tps = static_cast<double>(b) * prompts[0].size() / (t2 - t0);
  out->ttft_ms = (t2 - t0) * 1e3;
  out->decode_tps = n_gen > 1 ? static_cast<double>(b) * (n_gen - 1) / (t3 - t2) : 0;
  out->rss = rss_mib();
  if (ss[0].snapshot_size(&out->state_bytes) != GEIST_OK) {
    cli_error(verb, "snapshot size failed: %s", ss[0].last_error());
    return false;
  }
  return true;
}

}  // namespace

int bench_parallel(const char* verb, const std::string& list, const ModelHandle& m,
                   const geist_session_params& sp_in, int32_t n_prompt, int32_t n_gen, int32_t reps,
                   bool json, const std::string& name) {
  std::vector<int32_t> bs;
  std::stringstream ls(list);
  std::string item;
  while (std::getline(ls, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 256) {
      cli_error(verb, "invalid --parallel entry '%s': expected counts in [1, 256]", item.c_str());
      return kExitUsage;
    }
    bs.push_back(static_cast<int32_t>(v));
  }
  geist_session_params sp = sp_in;
  sp.max_seq_len = std::max(1, n_prompt) + n_gen + 1;
  if (!json) {
    std::printf(
        "model %s, %d threads, KV mode %s, prompt %d + %d generated per session, "
        "median of %d runs\n\n%8s %14s %14s %12s %10s %14s %14s\n",
        name.c_str(), sp.n_threads, geist::kv_mode_name(sp.kv_mode), n_prompt, n_gen, reps,
        "parallel", "prefill tok/s", "decode tok/s", "ttft ms", "RSS MiB", "RSS/extra MiB",
        "state MiB");
  }
  int32_t prev_b = 0;
  double prev_rss = 0;
  for (int32_t b : bs) {
    std::vector<Row> rows;
    for (int32_t r = 0; r <= reps; ++r) {  // run 0 warms up
      Row row;
      // The warm-up pages the weights in and sizes the scratch with a short run.
      if (!run_b(verb, m, sp, b, r == 0 ? std::min(n_prompt, 64) : n_prompt,
                 r == 0 ? std::min(n_gen, 4) : n_gen, &row)) {
        return kExitFailure;
      }
      if (r > 0) rows.push_back(row);
    }
    auto median = [&](double Row::*f) {
      std::vector<double> v;
      for (const Row& x : rows) v.push_back(x.*f);
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double pp = median(&Row::prefill_tps), tg = median(&Row::decode_tps),
                 ttft = median(&Row::ttft_ms), rss = median(&Row::rss);
    const double state = static_cast<double>(rows[0].state_bytes) / (1024.0 * 1024.0);
    // RSS growth per session added since the previous count (none for the first, or when the
    // counts are not increasing).
    const bool has_delta = prev_b > 0 && b > prev_b;
    const double per_extra = has_delta ? (rss - prev_rss) / (b - prev_b) : 0;
    prev_b = b;
    prev_rss = rss;
    if (json) {
      std::printf("{\"model\": ");
      json_string(name);
      std::printf(
          ", \"threads\": %d, \"kv_mode\": \"%s\", \"n_prompt\": %d, \"n_gen\": %d, "
          "\"parallel\": %d, \"prefill_tps\": %.3f, \"decode_tps\": %.3f, "
          "\"ttft_ms\": %.3f, \"rss_mib\": %.1f, ",
          sp.n_threads, geist::kv_mode_name(sp.kv_mode), n_prompt, n_gen, b, pp, tg, ttft, rss);
      if (has_delta) {
        std::printf("\"rss_per_extra_session_mib\": %.2f, ", per_extra);
      } else {
        std::printf("\"rss_per_extra_session_mib\": null, ");
      }
      std::printf("\"state_bytes_per_session\": %zu}\n", rows[0].state_bytes);
    } else {
      char delta[32] = "-";
      if (has_delta) std::snprintf(delta, sizeof delta, "%.2f", per_extra);
      std::printf("%8d %14.2f %14.2f %12.2f %10.1f %14s %14.2f\n", b, pp, tg, ttft, rss, delta,
                  state);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace geist_cli
