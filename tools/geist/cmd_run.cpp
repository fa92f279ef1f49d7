// geist run: prefill a prompt, then sample and stream the continuation.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat_common.h"
#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "geist/geist.hpp"

namespace geist_cli {

namespace {

// --chat: -p TEXT (after -s SYSTEM) through the chat template, tokenized.
bool chat_prompt(const std::string& verb, const Args& args, const ModelHandle& model,
                 std::vector<geist_token>* out) {
  ChatTemplate t;
  if (!load_chat_template(verb, args, model, &t)) return false;
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  if (args.has("--system")) msgs.push_back({{"role", "system"}, {"content", args.str("--system")}});
  msgs.push_back({{"role", "user"}, {"content", args.str("--prompt")}});
  nlohmann::ordered_json req = {{"messages", msgs}, {"add_generation_prompt", true}};
  if (args.has("--no-think")) req["chat_template_kwargs"] = {{"enable_thinking", false}};
  std::string text;
  return render_chat(verb, t, req.dump(), &text) && tokenize_prompt(verb, model, text, out);
}

}  // namespace

const VerbSpec& run_spec() {
  static const VerbSpec spec = {
      "run", "-m FILE (-p TEXT | --tokens IDS | --load-state FILE) [options]",
      "Generates a continuation of the prompt and streams it to stdout (the prompt itself is\n"
      "not echoed). Stops after N tokens, at an end-of-generation token, or when the context\n"
      "is full. A stats line goes to stderr. --load-state restores a saved session first (same\n"
      "model and --kv-mode); -p/--tokens then add tokens, and without them generation continues\n"
      "from the restored state. Sampler options given with --load-state replace the saved\n"
      "settings and re-seed the RNG; without them the saved settings and RNG state continue.",
      concat_opts(
          {
              {"-m", "--model", "FILE", "GGUF model (required)"},
              {"-p", "--prompt", "TEXT", "prompt text (BOS added, special tokens parsed)"},
              {nullptr, "--tokens", "IDS", "prompt as token ids, e.g. 1,403,407"},
              {"-n", "--n-predict", "N",
               "tokens to generate (default 128; -1: until the context is full)"},
              {nullptr, "--ids", nullptr, "print the generated token ids instead of text"},
              {nullptr, "--chat", nullptr,
               "-p TEXT is one user message, rendered through the model's chat template"},
              {"-s", "--system", "TEXT", "with --chat: a system message first"},
              {nullptr, "--no-think", nullptr, "with --chat: render with enable_thinking=false"},
              {nullptr, "--chat-template", "FILE",
               "with --chat: a Jinja template instead of the model's"},
              {nullptr, "--load-state", "FILE", "restore a session snapshot before anything else"},
              {nullptr, "--save-state", "FILE", "after the run, save the session snapshot to FILE"},
          },
          session_opt_specs())};
  return spec;
}

int cmd_run(int argc, char** argv) {
  const VerbSpec& spec = run_spec();
  Args args;
  if (int rc = parse_verb_args(spec, argc, argv, &args); rc >= 0) return rc;
  if (!args.has("--model")) {
    cli_error(spec.name, "missing -m FILE (the model to run)");
    return kExitUsage;
  }
  const bool load_state = args.has("--load-state");
  if ((args.has("--prompt") && args.has("--tokens")) ||
      (!load_state && !args.has("--prompt") && !args.has("--tokens"))) {
    cli_error(spec.name, "give exactly one of -p TEXT or --tokens IDS (or --load-state FILE)");
    return kExitUsage;
  }
  int32_t n_predict = 128;
  geist_session_params sp;
  geist_session_params_default(&sp);
  if (!args.get_i32("--n-predict", &n_predict) || !parse_session_opts(spec.name, args, &sp)) {
    return kExitUsage;
  }

  std::vector<geist_token> prompt;
  if (args.has("--tokens") && !parse_token_list(spec.name, args.str("--tokens"), &prompt)) {
    return kExitUsage;
  }
  ModelHandle m;
  if (!load_model(args, args.str("--model"), &m)) return kExitFailure;
  if (args.has("--chat")) {
    if (!args.has("--prompt")) {
      cli_error(spec.name, "--chat needs -p TEXT (the user message)");
      return kExitUsage;
    }
    if (!chat_prompt(spec.name, args, m, &prompt)) return kExitFailure;
  } else if (args.has("--prompt") &&
             !tokenize_text(spec.name, m, args.str("--prompt"), true, true, &prompt)) {
    return kExitFailure;
  }
  if (prompt.empty() && !load_state) {
    cli_error(spec.name, "the prompt is empty (no tokens to start from)");
    return kExitUsage;
  }

  SessionHandle sess;
  if (!create_session(spec.name, m, sp, &sess)) return kExitFailure;
  if (load_state) {
    if (sess.load_file(args.str("--load-state")) != GEIST_OK) {
      cli_error(spec.name, "cannot load state: %s", sess.last_error());
      return kExitFailure;
    }
    static const char* const kSamplerFlags[] = {
        "--temp",          "--top-k",          "--top-p",
        "--min-p",         "--repeat-penalty", "--presence-penalty",
        "--repeat-last-n", "--seed",           "--frequency-penalty"};
    bool sampler_given = false;
    for (const char* f : kSamplerFlags) sampler_given = sampler_given || args.has(f);
    if (sampler_given && sess.set_sampler(sp.sampler) != GEIST_OK) {
      cli_error(spec.name, "%s", sess.last_error());
      return kExitFailure;
    }
  }
  const double t0 = now_seconds();
  geist_status st = sess.prefill(prompt);
  if (st != GEIST_OK) {
    cli_error(spec.name, "prefill failed: %s", sess.last_error());
    return kExitFailure;
  }
  const double t1 = now_seconds();

  const bool ids = args.has("--ids");
  Utf8Stream text_out(stdout);
  std::string piece;
  int32_t n_gen = 0;
  bool context_full = false;
  for (; n_predict < 0 || n_gen < n_predict; ++n_gen) {
    geist_token tok = 0;
    st = sess.decode(&tok);
    if (st == GEIST_E_TOO_MANY_TOKENS) {
      context_full = true;
      break;
    }
    if (st != GEIST_OK) {
      text_out.finish();
      cli_error(spec.name, "decode failed: %s", sess.last_error());
      return kExitFailure;
    }
    if (m.token_is_eog(tok)) break;
    if (ids) {
      std::printf(n_gen == 0 ? "%d" : " %d", tok);
      std::fflush(stdout);
      continue;
    }
    st = m.token_to_piece(tok, &piece);
    if (st != GEIST_OK) {
      text_out.finish();
      cli_error(spec.name, "cannot convert token %d to text: %s", tok, m.last_error());
      return kExitFailure;
    }
    text_out.write(piece.data(), piece.size());
  }
  const double t2 = now_seconds();
  if (ids) {
    std::printf("\n");
  } else {
    text_out.finish();
    std::printf("\n");
  }
  std::fflush(stdout);
  if (args.has("--save-state")) {
    if (sess.save_file(args.str("--save-state")) != GEIST_OK) {
      cli_error(spec.name, "cannot save state: %s", sess.last_error());
      return kExitFailure;
    }
  }
  if (context_full) {
    std::fprintf(stderr, "geist run: stopped: the context (%d tokens) is full\n",
                 sess.max_seq_len());
  }
  const double prefill_s = t1 - t0, decode_s = t2 - t1;
  std::fprintf(stderr,
               "geist run: prompt %zu tokens, prefill %.1f tok/s (%.3f s), decode %d tokens "
               "%.1f tok/s (%.3f s), kv %s\n",
               prompt.size(), prefill_s > 0 ? prompt.size() / prefill_s : 0.0, prefill_s, n_gen,
               decode_s > 0 ? n_gen / decode_s : 0.0, decode_s, geist::kv_mode_name(sp.kv_mode));
  return 0;
}

}  // namespace geist_cli
