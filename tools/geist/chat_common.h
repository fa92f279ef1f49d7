// Chat helpers shared by the CLI verbs (template, chat, run --chat); public API only.
#pragma once

#include <string>
#include <vector>

#include "cli_args.h"
#include "cli_common.h"
#include "geist/geist_chat.hpp"

namespace geist_cli {

using geist::ChatParser;
using geist::ChatTemplate;

// The template --chat-template FILE names, else the model's (--template-name NAME picks a named
// one, e.g. tool_use), else ChatML with a warning. Prints "geist VERB: ..." and returns false
// on failure.
bool load_chat_template(const std::string& verb, const Args& args, const ModelHandle& model,
                        ChatTemplate* out);

// Renders request_json (geist_chat_render's shape). On failure prints the template's message
// ("geist VERB: template error: ...") and returns false.
bool render_chat(const std::string& verb, const ChatTemplate& tmpl, const std::string& request_json,
                 std::string* out);

// Tokenizes a rendered prompt: special token texts parsed, BOS added as the model asks unless
// the text already starts with it (templates usually write bos_token themselves).
bool tokenize_prompt(const std::string& verb, const ModelHandle& model, const std::string& prompt,
                     std::vector<geist_token>* out);

}  // namespace geist_cli
