#include "chat/chat.h"

#include <cstdio>
#include <ctime>
#include <utility>

namespace geist::chat {

namespace {

// Transformers' former default template (ChatML), as llama.cpp also falls back to it.
constexpr std::string_view kChatml =
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

constexpr std::string_view kMarker = "geist-probe-7f3a";

// Renders a probe conversation; false when the template raised.
bool probe_render(const jinja::Template& t, const std::string& bos, const std::string& eos,
                  Json messages, Json tools, std::string* out) {
  Json ctx = Json::object();
  ctx["bos_token"] = bos;
  ctx["eos_token"] = eos;
  ctx["add_generation_prompt"] = true;
  ctx["messages"] = std::move(messages);
  if (!tools.is_null()) ctx["tools"] = std::move(tools);
  jinja::RenderOptions opts;
  opts.now_epoch_seconds = 0;
  opts.limits.max_seconds = 1.0;
  return t.render(ctx, opts, out).is_ok();
}

// Whether the template renders content given as a list of text parts (rather than printing the
// list's repr or raising). Templates that fail get the parts' texts joined, which every
// template renders.
bool probe_content_lists(const jinja::Template& t, const std::string& bos, const std::string& eos) {
  const Json msg = {{"role", "user"},
                    {"content", Json::array({{{"type", "text"}, {"text", kMarker}}})}};
  std::string out;
  if (!probe_render(t, bos, eos, Json::array({msg}), nullptr, &out)) return false;
  return out.find(kMarker) != std::string::npos && out.find("'type'") == std::string::npos &&
         out.find("\"type\"") == std::string::npos;
}

// Whether the template raises on an assistant tool-call turn whose content is null (as OpenAI
// clients send it: Qwen3's tests `'<think>' in content`) but renders it with "" content.
bool probe_needs_string_content(const jinja::Template& t, const std::string& bos,
                                const std::string& eos) {
  const Json tools =
      Json::array({{{"type", "function"},
                    {"function",
                     {{"name", "probe_fn"},
                      {"description", "probe"},
                      {"parameters", {{"type", "object"}, {"properties", Json::object()}}}}}}});
  const auto conversation = [](Json content) {
    const Json call = {{"id", "call_probe01"},
                       {"type", "function"},
                       {"function", {{"name", "probe_fn"}, {"arguments", Json::object()}}}};
    return Json::array(
        {{{"role", "user"}, {"content", kMarker}},
         {{"role", "assistant"}, {"content", content}, {"tool_calls", Json::array({call})}},
         {{"role", "tool"}, {"tool_call_id", "call_probe01"}, {"content", "1"}}});
  };
  std::string out;
  return !probe_render(t, bos, eos, conversation(nullptr), tools, &out) &&
         probe_render(t, bos, eos, conversation(""), tools, &out);
}

Status field_error(size_t i, const char* field, const char* what) {
  return Status::error(GEIST_E_INVALID_ARG, "messages[%zu].%s: %s", i, field, what);
}

// Content parts -> the parts' texts joined by "\n" (for templates that print content).
Status join_text_parts(size_t i, const Json& parts, Json* out) {
  std::string text;
  for (size_t k = 0; k < parts.size(); ++k) {
    const Json& p = parts[k];
    if (!p.is_object() || !p.contains("type") || !p["type"].is_string()) {
      return field_error(i, "content", "each part must be an object with a \"type\"");
    }
    if (p["type"] != "text") {
      return Status::error(GEIST_E_INVALID_ARG,
                           "messages[%zu].content[%zu]: part type '%s' is not supported (text "
                           "only)",
                           i, k, p["type"].get<std::string>().c_str());
    }
    if (!p.contains("text") || !p["text"].is_string()) {
      return field_error(i, "content", "a text part needs a string \"text\"");
    }
    if (k > 0) text += '\n';
    text += p["text"].get<std::string>();
  }
  *out = std::move(text);
  return Status::ok();
}

Status normalize_tool_calls(size_t i, Json* calls) {
  if (!calls->is_array()) return field_error(i, "tool_calls", "must be an array");
  for (Json& call : *calls) {
    if (!call.is_object()) return field_error(i, "tool_calls", "each call must be an object");
    if (!call.contains("function")) continue;
    Json& fn = call["function"];
    if (!fn.is_object()) return field_error(i, "tool_calls", "\"function\" must be an object");
    if (!fn.contains("arguments") || !fn["arguments"].is_string()) continue;
    // OpenAI clients send the arguments as JSON text; templates expect the object.
    Json parsed = Json::parse(fn["arguments"].get<std::string>(), nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object()) fn["arguments"] = std::move(parsed);
  }
  return Status::ok();
}

}  // namespace

std::string_view chatml_template_source() { return kChatml; }

Status parse_now(std::string_view text, int64_t* out) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char sep = 0;
  char tail = 0;
  const std::string t(text);
  if (std::sscanf(t.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d%c", &y, &mo, &d, &sep, &h, &mi, &s, &tail) !=
          7 ||
      (sep != 'T' && sep != ' ') || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
      s > 60 || y < 1970) {
    return Status::error(GEIST_E_INVALID_ARG, "bad date-time '%s' (expected YYYY-MM-DDTHH:MM:SS)",
                         t.c_str());
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  *out = static_cast<int64_t>(timegm(&tm));
  return Status::ok();
}

Status ChatTemplate::create(std::string source, std::string bos_token, std::string eos_token,
                            std::unique_ptr<ChatTemplate>* out) {
  std::unique_ptr<ChatTemplate> t(new ChatTemplate());
  GEIST_RETURN_IF_ERROR(jinja::Template::parse(source, jinja::Limits{}, &t->template_));
  t->takes_content_lists_ = probe_content_lists(*t->template_, bos_token, eos_token);
  t->needs_string_content_ = probe_needs_string_content(*t->template_, bos_token, eos_token);
  t->source_ = std::move(source);
  t->bos_token_ = std::move(bos_token);
  t->eos_token_ = std::move(eos_token);
  *out = std::move(t);
  return Status::ok();
}

Status ChatTemplate::normalize_messages(const Json& messages, Json* out) const {
  if (!messages.is_array()) {
    return Status(GEIST_E_INVALID_ARG, "\"messages\" must be an array");
  }
  Json result = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    Json m = messages[i];
    if (!m.is_object())
      return Status::error(GEIST_E_INVALID_ARG, "messages[%zu]: not an object", i);
    if (!m.contains("role") || !m["role"].is_string()) {
      return field_error(i, "role", "missing or not a string");
    }
    if (m["role"] == "developer") m["role"] = "system";
    if (m.contains("content")) {
      Json& c = m["content"];
      if (c.is_array()) {
        if (!takes_content_lists_) GEIST_RETURN_IF_ERROR(join_text_parts(i, c, &c));
      } else if (c.is_null()) {
        if (needs_string_content_) c = "";
      } else if (!c.is_string()) {
        return field_error(i, "content", "must be a string, a list of parts or null");
      }
    }
    if (m.contains("tool_calls")) GEIST_RETURN_IF_ERROR(normalize_tool_calls(i, &m["tool_calls"]));
    result.push_back(std::move(m));
  }
  *out = std::move(result);
  return Status::ok();
}

Status ChatTemplate::render(const Json& request, std::string* out) const {
  if (!request.is_object()) return Status(GEIST_E_INVALID_ARG, "the request must be an object");
  if (!request.contains("messages")) return Status(GEIST_E_INVALID_ARG, "missing \"messages\"");
  Json ctx = Json::object();
  ctx["bos_token"] = bos_token_;
  ctx["eos_token"] = eos_token_;
  if (request.contains("chat_template_kwargs")) {
    const Json& kw = request["chat_template_kwargs"];
    if (!kw.is_object() && !kw.is_null()) {
      return Status(GEIST_E_INVALID_ARG, "\"chat_template_kwargs\" must be an object");
    }
    if (kw.is_object()) {
      for (auto it = kw.begin(); it != kw.end(); ++it) ctx[it.key()] = it.value();
    }
  }
  Json messages;
  GEIST_RETURN_IF_ERROR(normalize_messages(request["messages"], &messages));
  ctx["messages"] = std::move(messages);
  if (request.contains("tools") && !request["tools"].is_null()) {
    if (!request["tools"].is_array())
      return Status(GEIST_E_INVALID_ARG, "\"tools\" must be an array");
    if (!request["tools"].empty()) ctx["tools"] = request["tools"];
  }
  bool add_generation_prompt = true;
  if (request.contains("add_generation_prompt")) {
    if (!request["add_generation_prompt"].is_boolean()) {
      return Status(GEIST_E_INVALID_ARG, "\"add_generation_prompt\" must be a boolean");
    }
    add_generation_prompt = request["add_generation_prompt"].get<bool>();
  }
  ctx["add_generation_prompt"] = add_generation_prompt;
  jinja::RenderOptions opts;
  if (request.contains("now") && !request["now"].is_null()) {
    if (!request["now"].is_string()) return Status(GEIST_E_INVALID_ARG, "\"now\" must be a string");
    GEIST_RETURN_IF_ERROR(parse_now(request["now"].get<std::string>(), &opts.now_epoch_seconds)
                              .with_prefix("\"now\""));
  }
  return template_->render(ctx, opts, out);
}

}  // namespace geist::chat
