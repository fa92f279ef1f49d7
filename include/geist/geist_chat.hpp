// geist — thin C++ RAII wrappers over the chat C ABI (geist_chat.h; EXPERIMENTAL: may change in
// any release). Same rules as geist.hpp: header-only, every call returns the C function's
// geist_status (no exceptions), the handles are move-only and free what they own.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "geist/geist.hpp"
#include "geist/geist_chat.h"

namespace geist {

// Owns a geist_chat_template. A template is immutable and may be shared between threads.
class ChatTemplate {
 public:
  ChatTemplate() = default;
  ~ChatTemplate() { geist_chat_template_free(t_); }
  ChatTemplate(ChatTemplate&& o) noexcept : t_(std::exchange(o.t_, nullptr)) {}
  ChatTemplate& operator=(ChatTemplate&& o) noexcept {
    if (this != &o) {
      geist_chat_template_free(t_);
      t_ = std::exchange(o.t_, nullptr);
    }
    return *this;
  }
  ChatTemplate(const ChatTemplate&) = delete;
  ChatTemplate& operator=(const ChatTemplate&) = delete;

  // geist_chat_template_from_model: `name` empty for tokenizer.chat_template. *is_fallback (if
  // not null) says the model had none and ChatML was taken. On failure *err (if not null)
  // receives the message.
  static geist_status from_model(const ModelHandle& model, const std::string& name,
                                 ChatTemplate* out, bool* is_fallback = nullptr,
                                 std::string* err = nullptr) {
    char buf[1024] = {};
    geist_chat_template* t = nullptr;
    int fallback = 0;
    const geist_status st = geist_chat_template_from_model(
        model.get(), name.empty() ? nullptr : name.c_str(), &t, &fallback, buf, sizeof buf);
    if (is_fallback != nullptr) *is_fallback = fallback != 0;
    if (err != nullptr) *err = buf;
    *out = ChatTemplate(t);
    return st;
  }

  // geist_chat_template_create_for_model: source text that sees the model's bos / eos texts.
  static geist_status create_for_model(const ModelHandle& model, const std::string& source,
                                       ChatTemplate* out, std::string* err = nullptr) {
    char buf[1024] = {};
    geist_chat_template* t = nullptr;
    const geist_status st = geist_chat_template_create_for_model(
        model.get(), source.data(), source.size(), &t, buf, sizeof buf);
    if (err != nullptr) *err = buf;
    *out = ChatTemplate(t);
    return st;
  }

  geist_chat_template* get() const { return t_; }
  explicit operator bool() const { return t_ != nullptr; }
  const char* last_error() const { return geist_chat_template_last_error(t_); }
  const char* source() const { return geist_chat_template_source(t_); }

  // geist_chat_render. Replaces *out with the prompt text (empty on failure).
  geist_status render(const std::string& request_json, std::string* out) const {
    return detail::fill_buffer(out, 4096, [&](char* d, size_t cap, size_t* n) {
      return geist_chat_render(t_, request_json.data(), request_json.size(), d, cap, n);
    });
  }

 private:
  explicit ChatTemplate(geist_chat_template* t) : t_(t) {}
  geist_chat_template* t_ = nullptr;
};

// Owns a geist_chat_parser (one per generation; not thread-safe).
class ChatParser {
 public:
  ChatParser() = default;
  ~ChatParser() { geist_chat_parser_free(p_); }
  ChatParser(ChatParser&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  ChatParser& operator=(ChatParser&& o) noexcept {
    if (this != &o) {
      geist_chat_parser_free(p_);
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  ChatParser(const ChatParser&) = delete;
  ChatParser& operator=(const ChatParser&) = delete;

  // geist_chat_parser_create. tmpl may be an empty ChatTemplate (plain text); options_json
  // empty for {}. On failure *err (if not null) receives the message.
  static geist_status create(const ChatTemplate& tmpl, const std::string& prompt,
                             const std::string& options_json, ChatParser* out,
                             std::string* err = nullptr) {
    char buf[1024] = {};
    geist_chat_parser* p = nullptr;
    const geist_status st =
        geist_chat_parser_create(tmpl.get(), prompt.data(), prompt.size(),
                                 options_json.empty() ? nullptr : options_json.data(),
                                 options_json.size(), &p, buf, sizeof buf);
    if (err != nullptr) *err = buf;
    *out = ChatParser(p);
    return st;
  }

  geist_chat_parser* get() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

  // geist_chat_parser_feed: *out_json is owned by the parser, valid until its next call.
  geist_status feed(const char* text, size_t len, const char** out_json, bool* stopped) {
    int s = 0;
    const geist_status st = geist_chat_parser_feed(p_, text, len, out_json, &s);
    if (stopped != nullptr) *stopped = s != 0;
    return st;
  }
  // geist_chat_parser_finish: both pointers are owned by the parser, valid until it is freed.
  geist_status finish(const char** out_deltas, const char** out_message) {
    return geist_chat_parser_finish(p_, out_deltas, out_message);
  }

 private:
  explicit ChatParser(geist_chat_parser* p) : p_(p) {}
  geist_chat_parser* p_ = nullptr;
};

}  // namespace geist
