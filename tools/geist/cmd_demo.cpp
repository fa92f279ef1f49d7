// geist demo: the product in one command. A constant context (a long system prompt) is
// prefilled once and snapshotted; every request is then served by restoring the image into a
// serving session and prefilling only the request's own tokens. Each request is checked
// against an uninterrupted run of the same calls in a session that never saw a snapshot:
// tokens and every logit row must be equal byte for byte.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "geist/geist.hpp"
#include "geist/geist_util.h"

namespace geist_cli {
namespace {

constexpr const char* kVerb = "demo";

// Presets tried in order for the built-in model: a hybrid (DeltaNet + attention) model shows
// the point best, since it has no way to reuse a prefix except through a snapshot. Presets this
// build's geist_mkmodel does not know are skipped.
constexpr const char* kDefaultPresets[] = {"tiny-qwen35", "tiny-llama"};
constexpr const char* kDefaultType = "q8_0";

// The chunk the constant context is prefilled in: large enough to keep batched prefill
// efficient, small enough for the progress line to move. The uninterrupted reference run uses
// the same chunks, so both make the same sequence of calls.
constexpr size_t kPrefillChunk = 256;

// The constant context, repeated until it fills --prefix-tokens.
constexpr const char* kContext =
    "You are the support assistant of Northwind Outfitters, a shop for hiking and camping "
    "gear. Answer politely, in at most three sentences, and never invent a policy. Orders over "
    "fifty euros ship free within the European Union; smaller orders pay a flat fee of four "
    "euros and ninety cents. Parcels leave the warehouse within two working days. Customers may "
    "return unused items within thirty days of delivery for a full refund; worn boots and "
    "opened gas canisters cannot be returned. Tents carry a two year warranty against seam and "
    "pole failures; sleeping bags carry one year. Repairs are free within the warranty and cost "
    "a fixed fee outside it. Gift cards never expire. The shop in Bergen opens from nine to "
    "six on weekdays and from ten to four on Saturdays. If a question is outside these rules, "
    "say that a human colleague will answer by email within one working day.\n";

constexpr const char* kRequests[] = {
    "Customer: Can I return boots I wore on one hike?\nAssistant:",
    "Customer: How much is shipping for a 30 euro order?\nAssistant:",
    "Customer: My tent pole snapped after a year. What now?\nAssistant:",
    "Customer: When is the Bergen shop open on Saturday?\nAssistant:",
    "Customer: Do gift cards expire?\nAssistant:",
    "Customer: Can you ship to Canada?\nAssistant:",
};

struct Options {
  int32_t n_threads = 0;
  int32_t n_requests = 4;
  int32_t prefix_tokens = 1024;
  int32_t n_predict = 32;
  uint64_t seed = 7;
};

// The generated tokens of one request and the logits they were drawn from.
struct Reply {
  std::vector<geist_token> tokens;  // [n_predict]
  std::vector<float> logits;        // [n_predict + 1][n_vocab]: before each step, then after
  double first_token_s = 0;         // seconds from the start of the request to the first token
};

std::string cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && x[0] == '/') {
    return std::string(x) + "/geist";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] != '\0') {
    return std::string(h) + "/.cache/geist";
  }
  return (std::filesystem::temp_directory_path() / "geist-cache").string();
}

int print_mkmodel_progress(void* /*user*/, float fraction) {
  std::fprintf(stderr, "\rgenerating the demo model %3d%%",
               static_cast<int>(fraction * 100 + 0.5f));
  std::fflush(stderr);
  return 0;
}

// Finds or generates the built-in model. Generation happens once; geist_mkmodel writes a temp
// file and renames it, so an interrupted first run leaves no half-written cache entry.
// How the user reached this binary, for the closing hint: the path it runs from.
std::string argv0_hint() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "geist";
  const std::filesystem::path rel =
      std::filesystem::relative(self, std::filesystem::current_path(), ec);
  if (ec || rel.empty()) return self.string();
  return rel.has_parent_path() ? rel.string() : "./" + rel.string();
}

bool default_model(std::string* path) {
  const std::string dir = cache_dir();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    cli_error(kVerb, "cannot create the model cache directory '%s': %s", dir.c_str(),
              ec.message().c_str());
    return false;
  }
  const bool tty = stderr_is_terminal();
  std::string last_err;
  for (const char* preset : kDefaultPresets) {
    const std::string file = dir + "/" + preset + "-" + kDefaultType + ".gguf";
    if (std::filesystem::exists(file, ec)) {
      *path = file;
      return true;
    }
    char err[1024] = {0};
    const double t0 = now_seconds();
    const geist_status st =
        geist_mkmodel(preset, kDefaultType, file.c_str(), 0, tty ? print_mkmodel_progress : nullptr,
                      nullptr, err, sizeof(err));
    if (tty) std::fprintf(stderr, "\r%-40s\r", "");
    if (st == GEIST_OK) {
      std::fprintf(stderr, "geist demo: generated the demo model %s (%s, %s) in %.1f s\n",
                   file.c_str(), preset, kDefaultType, now_seconds() - t0);
      *path = file;
      return true;
    }
    last_err = err[0] != '\0' ? err : geist_status_string(st);
    if (st != GEIST_E_INVALID_ARG) break;  // an unknown preset moves on; anything else is real
  }
  cli_error(kVerb, "cannot generate the demo model in '%s': %s", dir.c_str(), last_err.c_str());
  return false;
}

bool session_fail(const SessionHandle& s, const char* what) {
  cli_error(kVerb, "%s failed: %s", what, s.last_error());
  return false;
}

// Prefills `toks` in kPrefillChunk pieces; with `progress`, a line on stderr shows how far.
bool prefill_chunked(SessionHandle& s, const std::vector<geist_token>& toks, bool progress) {
  for (size_t i = 0; i < toks.size(); i += kPrefillChunk) {
    const size_t n = std::min(kPrefillChunk, toks.size() - i);
    if (s.prefill(toks.data() + i, n) != GEIST_OK) {
      if (progress) std::fprintf(stderr, "\n");
      return session_fail(s, "prefill");
    }
    if (progress) {
      std::fprintf(stderr, "\rprefilling the context: %zu / %zu tokens (%3d%%)", i + n, toks.size(),
                   static_cast<int>(100.0 * static_cast<double>(i + n) / toks.size() + 0.5));
      std::fflush(stderr);
    }
  }
  if (progress) std::fprintf(stderr, "\r%-60s\r", "");
  return true;
}

bool copy_logits(SessionHandle& s, std::vector<float>* out) {
  const float* l = nullptr;
  int32_t nv = 0;
  if (s.logits(&l, &nv) != GEIST_OK) return session_fail(s, "logits");
  out->insert(out->end(), l, l + nv);
  return true;
}

// Prefills the request and decodes n tokens, recording the logits each token was drawn from and
// the owed forward's logits after the last one. t_start is when the request arrived (before its
// restore or re-prefill). Reading the logits runs each owed forward one call earlier than
// decode would, which changes no result and costs the same in both runs.
bool answer_recorded(SessionHandle& s, const std::vector<geist_token>& request, int32_t n,
                     double t_start, Reply* out) {
  if (s.prefill(request) != GEIST_OK) {
    return session_fail(s, "prefill of the request");
  }
  for (int32_t i = 0; i < n; ++i) {
    if (!copy_logits(s, &out->logits)) return false;
    geist_token tok = 0;
    if (s.decode(&tok) != GEIST_OK) return session_fail(s, "decode");
    if (i == 0) out->first_token_s = now_seconds() - t_start;
    out->tokens.push_back(tok);
  }
  return copy_logits(s, &out->logits);
}

// Text of the tokens on one line: control characters shown as spaces, cut at max_chars bytes
// (at a UTF-8 boundary).
std::string one_line(const ModelHandle& m, const std::vector<geist_token>& toks, size_t max_chars) {
  std::string s;
  if (m.detokenize(toks, &s) != GEIST_OK) return "(not printable)";
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (s.size() > max_chars) {
    s.resize(utf8_complete_prefix(s.substr(0, max_chars)));
    s += "...";
  }
  return s;
}

double ms(double s) { return s * 1e3; }

std::string human_bytes(size_t n) {
  char buf[32];
  if (n < 1024 * 1024) {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", static_cast<double>(n) / 1024.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(n) / 1048576.0);
  }
  return buf;
}

bool apply_kv_mode(const Args& args, geist_session_params* sp) {
  return !args.has("--kv-mode") || parse_kv_mode(kVerb, args.str("--kv-mode"), &sp->kv_mode);
}

bool parse_options(const Args& args, Options* o) {
  if (!args.get_i32("--threads", &o->n_threads) || !args.get_i32("--requests", &o->n_requests) ||
      !args.get_i32("--prefix-tokens", &o->prefix_tokens) ||
      !args.get_i32("--n-predict", &o->n_predict) || !args.get_u64("--seed", &o->seed)) {
    return false;
  }
  if (o->n_threads < 0 || o->n_requests < 1 || o->prefix_tokens < 1 || o->n_predict < 1) {
    cli_error(kVerb,
              "-t must not be negative; --requests, --prefix-tokens and -n must be at least 1");
    return false;
  }
  if (o->n_threads == 0) {
    o->n_threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  }
  return true;
}

// The context: kContext repeated and cut to exactly n tokens (BOS first when the model uses it).
bool build_context(const ModelHandle& m, int32_t n, std::vector<geist_token>* out) {
  std::vector<geist_token> once;
  if (!tokenize_text(kVerb, m, kContext, true, false, &once)) return false;
  std::vector<geist_token> more;
  if (!tokenize_text(kVerb, m, kContext, false, false, &more)) return false;
  if (more.empty()) {
    cli_error(kVerb, "the model's tokenizer turns the context text into no tokens");
    return false;
  }
  *out = once;
  while (out->size() < static_cast<size_t>(n)) out->insert(out->end(), more.begin(), more.end());
  out->resize(static_cast<size_t>(n));
  return true;
}

}  // namespace

const VerbSpec& demo_spec() {
  static const VerbSpec spec = {
      "demo",
      "[-m FILE] [-t T] [--kv-mode M] [--requests N] [--prefix-tokens N]",
      "Prefills a constant context once, snapshots the session, then serves each request by\n"
      "restoring the image and prefilling only the request's tokens. Prints per request the\n"
      "time to first token next to a full re-prefill, and checks that the reply (tokens and\n"
      "logits, by memcmp) equals an uninterrupted run: 'bit-identical: yes', else exit 1.\n"
      "Without -m a small built-in model is generated on first use and cached under\n"
      "$XDG_CACHE_HOME/geist (default ~/.cache/geist).",
      {
          {"-m", "--model", "FILE", "GGUF model (default: the built-in demo model)"},
          {"-t", "--threads", "T", "compute threads (default: all cores)"},
          {nullptr, "--kv-mode", "M", "KV cache: f32, f16 (default), q8, q4, kivi4, kivi2"},
          {nullptr, "--requests", "N", "requests to serve (default 4)"},
          {nullptr, "--prefix-tokens", "N", "tokens of the constant context (default 1024)"},
          {"-n", "--n-predict", "N", "tokens generated per request (default 32)"},
          {nullptr, "--seed", "S", "sampling seed (default 7; temperature 0.8)"},
      }};
  return spec;
}

int cmd_demo(int argc, char** argv) {
  const VerbSpec& spec = demo_spec();
  Args args;
  if (int rc = parse_verb_args(spec, argc, argv, &args); rc >= 0) return rc;
  Options o;
  if (!parse_options(args, &o)) return kExitUsage;
  geist_session_params sp;
  geist_session_params_default(&sp);
  if (!apply_kv_mode(args, &sp)) return kExitUsage;

  std::string path;
  if (args.has("--model")) {
    path = args.str("--model");
  } else if (!default_model(&path)) {
    return kExitFailure;
  }
  ModelHandle m;
  if (!load_model(args, path, &m)) return kExitFailure;
  std::vector<geist_token> context;
  if (!build_context(m, o.prefix_tokens, &context)) return kExitFailure;
  std::vector<std::vector<geist_token>> requests;
  size_t longest = 0;
  for (int32_t r = 0; r < o.n_requests; ++r) {
    std::vector<geist_token> q;
    const char* text = kRequests[static_cast<size_t>(r) % std::size(kRequests)];
    if (!tokenize_text(kVerb, m, text, false, false, &q)) return kExitFailure;
    longest = std::max(longest, q.size());
    requests.push_back(std::move(q));
  }

  // Sampled, not greedy: the RNG state is part of what the image must carry.
  sp.n_threads = o.n_threads;
  sp.sampler.temperature = 0.8f;
  sp.sampler.seed = o.seed;
  sp.max_seq_len = static_cast<int32_t>(context.size() + longest) + o.n_predict + 1;
  const int32_t n_ctx_train = m.n_ctx_train();
  if (n_ctx_train > 0 && sp.max_seq_len > n_ctx_train) {
    cli_error(kVerb, "--prefix-tokens %d plus a request does not fit the model's context (%d)",
              o.prefix_tokens, n_ctx_train);
    return kExitUsage;
  }
  SessionHandle primary, server;
  if (SessionHandle::create(m, &primary, &sp) != GEIST_OK ||
      SessionHandle::create(m, &server, &sp) != GEIST_OK) {
    cli_error(kVerb, "cannot create a session: %s", m.last_error());
    return kExitFailure;
  }
  const int32_t n_vocab = m.n_vocab();
  std::printf(
      "geist demo: %s, %d threads, KV mode %s, context %zu tokens, %d requests of "
      "%d sampled tokens\n",
      std::filesystem::path(path).filename().string().c_str(), o.n_threads,
      geist::kv_mode_name(sp.kv_mode), context.size(), o.n_requests, o.n_predict);
  if (!args.has("--model")) {
    std::printf(
        "note: the built-in model has random weights, so its replies are noise. This demo is\n"
        "about time to first token and bit-identity, not about what the model says.\n");
  }
  std::fflush(stdout);

  // 1. The constant context, once.
  const double t0 = now_seconds();
  if (!prefill_chunked(primary, context, stderr_is_terminal())) return kExitFailure;
  const double prefill_s = now_seconds() - t0;

  // 2. Its snapshot.
  size_t image_size = 0;
  if (primary.snapshot_size(&image_size) != GEIST_OK) {
    session_fail(primary, "snapshot size");
    return kExitFailure;
  }
  std::vector<unsigned char> image(image_size);
  size_t written = 0;
  const double t1 = now_seconds();
  if (primary.snapshot(image.data(), image.size(), &written) != GEIST_OK) {
    session_fail(primary, "snapshot");
    return kExitFailure;
  }
  const double snapshot_s = now_seconds() - t1;
  image.resize(written);
  std::printf("context: prefilled %zu tokens in %.1f ms (%.0f tok/s)\n", context.size(),
              ms(prefill_s), static_cast<double>(context.size()) / prefill_s);
  std::printf("snapshot: image %s (%zu bytes) written in %.3f ms (%.2f GB/s)\n\n",
              human_bytes(written).c_str(), written, ms(snapshot_s),
              static_cast<double>(written) / snapshot_s / 1e9);

  // 3. The requests.
  int failures = 0;
  double sum_fast = 0, sum_full = 0;
  for (int32_t r = 0; r < o.n_requests; ++r) {
    const std::vector<geist_token>& q = requests[static_cast<size_t>(r)];
    // Served: restore the image into the serving session, prefill the request only.
    Reply fast;
    const double a0 = now_seconds();
    if (server.restore(image.data(), image.size()) != GEIST_OK) {
      session_fail(server, "restore");
      return kExitFailure;
    }
    const double restore_s = now_seconds() - a0;
    if (!answer_recorded(server, q, o.n_predict, a0, &fast)) return kExitFailure;
    // Uninterrupted: the same calls from an empty session, no snapshot anywhere.
    Reply full;
    const double b0 = now_seconds();
    if (primary.reset() != GEIST_OK) {
      session_fail(primary, "reset");
      return kExitFailure;
    }
    if (!prefill_chunked(primary, context, false)) return kExitFailure;
    if (!answer_recorded(primary, q, o.n_predict, b0, &full)) return kExitFailure;

    const bool same = fast.tokens == full.tokens && fast.logits.size() == full.logits.size() &&
                      std::memcmp(fast.logits.data(), full.logits.data(),
                                  fast.logits.size() * sizeof(float)) == 0;
    if (!same) ++failures;
    sum_fast += fast.first_token_s;
    sum_full += full.first_token_s;
    std::printf("request %d: \"%s\" (%zu tokens)\n", r + 1, one_line(m, q, 80).c_str(), q.size());
    std::printf(
        "  time to first token: %.2f ms with the snapshot (restore %.2f ms), %.2f ms "
        "with a full re-prefill of %zu tokens: %.1fx faster\n",
        ms(fast.first_token_s), ms(restore_s), ms(full.first_token_s), context.size() + q.size(),
        full.first_token_s / fast.first_token_s);
    std::printf("  reply: \"%s\"\n", one_line(m, fast.tokens, 72).c_str());
    std::printf(
        "  bit-identical: %s (%zu tokens and %zu logit rows of %d floats vs the "
        "uninterrupted run)\n",
        same ? "yes" : "no", fast.tokens.size(), fast.logits.size() / n_vocab, n_vocab);
    std::fflush(stdout);
  }
  std::printf(
      "\nsummary: %d requests, mean time to first token %.2f ms with the snapshot vs "
      "%.2f ms re-prefilling (%.1fx); bit-identical: %s\n",
      o.n_requests, ms(sum_fast / o.n_requests), ms(sum_full / o.n_requests), sum_full / sum_fast,
      failures == 0 ? "yes" : "no");
  if (failures != 0) {
    cli_error(kVerb, "%d of %d replies differ from the uninterrupted run", failures, o.n_requests);
    return kExitFailure;
  }
  std::printf(
      "\nTo chat with a real model, download a GGUF (e.g. Qwen3.5-0.8B-Q4_K_M.gguf) and run:\n"
      "  %s chat -m Qwen3.5-0.8B-Q4_K_M.gguf\n",
      argv0_hint().c_str());
  return 0;
}

}  // namespace geist_cli
