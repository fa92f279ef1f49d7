// Reading and validating the OpenAI request fields shared by /v1/completions and
// /v1/chat/completions: sampler settings, limits, stop strings, logprobs, streaming options.
// Every refusal names the field (ApiError::param).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "geist/geist.h"
#include "server/api_error.h"

namespace geist_server {

struct GenOptions {
  geist_sampler_params sampler{};
  int32_t max_tokens = -1;  // -1: until the context is full
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  std::string cache_salt;
  bool seed_given = false;
};

// `chat`: chat-completions rules (logprobs is a bool + top_logprobs) rather than legacy
// completions (logprobs is an integer 0..5).
std::optional<ApiError> parse_gen_options(const json& body, bool chat, GenOptions* out);

// The request body as a JSON object, or the error for malformed JSON / a non-object.
std::optional<ApiError> parse_body(const std::string& text, json* out);

}  // namespace geist_server
