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

// Length of the longest suffix of `text` that is a proper prefix of one of `markers`.
size_t partial_marker_len(std::string_view text, const std::vector<std::string_view>& markers) {
  size_t best = 0;
  for (std::string_view m : markers) {
    for (size_t k = std::min(m.size() - 1, text.size()); k > best; --k) {
      if (text.substr(text.size() - k) == m.substr(0, k)) {
        best = k;
        break;
      }
    }
  }
  return best;
}

// The earliest of `markers` in text: its position and index, or npos.
size_t find_first_marker(std::string_view text, const std::vector<std::string_view>& markers,
                         size_t* which) {
  size_t best = std::string_view::npos;
  for (size_t i = 0; i < markers.size(); ++i) {
    const size_t p = text.find(markers[i]);
    if (p < best) {
      best = p;
      *which = i;
    }
  }
  return best;
}

bool is_proper_prefix(std::string_view text, std::string_view of) {
  return text.size() < of.size() && of.substr(0, text.size()) == text;
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

bool allows_type(const std::vector<std::string>& types, std::string_view t) {
  return std::find(types.begin(), types.end(), t) != types.end();
}

}  // namespace

const Json* param_schema(const Json& tools, std::string_view function, std::string_view param) {
  return find_param_schema(find_function(tools, function), param);
}

bool param_is_text(const Json* schema) {
  std::vector<std::string> types;
  if (schema != nullptr) collect_types(*schema, &types);
  return types.empty() || allows_type(types, "string");
}

Json convert_param(const std::string& value, const Json* schema) {
  std::vector<std::string> types;
  if (schema != nullptr) collect_types(*schema, &types);
  const auto allows = [&](std::string_view t) { return allows_type(types, t); };
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

}  // namespace geist::chat::detail
