#include "server/openai_params.h"

#include <cctype>
#include <cstdio>
#include <random>

namespace geist_server {

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::optional<ApiError> get_number(const json& body, const char* key, double lo, double hi,
                                   float* out) {
  if (!body.contains(key) || body[key].is_null()) return std::nullopt;
  const json& v = body[key];
  if (!v.is_number()) return bad_param(key, std::string("'") + key + "' must be a number");
  const double d = v.get<double>();
  if (!(d >= lo && d <= hi)) {
    return bad_param(key, std::string("'") + key + "' must be between " + num(lo) + " and " +
                              num(hi) + ", got " + v.dump());
  }
  *out = static_cast<float>(d);
  return std::nullopt;
}

std::optional<ApiError> get_int(const json& body, const char* key, int64_t lo, int64_t hi,
                                int64_t* out) {
  if (!body.contains(key) || body[key].is_null()) return std::nullopt;
  const json& v = body[key];
  if (!v.is_number_integer())
    return bad_param(key, std::string("'") + key + "' must be an integer");
  const int64_t d =
      v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX ? INT64_MAX : v.get<int64_t>();
  if (d < lo || d > hi) {
    return bad_param(key, std::string("'") + key + "' must be between " + std::to_string(lo) +
                              " and " + std::to_string(hi) + ", got " + v.dump());
  }
  *out = d;
  return std::nullopt;
}

std::optional<ApiError> get_bool(const json& body, const char* key, bool* out) {
  if (!body.contains(key) || body[key].is_null()) return std::nullopt;
  if (!body[key].is_boolean())
    return bad_param(key, std::string("'") + key + "' must be a boolean");
  *out = body[key].get<bool>();
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_body(const std::string& text, json* out) {
  *out = json::parse(text, nullptr, false);
  if (out->is_discarded()) {
    ApiError e;
    e.message = "the request body is not valid JSON";
    e.code = "invalid_json";
    return e;
  }
  if (!out->is_object()) {
    ApiError e;
    e.message = "the request body must be a JSON object";
    return e;
  }
  return std::nullopt;
}

std::optional<ApiError> parse_gen_options(const json& body, bool chat, GenOptions* o) {
  geist_sampler_params& s = o->sampler;
  geist_sampler_params_default(&s);
  std::optional<ApiError> e;
  if ((e = get_number(body, "temperature", 0.0, 2.0, &s.temperature))) return e;
  if ((e = get_number(body, "top_p", 0.0, 1.0, &s.top_p))) return e;
  if (body.contains("top_p") && body["top_p"].is_number() && s.top_p <= 0.0f) {
    return bad_param("top_p", "'top_p' must be greater than 0");
  }
  if ((e = get_number(body, "min_p", 0.0, 1.0, &s.min_p))) return e;
  if ((e = get_number(body, "presence_penalty", -2.0, 2.0, &s.presence_penalty))) return e;
  if ((e = get_number(body, "repeat_penalty", 0.0, 10.0, &s.repeat_penalty))) return e;
  if ((e = get_number(body, "frequency_penalty", -2.0, 2.0, &s.frequency_penalty))) return e;
  int64_t i = 0;
  i = s.top_k;
  if ((e = get_int(body, "top_k", 0, 1 << 30, &i))) return e;
  s.top_k = static_cast<int32_t>(i);
  i = s.penalty_last_n;
  if ((e = get_int(body, "repeat_last_n", -1, 1 << 30, &i))) return e;
  s.penalty_last_n = static_cast<int32_t>(i);
  if (body.contains("seed") && !body["seed"].is_null()) {
    int64_t seed = 0;
    if ((e = get_int(body, "seed", INT64_MIN, INT64_MAX, &seed))) return e;
    s.seed = static_cast<uint64_t>(seed);
    o->seed_given = true;
  } else {
    std::random_device rd;
    s.seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  i = 1;
  if ((e = get_int(body, "n", 1, 1 << 30, &i))) return e;
  if (i != 1) return bad_param("n", "only 'n' = 1 is supported");
  for (const char* key : {"max_tokens", "max_completion_tokens", "n_predict"}) {
    int64_t m = o->max_tokens;
    if ((e = get_int(body, key, key[0] == 'n' ? -1 : 1, 1 << 30, &m))) return e;
    if (body.contains(key) && !body[key].is_null()) o->max_tokens = static_cast<int32_t>(m);
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& st = body["stop"];
    if (st.is_string()) {
      o->stop.push_back(st.get<std::string>());
    } else if (st.is_array() && st.size() <= 16) {
      for (const json& x : st) {
        if (!x.is_string())
          return bad_param("stop", "'stop' must be a string or a list of strings");
        o->stop.push_back(x.get<std::string>());
      }
    } else {
      return bad_param("stop", "'stop' must be a string or a list of at most 16 strings");
    }
    for (const std::string& x : o->stop) {
      if (x.empty()) return bad_param("stop", "'stop' strings must not be empty");
    }
  }
  if ((e = get_bool(body, "stream", &o->stream))) return e;
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const json& so = body["stream_options"];
    if (!so.is_object()) return bad_param("stream_options", "'stream_options' must be an object");
    if (so.contains("include_usage") && !so["include_usage"].is_null()) {
      if (!so["include_usage"].is_boolean()) {
        return bad_param("stream_options.include_usage", "'include_usage' must be a boolean");
      }
      o->include_usage = so["include_usage"].get<bool>();
    }
  }
  if (chat) {
    if ((e = get_bool(body, "logprobs", &o->logprobs))) return e;
    i = 0;
    if ((e = get_int(body, "top_logprobs", 0, 20, &i))) return e;
    o->top_logprobs = static_cast<int32_t>(i);
    if (o->top_logprobs > 0 && !o->logprobs) {
      return bad_param("top_logprobs", "'top_logprobs' requires 'logprobs': true");
    }
  } else {
    i = -1;
    if ((e = get_int(body, "logprobs", 0, 5, &i))) return e;
    if (i >= 0) {
      o->logprobs = true;
      o->top_logprobs = static_cast<int32_t>(i);
    }
  }
  if (body.contains("response_format") && !body["response_format"].is_null()) {
    const json& rf = body["response_format"];
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
      return bad_param("response_format", "'response_format' must be an object with a 'type'");
    }
    if (rf["type"] != "text") {
      return bad_param("response_format", "'response_format' of type " + rf["type"].dump() +
                                              " is not supported yet (only \"text\")");
    }
  }
  for (const char* key : {"cache_salt", "prompt_cache_key", "user", "model"}) {
    if (body.contains(key) && !body[key].is_null() && !body[key].is_string()) {
      return bad_param(key, std::string("'") + key + "' must be a string");
    }
  }
  if (body.contains("cache_salt") && body["cache_salt"].is_string()) {
    o->cache_salt = body["cache_salt"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> parse_prompt(const json& body, int32_t n_vocab, PromptInput* out) {
  if (!body.contains("prompt")) return bad_param("prompt", "'prompt' is required");
  const json& p = body["prompt"];
  auto from_ids = [&](const json& arr) -> bool {
    for (const json& t : arr) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab)
        return false;
      out->ids.push_back(t.get<geist_token>());
    }
    return true;
  };
  if (p.is_string() || (p.is_array() && p.size() == 1 && p[0].is_string())) {
    out->is_text = true;
    out->text = p.is_string() ? p.get<std::string>() : p[0].get<std::string>();
    return std::nullopt;
  }
  if (p.is_array() && !p.empty() && p[0].is_number()) {
    if (from_ids(p)) return std::nullopt;
    return bad_param("prompt",
                     "'prompt' token ids must be integers in [0, " + std::to_string(n_vocab) + ")");
  }
  if (p.is_array() && p.size() == 1 && p[0].is_array()) {
    if (from_ids(p[0])) return std::nullopt;
    return bad_param("prompt", "bad token ids in 'prompt'");
  }
  return bad_param("prompt",
                   "'prompt' must be a string, a list of token ids, or a list holding one of "
                   "these (one prompt per request)");
}

std::optional<ApiError> chat_render_request(const json& body, bool add_generation_prompt,
                                            json* out) {
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
    return bad_param("messages", "'messages' must be a non-empty array");
  }
  json r = json::object();
  r["messages"] = body["messages"];
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) return bad_param("tools", "'tools' must be an array");
    const bool none = body.contains("tool_choice") && body["tool_choice"] == "none";
    if (!none) r["tools"] = body["tools"];
  }
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object()) {
      return bad_param("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    }
    r["chat_template_kwargs"] = body["chat_template_kwargs"];
  }
  r["add_generation_prompt"] = add_generation_prompt;
  *out = std::move(r);
  return std::nullopt;
}

json parser_options(const json& body, bool chat, const GenOptions& opt) {
  json popts = json::object();
  if (!opt.stop.empty()) popts["stop"] = opt.stop;
  if (chat && body.contains("tools") && body["tools"].is_array()) {
    popts["tools"] = body["tools"];
    if (body.contains("tool_choice") && body["tool_choice"] == "none")
      popts["parse_tool_calls"] = false;
  }
  return popts;
}

bool valid_session_id(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  }
  return true;
}

std::optional<ApiError> parse_session_id(const json& body, std::string* id) {
  if (!body.contains("id")) return std::nullopt;
  if (!body["id"].is_string() || !valid_session_id(body["id"].get<std::string>())) {
    return bad_param("id", "'id' must be 1-128 characters of [A-Za-z0-9._-]");
  }
  *id = body["id"].get<std::string>();
  return std::nullopt;
}

}  // namespace geist_server
