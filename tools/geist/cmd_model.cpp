// geist tokenize / info / mkmodel: the verbs about a model file rather than generation.
#include <cstdio>
#include <string>
#include <vector>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "geist/geist_util.h"

namespace geist_cli {

const VerbSpec& tokenize_spec() {
  static const VerbSpec spec = {
      "tokenize",
      "-m FILE (-p TEXT | -f FILE) [--no-special]",
      "Prints the token ids of the text, space separated, on one line. Only the tokenizer is\n"
      "loaded: vocab-only GGUFs of any architecture work.",
      {
          {"-m", "--model", "FILE", "GGUF model (required)"},
          {"-p", "--prompt", "TEXT", "text to tokenize"},
          {"-f", "--file", "FILE", "read the text from FILE"},
          {nullptr, "--no-special", nullptr, "add no BOS/EOS and do not parse special token texts"},
      }};
  return spec;
}

const VerbSpec& info_spec() {
  static const VerbSpec spec = {
      "info",
      "-m FILE",
      "Describes the model: architecture, hyper-parameters, tensor types, tokenizer.",
      {
          {"-m", "--model", "FILE", "GGUF model (required)"},
      }};
  return spec;
}

const VerbSpec& mkmodel_spec() {
  static const VerbSpec spec = {
      "mkmodel",
      "--preset NAME --type T -o FILE [--seed S]",
      "Writes a GGUF with random weights and exactly the tensor names, shapes and metadata\n"
      "llama.cpp's converter writes for the preset, with a synthetic byte-level BPE vocabulary.\n"
      "Presets: tiny-llama (seconds to build and run), llama-1b (Llama-3.2-1B's shapes),\n"
      "tiny-qwen35 (a small Qwen3.5 hybrid), qwen35-0.8b and qwen35-2b (Qwen3.5-0.8B's and\n"
      "Qwen3.5-2B's text-model shapes).\n"
      "Types: f32, f16, bf16, q8_0, q4_0 (q4_0 keeps token_embd in q8_0).",
      {
          {nullptr, "--preset", "NAME",
           "tiny-llama, llama-1b, tiny-qwen35, qwen35-0.8b or qwen35-2b (required)"},
          {nullptr, "--type", "T", "f32, f16, bf16, q8_0 or q4_0 (required)"},
          {"-o", "--output", "FILE", "output file (required)"},
          {nullptr, "--seed", "S", "weight seed (default 0)"},
      }};
  return spec;
}

int cmd_tokenize(int argc, char** argv) {
  const VerbSpec& spec = tokenize_spec();
  Args args;
  if (int rc = parse_verb_args(spec, argc, argv, &args); rc >= 0) return rc;
  if (!args.has("--model")) {
    cli_error(spec.name, "missing -m FILE (the model whose tokenizer to use)");
    return kExitUsage;
  }
  if (args.has("--prompt") == args.has("--file")) {
    cli_error(spec.name, "give exactly one of -p TEXT or -f FILE");
    return kExitUsage;
  }
  std::string text;
  if (args.has("--prompt")) {
    text = args.str("--prompt");
  } else if (!read_text_file(spec.name, args.str("--file"), &text)) {
    return kExitFailure;
  }
  ModelHandle m;
  if (!load_model(args, args.str("--model"), &m, /*vocab_only=*/true)) return kExitFailure;
  const bool special = !args.has("--no-special");
  std::vector<geist_token> ids;
  if (!tokenize_text(spec.name, m, text, special, special, &ids)) return kExitFailure;
  for (size_t i = 0; i < ids.size(); ++i) std::printf(i == 0 ? "%d" : " %d", ids[i]);
  std::printf("\n");
  return 0;
}

int cmd_info(int argc, char** argv) {
  const VerbSpec& spec = info_spec();
  Args args;
  if (int rc = parse_verb_args(spec, argc, argv, &args); rc >= 0) return rc;
  if (!args.has("--model")) {
    cli_error(spec.name, "missing -m FILE (the model to describe)");
    return kExitUsage;
  }
  ModelHandle m;
  if (!load_model(args, args.str("--model"), &m)) return kExitFailure;
  std::string text;
  if (m.describe(&text) != GEIST_OK) {
    cli_error(spec.name, "cannot describe the model: %s", m.last_error());
    return kExitFailure;
  }
  if (text.empty() || text.back() != '\n') text.push_back('\n');
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

namespace {

int print_write_progress(void* /*user*/, float fraction) {
  std::fprintf(stderr, "\rwriting %3d%%", static_cast<int>(fraction * 100.0f + 0.5f));
  std::fflush(stderr);
  return 0;
}

}  // namespace

int cmd_mkmodel(int argc, char** argv) {
  const VerbSpec& spec = mkmodel_spec();
  Args args;
  if (int rc = parse_verb_args(spec, argc, argv, &args); rc >= 0) return rc;
  for (const char* required : {"--preset", "--type", "--output"}) {
    if (!args.has(required)) {
      cli_error(spec.name, "missing %s (see 'geist mkmodel --help')", required);
      return kExitUsage;
    }
  }
  uint64_t seed = 0;
  if (!args.get_u64("--seed", &seed)) return kExitUsage;
  const bool tty = stderr_is_terminal();
  char err[1024] = {0};
  const double t0 = now_seconds();
  const geist_status st = geist_mkmodel(
      args.str("--preset").c_str(), args.str("--type").c_str(), args.str("--output").c_str(), seed,
      tty ? print_write_progress : nullptr, nullptr, err, sizeof(err));
  if (tty) std::fprintf(stderr, "\r%-16s\r", "");
  if (st != GEIST_OK) {
    cli_error(spec.name, "%s", err[0] != '\0' ? err : geist_status_string(st));
    return st == GEIST_E_INVALID_ARG ? kExitUsage : kExitFailure;
  }
  std::fprintf(stderr, "geist mkmodel: wrote %s (%s, %s) in %.1f s\n", args.str("--output").c_str(),
               args.str("--preset").c_str(), args.str("--type").c_str(), now_seconds() - t0);
  return 0;
}

}  // namespace geist_cli
