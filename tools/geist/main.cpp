// geist: command-line front end over the public C API.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli_args.h"
#include "commands.h"
#include "geist/geist.h"

namespace {

struct Verb {
  const geist_cli::VerbSpec& (*spec)();
  int (*run)(int argc, char** argv);
};

const Verb kVerbs[] = {
    {geist_cli::run_spec, geist_cli::cmd_run},
    {geist_cli::chat_spec, geist_cli::cmd_chat},
    {geist_cli::template_spec, geist_cli::cmd_template},
    {geist_cli::logits_spec, geist_cli::cmd_logits},
    {geist_cli::tokenize_spec, geist_cli::cmd_tokenize},
    {geist_cli::info_spec, geist_cli::cmd_info},
    {geist_cli::mkmodel_spec, geist_cli::cmd_mkmodel},
    {geist_cli::quantize_spec, geist_cli::cmd_quantize},
    {geist_cli::demo_spec, geist_cli::cmd_demo},
    {geist_cli::bench_spec, geist_cli::cmd_bench},
    {geist_cli::bench_snapshot_spec, geist_cli::cmd_bench_snapshot},
    {geist_cli::bench_tier_spec, geist_cli::cmd_bench_tier},
    {geist_cli::serve_spec, geist_cli::cmd_serve},
};

void print_usage(FILE* f) {
  std::fprintf(f, "geist %s: LLM inference on GGUF models\n\nusage: geist VERB [options]\n\n",
               geist_version());
  std::fprintf(f, "verbs:\n");
  for (const Verb& v : kVerbs) {
    const geist_cli::VerbSpec& s = v.spec();
    std::fprintf(f, "  %-9s %s\n", s.name, s.synopsis);
  }
  std::fprintf(f, "\n'geist VERB --help' describes a verb's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return geist_cli::kExitUsage;
  }
  const std::string verb = argv[1];
  if (verb == "-h" || verb == "--help" || verb == "help") {
    print_usage(stdout);
    return 0;
  }
  if (verb == "--version") {
    std::printf("geist %s\n", geist_version());
    return 0;
  }
  for (const Verb& v : kVerbs) {
    if (verb == v.spec().name) return v.run(argc - 2, argv + 2);
  }
  std::string names;  // every verb, from the table, so the list cannot go stale
  for (const Verb& v : kVerbs) {
    if (!names.empty()) names += ", ";
    names += v.spec().name;
  }
  geist_cli::cli_error("", "unknown command '%s' (expected one of: %s)", verb.c_str(),
                       names.c_str());
  return geist_cli::kExitUsage;
}
