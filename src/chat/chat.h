// Chat rendering: an OpenAI-shaped conversation through a model's Jinja chat template, as
// Hugging Face transformers' apply_chat_template renders it, with the adjustments every
// OpenAI-compatible server makes to what clients send (docs/CHAT.md):
// - "developer" messages are rendered as "system";
// - a tool call whose "arguments" is a JSON string is given to the template as the object it
//   encodes (templates iterate arguments; Qwen3.5's raises on a string);
// - content given as a list of text parts stays a list for templates that handle lists, and
//   becomes the parts' texts joined by "\n" for templates that only print strings (decided by
//   rendering a probe conversation when the template is created).
// - null content (a tool-call turn) stays None, except for templates that raise on it but not
//   on "" (Qwen3's): those get "" (also decided by a probe).
// No model knowledge: the caller passes the template source and the bos / eos token texts.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "chat/jinja.h"

namespace geist::chat {

using Json = jinja::Json;

// ChatML, for models whose file carries no template (what llama.cpp and transformers fall back
// to).
std::string_view chatml_template_source();

// Parses an ISO 8601 local date-time "YYYY-MM-DDTHH:MM:SS" (or with a space) into the value
// RenderOptions::now_epoch_seconds takes. GEIST_E_INVALID_ARG naming the text otherwise.
Status parse_now(std::string_view text, int64_t* out);

class ChatTemplate {
 public:
  // GEIST_E_FORMAT when the source does not parse (the message says where).
  static Status create(std::string source, std::string bos_token, std::string eos_token,
                       std::unique_ptr<ChatTemplate>* out);

  // request: {"messages": [...], "tools"?: [...], "add_generation_prompt"?: bool (default
  // true), "chat_template_kwargs"?: {...}, "now"?: "YYYY-MM-DDTHH:MM:SS"}.
  // GEIST_E_INVALID_ARG for a request of another shape (the message names the field),
  // GEIST_E_FORMAT when the template raised (its own message), GEIST_E_INVALID_ARG when a
  // render limit was hit. Thread-safe.
  Status render(const Json& request, std::string* out) const;

  // The conversation as the template sees it (the adjustments above applied), for tests and
  // diagnosis. Same errors as render for the messages' shape.
  Status normalize_messages(const Json& messages, Json* out) const;

  const std::string& source() const { return source_; }
  // Whether the template renders content parts itself (so they stay lists).
  bool takes_content_lists() const { return takes_content_lists_; }

 private:
  ChatTemplate() = default;

  std::string source_;
  std::string bos_token_;
  std::string eos_token_;
  bool takes_content_lists_ = false;
  bool needs_string_content_ = false;
  std::unique_ptr<jinja::Template> template_;
};

}  // namespace geist::chat
