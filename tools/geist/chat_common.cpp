#include "chat_common.h"

#include <cstdio>

#include "cli_common.h"

namespace geist_cli {

bool load_chat_template(const std::string& verb, const Args& args, const ModelHandle& model,
                        ChatTemplate* out) {
  std::string err;
  geist_status st = GEIST_OK;
  if (args.has("--chat-template")) {
    std::string source;
    if (!read_text_file(verb, args.str("--chat-template"), &source)) return false;
    st = ChatTemplate::create_for_model(model, source, out, &err);
  } else {
    const std::string name = args.has("--template-name") ? args.str("--template-name") : "";
    bool fallback = false;
    st = ChatTemplate::from_model(model, name, out, &fallback, &err);
    if (st == GEIST_OK && fallback) {
      std::fprintf(stderr,
                   "geist %s: warning: the model has no chat template; using ChatML "
                   "(--chat-template FILE gives one)\n",
                   verb.c_str());
    }
  }
  if (st != GEIST_OK) {
    cli_error(verb, "%s", err.c_str());
    return false;
  }
  return true;
}

bool render_chat(const std::string& verb, const ChatTemplate& tmpl, const std::string& request_json,
                 std::string* out) {
  const geist_status st = tmpl.render(request_json, out);
  if (st != GEIST_OK) {
    cli_error(verb, "%s: %s", st == GEIST_E_FORMAT ? "template error" : "cannot render the chat",
              tmpl.last_error());
    return false;
  }
  return true;
}

bool tokenize_prompt(const std::string& verb, const ModelHandle& model, const std::string& prompt,
                     std::vector<geist_token>* out) {
  if (!tokenize_text(verb, model, prompt, true, true, out)) return false;
  const geist_token bos = model.token_bos();
  if (bos >= 0 && out->size() >= 2 && (*out)[0] == bos && (*out)[1] == bos) {
    out->erase(out->begin());  // the template wrote bos_token and the tokenizer added one
  }
  return true;
}

}  // namespace geist_cli
