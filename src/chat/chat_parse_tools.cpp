#include "chat/chat_parse_tools.h"

#include <algorithm>

namespace geist::chat::detail {

std::string_view ltrim(std::string_view s) {
  size_t b = 0;
  while (b < s.size() && is_space(s[b])) ++b;
  return s.substr(b);
}

std::string_view trim(std::string_view s) {
  s = ltrim(s);
  size_t e = s.size();
  while (e > 0 && is_space(s[e - 1])) --e;
  return s.substr(0, e);
}

std::string dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

namespace {

Json parse_or_discarded(std::string_view text) {
  return Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

// The arguments value as JSON object text, or false.
bool arguments_text(const Json& args, std::string* out) {
  if (args.is_object()) {
    *out = dump_json(args);
    return true;
  }
  if (args.is_string()) {
    const Json inner = parse_or_discarded(args.get_ref<const std::string&>());
    if (!inner.is_object()) return false;
    *out = dump_json(inner);
    return true;
  }
  return false;
}

const Json* find_function(const Json& tools, std::string_view name) {
  if (!tools.is_array()) return nullptr;
  for (const Json& tool : tools) {
    if (!tool.is_object()) continue;
    auto fn = tool.find("function");
    const Json& f = fn != tool.end() ? *fn : tool;
    if (!f.is_object()) continue;
    auto n = f.find("name");
    if (n != f.end() && n->is_string() && n->get_ref<const std::string&>() == name) return &f;
  }
  return nullptr;
}

const Json* find_param_schema(const Json* function, std::string_view param) {
  if (function == nullptr) return nullptr;
  auto params = function->find("parameters");
  if (params == function->end() || !params->is_object()) return nullptr;
  auto props = params->find("properties");
  if (props == params->end() || !props->is_object()) return nullptr;
  auto p = props->find(std::string(param));
  return p != props->end() && p->is_object() ? &*p : nullptr;
}

// The JSON types a schema allows ("type" as a string or a list, or anyOf / oneOf of such).
void collect_types(const Json& schema, std::vector<std::string>* types, int depth = 0) {
  if (!schema.is_object() || depth > 8) return;
  auto t = schema.find("type");
  if (t != schema.end()) {
    if (t->is_string()) types->push_back(t->get<std::string>());
    if (t->is_array()) {
      for (const Json& x : *t) {
        if (x.is_string()) types->push_back(x.get<std::string>());
      }
    }
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    auto alts = schema.find(key);
    if (alts == schema.end() || !alts->is_array()) continue;
    for (const Json& alt : *alts) collect_types(alt, types, depth + 1);
  }
}

Json convert_param(const std::string& value, const Json* schema) {
  std::vector<std::string> types;
  if (schema != nullptr) collect_types(*schema, &types);
  const auto allows = [&](std::string_view t) {
    return std::find(types.begin(), types.end(), t) != types.end();
  };
  if (types.empty() || allows("string")) return value;
  const std::string_view v = trim(value);
  Json parsed = parse_or_discarded(v);
  if (!parsed.is_discarded()) return parsed;
  if (allows("boolean")) {
    std::string lower(v);
    for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (lower == "true") return true;
    if (lower == "false") return false;
  }
  return value;
}

bool starts_with(std::string_view s, size_t pos, std::string_view what) {
  return s.substr(pos, what.size()) == what;
}

void skip_space(std::string_view s, size_t* pos) {
  while (*pos < s.size() && is_space(s[*pos])) ++*pos;
}

// The NAME of "<tag=NAME>" at *pos; advances past '>'.
bool read_tag_name(std::string_view s, std::string_view tag, size_t* pos, std::string* name) {
  if (!starts_with(s, *pos, tag)) return false;
  const size_t b = *pos + tag.size();
  const size_t e = s.find('>', b);
  if (e == s.npos) return false;
  const std::string_view n = trim(s.substr(b, e - b));
  if (n.empty() || n.find_first_of("<\n") != n.npos) return false;
  *name = std::string(n);
  *pos = e + 1;
  return true;
}

}  // namespace

bool parse_json_call(std::string_view text, ToolCall* out) {
  const Json obj = parse_or_discarded(trim(text));
  if (!obj.is_object()) return false;
  auto name = obj.find("name");
  if (name == obj.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return false;
  }
  ToolCall call;
  call.name = name->get<std::string>();
  auto args = obj.find("arguments");
  if (args == obj.end()) args = obj.find("parameters");
  if (args == obj.end()) {
    call.arguments = "{}";
  } else if (!arguments_text(*args, &call.arguments)) {
    return false;
  }
  auto id = obj.find("id");
  if (id != obj.end() && id->is_string()) call.id = id->get<std::string>();
  *out = std::move(call);
  return true;
}

bool parse_qwen3_coder_calls(std::string_view body, const Json& tools, std::vector<ToolCall>* out) {
  std::vector<ToolCall> calls;
  size_t pos = 0;
  for (;;) {
    skip_space(body, &pos);
    if (pos == body.size()) break;
    ToolCall call;
    if (!read_tag_name(body, "<function=", &pos, &call.name)) return false;
    const Json* function = find_function(tools, call.name);
    Json args = Json::object();
    for (;;) {
      skip_space(body, &pos);
      if (pos == body.size()) break;  // a last function without </function>
      if (starts_with(body, pos, "</function>")) {
        pos += 11;
        break;
      }
      std::string param;
      if (!read_tag_name(body, "<parameter=", &pos, &param)) return false;
      const size_t end = body.find("</parameter>", pos);
      if (end == body.npos) return false;
      std::string_view value = body.substr(pos, end - pos);
      if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
      if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
      args[param] = convert_param(std::string(value), find_param_schema(function, param));
      pos = end + 12;
    }
    call.arguments = dump_json(args);
    calls.push_back(std::move(call));
  }
  if (calls.empty()) return false;
  for (ToolCall& c : calls) out->push_back(std::move(c));
  return true;
}

bool parse_glm45_call(std::string_view body, const Json& tools, ToolCall* out) {
  size_t pos = 0;
  skip_space(body, &pos);
  const size_t name_end = std::min(body.find_first_of("<\n", pos), body.size());
  const std::string_view name = trim(body.substr(pos, name_end - pos));
  if (name.empty()) return false;
  ToolCall call;
  call.name = std::string(name);
  const Json* function = find_function(tools, call.name);
  Json args = Json::object();
  pos = name_end;
  for (;;) {
    skip_space(body, &pos);
    if (pos == body.size()) break;
    if (!starts_with(body, pos, "<arg_key>")) return false;
    const size_t key_end = body.find("</arg_key>", pos);
    if (key_end == body.npos) return false;
    const std::string key(trim(body.substr(pos + 9, key_end - pos - 9)));
    pos = key_end + 10;
    skip_space(body, &pos);
    if (key.empty() || !starts_with(body, pos, "<arg_value>")) return false;
    const size_t value_end = body.find("</arg_value>", pos);
    if (value_end == body.npos) return false;
    const std::string value(body.substr(pos + 11, value_end - pos - 11));
    args[key] = convert_param(value, find_param_schema(function, key));
    pos = value_end + 12;
  }
  call.arguments = dump_json(args);
  *out = std::move(call);
  return true;
}

}  // namespace geist::chat::detail
