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

// /v1/completions' `prompt`: text, token ids (each in [0, n_vocab)), or a list holding one of
// these (one prompt per request).
struct PromptInput {
  bool is_text = false;
  std::string text;
  std::vector<geist_token> ids;
};
std::optional<ApiError> parse_prompt(const json& body, int32_t n_vocab, PromptInput* out);

// The chat C ABI's render request (docs/CHAT.md) for a chat body: its `messages` (a non-empty
// array), `tools` (an array; left out for tool_choice "none"), `chat_template_kwargs` (an
// object) and add_generation_prompt.
std::optional<ApiError> chat_render_request(const json& body, bool add_generation_prompt,
                                            json* out);

// The output parser's options (geist_chat_parser_create) for a request: its stop strings and,
// for chat, its tools (tool_choice "none": tool calls are not parsed).
json parser_options(const json& body, bool chat, const GenOptions& opt);

// A session's `id` from a create / fork body: absent leaves *id as it is; else 1-128
// characters of [A-Za-z0-9._-].
std::optional<ApiError> parse_session_id(const json& body, std::string* id);
bool valid_session_id(const std::string& id);

}  // namespace geist_server
