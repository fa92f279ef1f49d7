// geist template: renders an OpenAI chat request through the model's chat template and prints
// the prompt exactly (the tool to reach for when a prefix cache misses).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "chat_common.h"
#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"

namespace geist_cli {

const VerbSpec& template_spec() {
  static const VerbSpec spec = {
      "template",
      "-m FILE --request FILE.json [--chat-template FILE] [--now YYYY-MM-DDTHH:MM:SS]",
      "Renders an OpenAI chat request body (messages, optional tools, add_generation_prompt\n"
      "(default true), chat_template_kwargs such as enable_thinking) through the model's chat\n"
      "template and prints the prompt to stdout exactly, nothing added. bos_token / eos_token\n"
      "are the model's token texts. A template error exits with 1 and the template's message on\n"
      "stderr.",
      {
          {"-m", "--model", "FILE", "GGUF model (required; a vocab-only file is enough)"},
          {nullptr, "--request", "FILE", "the request body, JSON (required)"},
          {nullptr, "--chat-template", "FILE", "a Jinja template instead of the model's"},
          {nullptr, "--template-name", "NAME",
           "a named template of the model (tokenizer.chat_template.NAME, e.g. tool_use)"},
          {nullptr, "--now", "TIME", "the instant strftime_now renders (default: now)"},
      }};
  return spec;
}

int cmd_template(int argc, char** argv) {
  const VerbSpec& spec = template_spec();
  Args args;
  if (int rc = parse_verb_args(spec, argc, argv, &args); rc >= 0) return rc;
  if (!args.has("--model") || !args.has("--request")) {
    cli_error(spec.name, "missing -m FILE or --request FILE.json");
    return kExitUsage;
  }
  std::string body;
  if (!read_text_file(spec.name, args.str("--request"), &body)) return kExitFailure;
  const nlohmann::ordered_json req = nlohmann::ordered_json::parse(body, nullptr, false);
  if (req.is_discarded() || !req.is_object()) {
    cli_error(spec.name, "%s: not a JSON object", args.str("--request").c_str());
    return kExitFailure;
  }
  nlohmann::ordered_json r = nlohmann::ordered_json::object();
  for (const char* key : {"messages", "tools", "add_generation_prompt", "chat_template_kwargs"}) {
    if (req.contains(key)) r[key] = req[key];
  }
  if (args.has("--now")) r["now"] = args.str("--now");

  ModelHandle m;
  if (!load_model(args, args.str("--model"), &m, /*vocab_only=*/true)) return kExitFailure;
  ChatTemplate t;
  if (!load_chat_template(spec.name, args, m, &t)) return kExitFailure;
  std::string prompt;
  if (!render_chat(spec.name, t, r.dump(), &prompt)) return kExitFailure;
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace geist_cli
