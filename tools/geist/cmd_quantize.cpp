// geist quantize: re-quantizes a GGUF model's weight matrices (like llama-quantize).
#include <sys/stat.h>

#include <cstdio>
#include <string>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "geist/geist_util.h"

namespace geist_cli {

const VerbSpec& quantize_spec() {
  static const VerbSpec spec = {
      "quantize",
      "-m IN --type T -o OUT",
      "Writes a copy of the model with its weight matrices converted to type T.\n"
      "Metadata is copied unchanged except general.file_type. Matrices (name *.weight, 2+\n"
      "dimensions, not ssm_conv1d) whose rows are whole blocks of T are dequantized to f32\n"
      "and quantized to T; norms, biases and rows that do not fit T's block are copied.\n"
      "Types: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl (blocks of 32); q2_k,\n"
      "q3_k, q4_k, q5_k, q6_k, iq4_xs (256). Matrices whose rows are whole 32- but not\n"
      "256-blocks fall back as llama-quantize does: q2_k/q3_k to q4_0, q5_k to q5_1, iq4_xs\n"
      "to iq4_nl; q4_k and q6_k to q8_0. Targets below 5 bits keep token_embd.weight and\n"
      "output.weight at q8_0 (llama-quantize also spends more bits on them: q6_k for output).\n"
      "Bytes match llama-quantize's (no imatrix) for every type but q4_k/q6_k, which come\n"
      "from geist's own scale search.",
      {
          {"-m", "--model", "FILE", "input GGUF model (required)"},
          {nullptr, "--type", "T", "one of the types above (required)"},
          {"-o", "--output", "FILE", "output file, not the input (required)"},
      }};
  return spec;
}

namespace {

int print_quantize_progress(void* /*user*/, float fraction) {
  std::fprintf(stderr, "\rquantizing %3d%%", static_cast<int>(fraction * 100.0f + 0.5f));
  std::fflush(stderr);
  return 0;
}

double file_mib(const std::string& path) {
  struct stat s {};
  if (::stat(path.c_str(), &s) != 0) return 0.0;
  return static_cast<double>(s.st_size) / (1024.0 * 1024.0);
}

}  // namespace

int cmd_quantize(int argc, char** argv) {
  const VerbSpec& spec = quantize_spec();
  Args args;
  if (int rc = parse_verb_args(spec, argc, argv, &args); rc >= 0) return rc;
  for (const char* required : {"--model", "--type", "--output"}) {
    if (!args.has(required)) {
      cli_error(spec.name, "missing %s (see 'geist quantize --help')", required);
      return kExitUsage;
    }
  }
  const std::string& in = args.str("--model");
  const std::string& out = args.str("--output");
  const std::string& type = args.str("--type");
  const bool tty = stderr_is_terminal();
  char err[1024] = {0};
  const double t0 = now_seconds();
  const geist_status st =
      geist_quantize(in.c_str(), out.c_str(), type.c_str(), tty ? print_quantize_progress : nullptr,
                     nullptr, err, sizeof(err));
  if (tty) std::fprintf(stderr, "\r%-16s\r", "");
  if (st != GEIST_OK) {
    cli_error(spec.name, "%s", err[0] != '\0' ? err : geist_status_string(st));
    return st == GEIST_E_INVALID_ARG ? kExitUsage : kExitFailure;
  }
  std::fprintf(stderr, "geist quantize: wrote %s (%s): %.2f MiB -> %.2f MiB in %.1f s\n",
               out.c_str(), type.c_str(), file_mib(in), file_mib(out), now_seconds() - t0);
  return 0;
}

}  // namespace geist_cli
