// geist logits: the logits of every prompt position, as raw float32, for comparisons with
// reference implementations.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "geist/geist.hpp"

namespace geist_cli {

const VerbSpec& logits_spec() {
  static const VerbSpec spec = {
      "logits",
      "-m FILE (-p TEXT | --tokens IDS) -o OUT [options]",
      "Evaluates the tokens and writes the logits of every position to OUT as little-endian\n"
      "float32, row-major [n_tokens x n_vocab].",
      {
          {"-m", "--model", "FILE", "GGUF model (required)"},
          {"-p", "--prompt", "TEXT", "text to evaluate (BOS added, special tokens parsed)"},
          {nullptr, "--tokens", "IDS", "token ids to evaluate, e.g. 1,403,407"},
          {"-o", "--output", "OUT", "output file (required)"},
          {"-t", "--threads", "T", "compute threads (default: all cores)"},
          {nullptr, "--batch", "B", "evaluate in chunks of B tokens (default: all at once)"},
          {nullptr, "--kv-mode", "M",
           "KV cache: f32, f16 (default), q8, q4, kivi4, kivi2 (f32 is exact)"},
      }};
  return spec;
}

int cmd_logits(int argc, char** argv) {
  const VerbSpec& spec = logits_spec();
  Args args;
  if (int rc = parse_verb_args(spec, argc, argv, &args); rc >= 0) return rc;
  if (!args.has("--model")) {
    cli_error(spec.name, "missing -m FILE (the model to evaluate)");
    return kExitUsage;
  }
  if (!args.has("--output")) {
    cli_error(spec.name, "missing -o OUT (where to write the logits)");
    return kExitUsage;
  }
  if (args.has("--prompt") == args.has("--tokens")) {
    cli_error(spec.name, "give exactly one of -p TEXT or --tokens IDS");
    return kExitUsage;
  }
  int32_t n_threads = 0, batch = 0;
  if (!args.get_i32("--threads", &n_threads) || !args.get_i32("--batch", &batch)) {
    return kExitUsage;
  }
  if (n_threads < 0) {
    cli_error(spec.name, "--threads must not be negative");
    return kExitUsage;
  }
  geist_session_params defaults;
  geist_session_params_default(&defaults);
  int32_t kv_mode = defaults.kv_mode;
  if (args.has("--kv-mode") && !parse_kv_mode(spec.name, args.str("--kv-mode"), &kv_mode)) {
    return kExitUsage;
  }
  if (args.has("--batch") && batch <= 0) {
    cli_error(spec.name, "--batch must be at least 1 (got %d)", batch);
    return kExitUsage;
  }
  std::vector<geist_token> tokens;
  if (args.has("--tokens") && !parse_token_list(spec.name, args.str("--tokens"), &tokens)) {
    return kExitUsage;
  }

  ModelHandle m;
  if (!load_model(args, args.str("--model"), &m)) return kExitFailure;
  if (args.has("--prompt") &&
      !tokenize_text(spec.name, m, args.str("--prompt"), true, true, &tokens)) {
    return kExitFailure;
  }
  if (tokens.empty()) {
    cli_error(spec.name, "nothing to evaluate: the prompt has no tokens");
    return kExitUsage;
  }
  const size_t n = tokens.size();
  const size_t n_vocab = static_cast<size_t>(m.n_vocab());
  if (batch == 0 || static_cast<size_t>(batch) > n) batch = static_cast<int32_t>(n);

  geist_session_params sp;
  geist_session_params_default(&sp);
  sp.n_threads = n_threads;
  sp.max_seq_len = static_cast<int32_t>(n);
  sp.kv_mode = kv_mode;
  SessionHandle sess;
  if (!create_session(spec.name, m, sp, &sess)) return kExitFailure;
  std::vector<float> logits(n * n_vocab);  // [n_tokens][n_vocab]
  for (size_t off = 0; off < n; off += static_cast<size_t>(batch)) {
    const size_t len = std::min(static_cast<size_t>(batch), n - off);
    const geist_status st = sess.prefill_all_logits(
        tokens.data() + off, len, logits.data() + off * n_vocab, logits.size() - off * n_vocab);
    if (st != GEIST_OK) {
      cli_error(spec.name, "evaluation of tokens [%zu, %zu) failed: %s", off, off + len,
                sess.last_error());
      return kExitFailure;
    }
  }

  const std::string& out_path = args.str("--output");
  FILE* f = std::fopen(out_path.c_str(), "wb");
  if (f == nullptr) {
    cli_error(spec.name, "cannot open output file '%s': %s", out_path.c_str(),
              std::strerror(errno));
    return kExitFailure;
  }
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
                "logits are written in host order, which must be little-endian");
  const size_t written = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
  const bool closed = std::fclose(f) == 0;
  const bool ok = written == logits.size() && closed;
  if (!ok) {
    cli_error(spec.name, "cannot write output file '%s': %s", out_path.c_str(),
              std::strerror(errno));
    return kExitFailure;
  }
  std::fprintf(stderr, "geist logits: wrote %zu x %zu logits to %s\n", n, n_vocab,
               out_path.c_str());
  return 0;
}

}  // namespace geist_cli
