#include "chat_common.h"

#include <cstdio>

#include "cli_common.h"

namespace geist_cli {

bool load_chat_template(const std::string& verb, const Args& args, geist_model* model,
                        TemplateHandle* out) {
  char err[1024] = {};
  geist_status st = GEIST_OK;
  if (args.has("--chat-template")) {
    std::string source;
    if (!read_text_file(verb, args.str("--chat-template"), &source)) return false;
    st = geist_chat_template_create_for_model(model, source.data(), source.size(), &out->tmpl, err,
                                              sizeof err);
  } else {
    const char* name = args.has("--template-name") ? args.str("--template-name").c_str() : nullptr;
    int fallback = 0;
    st = geist_chat_template_from_model(model, name, &out->tmpl, &fallback, err, sizeof err);
    if (st == GEIST_OK && fallback) {
      std::fprintf(stderr,
                   "geist %s: warning: the model has no chat template; using ChatML "
                   "(--chat-template FILE gives one)\n",
                   verb.c_str());
    }
  }
  if (st != GEIST_OK) {
    cli_error(verb, "%s", err);
    return false;
  }
  return true;
}

bool render_chat(const std::string& verb, geist_chat_template* tmpl,
                 const std::string& request_json, std::string* out) {
  size_t n = 0;
  out->assign(4096, '\0');
  geist_status st = geist_chat_render(tmpl, request_json.data(), request_json.size(), out->data(),
                                      out->size(), &n);
  if (st == GEIST_E_INVALID_ARG && n > out->size()) {
    out->assign(n, '\0');
    st = geist_chat_render(tmpl, request_json.data(), request_json.size(), out->data(), out->size(),
                           &n);
  }
  if (st != GEIST_OK) {
    cli_error(verb, "%s: %s", st == GEIST_E_FORMAT ? "template error" : "cannot render the chat",
              geist_chat_template_last_error(tmpl));
    return false;
  }
  out->resize(n);
  return true;
}

bool tokenize_prompt(const std::string& verb, geist_model* model, const std::string& prompt,
                     std::vector<geist_token>* out) {
  if (!tokenize_text(verb, model, prompt, true, true, out)) return false;
  const geist_token bos = geist_model_token_bos(model);
  if (bos >= 0 && out->size() >= 2 && (*out)[0] == bos && (*out)[1] == bos) {
    out->erase(out->begin());  // the template wrote bos_token and the tokenizer added one
  }
  return true;
}

}  // namespace geist_cli
