// Stand-in for the chat layer's C ABI (include/geist/geist_chat.h) in builds whose tree does not
// have its implementation yet: CMake defines GEIST_SERVER_CHAT_FALLBACK only then, and the
// real implementation replaces this file's symbols as soon as it is merged. It renders ChatML
// (what a template-less model gets anyway), refuses custom templates, and its output parser
// applies stop strings only (no reasoning or tool-call parsing).
#ifdef GEIST_SERVER_CHAT_FALLBACK

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "geist/geist_chat.h"

using json = nlohmann::ordered_json;

struct geist_chat_template {
  std::string source = "chatml (built-in stand-in)";
  std::string error;
};

struct geist_chat_parser {
  std::vector<std::string> stop;
  std::string held;     // text not yet emitted: may start a stop string or a UTF-8 character
  std::string content;  // everything emitted
  std::string out;      // last deltas JSON
  std::string message;
  bool stopped = false, finished = false;
};

namespace {
void put_err(char* buf, size_t cap, const std::string& msg) {
  if (buf == nullptr || cap == 0) return;
  const size_t n = std::min(cap - 1, msg.size());
  std::memcpy(buf, msg.data(), n);
  buf[n] = '\0';
}

size_t utf8_complete(const std::string& s) {
  size_t i = s.size(), back = 0;
  while (i > 0 && back < 4) {
    const unsigned char c = static_cast<unsigned char>(s[i - 1]);
    if ((c & 0xC0) != 0x80) {
      const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      return back + 1 >= need ? s.size() : i - 1;
    }
    --i;
    ++back;
  }
  return s.size();
}

std::string deltas_of(const std::string& text) {
  json a = json::array();
  if (!text.empty()) a.push_back(json{{"content", text}});
  return a.dump(-1, ' ', false, json::error_handler_t::replace);
}
}  // namespace

extern "C" {

geist_status geist_chat_template_from_model(const geist_model* model, const char* name,
                                            geist_chat_template** out, int* out_is_fallback,
                                            char* err_buf, size_t err_cap) {
  if (model == nullptr || out == nullptr) return GEIST_E_INVALID_ARG;
  if (name != nullptr && name[0] != '\0') {
    put_err(err_buf, err_cap, "named templates need the chat layer");
    return GEIST_E_NOT_FOUND;
  }
  *out = new geist_chat_template();
  if (out_is_fallback != nullptr) *out_is_fallback = 1;
  return GEIST_OK;
}

geist_status geist_chat_template_create(const char*, size_t, const char*, const char*,
                                        geist_chat_template** out, char* err_buf, size_t err_cap) {
  if (out != nullptr) *out = nullptr;
  put_err(err_buf, err_cap, "custom chat templates need the chat layer (not in this build)");
  return GEIST_E_UNSUPPORTED;
}

void geist_chat_template_free(geist_chat_template* t) { delete t; }

const char* geist_chat_template_last_error(const geist_chat_template* t) {
  return t != nullptr ? t->error.c_str() : "";
}

const char* geist_chat_template_source(const geist_chat_template* t) {
  return t != nullptr ? t->source.c_str() : "";
}

geist_status geist_chat_render(geist_chat_template* t, const char* request_json, size_t request_len,
                               char* out, size_t cap, size_t* n_out) {
  if (t == nullptr || request_json == nullptr || n_out == nullptr) return GEIST_E_INVALID_ARG;
  const json req = json::parse(request_json, request_json + request_len, nullptr, false);
  auto fail = [&](const std::string& m) {
    t->error = m;
    return GEIST_E_INVALID_ARG;
  };
  if (!req.is_object()) return fail("request is not a JSON object");
  if (!req.contains("messages") || !req["messages"].is_array()) {
    return fail("'messages' must be an array");
  }
  std::string text;
  for (size_t i = 0; i < req["messages"].size(); ++i) {
    const json& m = req["messages"][i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return fail("'" + at + ".role' must be a string");
    }
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";
    std::string content;
    if (m.contains("content") && m["content"].is_string()) {
      content = m["content"].get<std::string>();
    } else if (m.contains("content") && m["content"].is_array()) {
      for (const json& p : m["content"]) {
        if (p.is_object() && p.contains("text") && p["text"].is_string()) {
          content += p["text"].get<std::string>();
        } else {
          return fail("'" + at + ".content' parts must be text parts");
        }
      }
    } else if (m.contains("content") && !m["content"].is_null()) {
      return fail("'" + at + ".content' must be a string, a list of parts or null");
    }
    text += "<|im_start|>" + role + "\n" + content + "<|im_end|>\n";
  }
  const bool gen = !req.contains("add_generation_prompt") ||
                   !req["add_generation_prompt"].is_boolean() ||
                   req["add_generation_prompt"].get<bool>();
  if (gen) text += "<|im_start|>assistant\n";
  *n_out = text.size();
  if (cap < text.size())
    return out == nullptr && cap == 0 ? GEIST_E_INVALID_ARG : GEIST_E_INVALID_ARG;
  std::memcpy(out, text.data(), text.size());
  return GEIST_OK;
}

geist_status geist_chat_parser_create(const geist_chat_template*, const char*, size_t,
                                      const char* options_json, size_t options_len,
                                      geist_chat_parser** out, char* err_buf, size_t err_cap) {
  if (out == nullptr) return GEIST_E_INVALID_ARG;
  auto* p = new geist_chat_parser();
  if (options_json != nullptr && options_len > 0) {
    const json o = json::parse(options_json, options_json + options_len, nullptr, false);
    if (!o.is_object()) {
      delete p;
      put_err(err_buf, err_cap, "options are not a JSON object");
      return GEIST_E_INVALID_ARG;
    }
    if (o.contains("stop") && o["stop"].is_string()) p->stop.push_back(o["stop"]);
    if (o.contains("stop") && o["stop"].is_array()) {
      for (const json& s : o["stop"]) {
        if (s.is_string() && !s.get<std::string>().empty()) p->stop.push_back(s);
      }
    }
  }
  *out = p;
  return GEIST_OK;
}

void geist_chat_parser_free(geist_chat_parser* p) { delete p; }

geist_status geist_chat_parser_feed(geist_chat_parser* p, const char* text, size_t len,
                                    const char** out_json, int* out_stopped) {
  if (p == nullptr || out_json == nullptr || out_stopped == nullptr) return GEIST_E_INVALID_ARG;
  if (p->finished) return GEIST_E_INVALID_STATE;
  std::string emit;
  if (!p->stopped) {
    p->held.append(text, len);
    size_t cut = std::string::npos;
    for (const std::string& s : p->stop) cut = std::min(cut, p->held.find(s));
    if (cut != std::string::npos) {
      emit = p->held.substr(0, cut);
      p->held.clear();
      p->stopped = true;
    } else {
      // Hold back the longest tail that is a proper prefix of a stop string.
      size_t keep = 0;
      for (const std::string& s : p->stop) {
        for (size_t k = std::min(s.size() - 1, p->held.size()); k > keep; --k) {
          if (p->held.compare(p->held.size() - k, k, s, 0, k) == 0) {
            keep = k;
            break;
          }
        }
      }
      size_t n = p->held.size() - keep;
      n = utf8_complete(p->held.substr(0, n));
      emit = p->held.substr(0, n);
      p->held.erase(0, n);
    }
  }
  p->content += emit;
  p->out = deltas_of(emit);
  *out_json = p->out.c_str();
  *out_stopped = p->stopped ? 1 : 0;
  return GEIST_OK;
}

geist_status geist_chat_parser_finish(geist_chat_parser* p, const char** out_deltas,
                                      const char** out_message) {
  if (p == nullptr || out_deltas == nullptr || out_message == nullptr) return GEIST_E_INVALID_ARG;
  if (p->finished) return GEIST_E_INVALID_STATE;
  p->finished = true;
  const std::string rest = p->stopped ? "" : p->held;
  p->held.clear();
  p->content += rest;
  p->out = deltas_of(rest);
  json m = {{"role", "assistant"}, {"content", p->content}};
  p->message = m.dump(-1, ' ', false, json::error_handler_t::replace);
  *out_deltas = p->out.c_str();
  *out_message = p->message.c_str();
  return GEIST_OK;
}

}  // extern "C"

#endif  // GEIST_SERVER_CHAT_FALLBACK
