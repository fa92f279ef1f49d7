// Errors in OpenAI's schema: {"error": {"message", "type", "param", "code"}}, with the HTTP
// status they are sent with.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace geist_server {

using json = nlohmann::ordered_json;

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;            // "" -> null
  std::string code;             // "" -> null
  json extra = json::object();  // added to the error object (n_prompt_tokens, n_ctx, ...)
};

inline ApiError bad_param(const std::string& param, const std::string& message) {
  ApiError e;
  e.param = param;
  e.message = message;
  return e;
}

inline json error_json(const ApiError& e) {
  json err = json::object();
  err["message"] = e.message;
  err["type"] = e.type;
  err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  err["code"] = e.code.empty() ? json(nullptr) : json(e.code);
  for (auto it = e.extra.begin(); it != e.extra.end(); ++it) err[it.key()] = it.value();
  return json{{"error", err}};
}

// JSON text for the wire: invalid UTF-8 (a token piece cut inside a character) is replaced,
// never thrown on.
inline std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace geist_server
