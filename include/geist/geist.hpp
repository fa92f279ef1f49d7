// geist — thin C++ RAII wrappers over the C ABI (EXPERIMENTAL: may change in any release):
// models and sessions (geist.h), snapshots (geist_snapshot.h), batches (geist_batch.h), the
// extras of geist_util.h, and the names of the KV modes and backends. Chat templates and
// parsers are in geist_chat.hpp.
//
// Header-only; every call forwards to the C function of the same name and returns its
// geist_status (no exceptions; the messages stay on the handle: last_error()). The handles are
// move-only and free what they own; a session must be destroyed before its model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "geist/geist.h"
#include "geist/geist_backend.h"
#include "geist/geist_batch.h"
#include "geist/geist_snapshot.h"
#include "geist/geist_util.h"

namespace geist {

namespace detail {

// The buffer protocol of geist_tokenize / geist_detokenize / ...: a first guess of `guess`
// elements, then exactly the size the call asked for. `call(data, cap, &n)`.
template <typename T, typename Call>
geist_status fill_buffer(T* out, size_t guess, Call call) {
  out->resize(guess);
  size_t n = 0;
  geist_status st = call(out->data(), out->size(), &n);
  if (st == GEIST_E_INVALID_ARG && n > out->size()) {
    out->resize(n);
    st = call(out->data(), out->size(), &n);
  }
  out->resize(st == GEIST_OK ? n : 0);
  return st;
}

}  // namespace detail

// Owns a geist_model.
class ModelHandle {
 public:
  ModelHandle() = default;
  ~ModelHandle() { geist_model_free(m_); }
  ModelHandle(ModelHandle&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
  ModelHandle& operator=(ModelHandle&& o) noexcept {
    if (this != &o) {
      geist_model_free(m_);
      m_ = std::exchange(o.m_, nullptr);
    }
    return *this;
  }
  ModelHandle(const ModelHandle&) = delete;
  ModelHandle& operator=(const ModelHandle&) = delete;

  // geist_model_load. On failure *out is empty and *err (if not null) receives the message.
  static geist_status load(const std::string& path, ModelHandle* out,
                           const geist_model_params* params = nullptr, std::string* err = nullptr) {
    char buf[1024] = {};
    geist_model* m = nullptr;
    const geist_status s = geist_model_load(path.c_str(), params, &m, buf, sizeof buf);
    if (err != nullptr) *err = buf;
    *out = ModelHandle(m);
    return s;
  }

  geist_model* get() const { return m_; }
  explicit operator bool() const { return m_ != nullptr; }
  const char* last_error() const { return geist_model_last_error(m_); }

  int32_t n_vocab() const { return geist_model_n_vocab(m_); }
  int32_t n_ctx_train() const { return geist_model_n_ctx_train(m_); }
  geist_token token_bos() const { return geist_model_token_bos(m_); }
  geist_token token_eos() const { return geist_model_token_eos(m_); }
  bool token_is_eog(geist_token t) const { return geist_model_token_is_eog(m_, t) != 0; }

  // Replaces *out with the ids (empty on failure).
  geist_status tokenize(const std::string& text, bool add_special, bool parse_special,
                        std::vector<geist_token>* out) const {
    return detail::fill_buffer(out, text.size() + 8, [&](geist_token* d, size_t cap, size_t* n) {
      return geist_tokenize(m_, text.data(), text.size(), add_special ? 1 : 0,
                            parse_special ? 1 : 0, d, cap, n);
    });
  }
  // Replaces *out with the text of the tokens.
  geist_status detokenize(const std::vector<geist_token>& tokens, std::string* out) const {
    return detail::fill_buffer(out, tokens.size() * 8 + 16, [&](char* d, size_t cap, size_t* n) {
      return geist_detokenize(m_, tokens.data(), tokens.size(), d, cap, n);
    });
  }
  // Replaces *out with the token's piece (possibly an incomplete UTF-8 sequence).
  geist_status token_to_piece(geist_token t, std::string* out) const {
    return detail::fill_buffer(out, 64, [&](char* d, size_t cap, size_t* n) {
      return geist_token_to_piece(m_, t, d, cap, n);
    });
  }
  // EXPERIMENTAL (geist_util.h). Times one upload and one download of n_bytes through the
  // backend's snapshot path (a benchmark hook).
  geist_status time_copies(size_t n_bytes, double* upload_s, double* download_s) const {
    return geist_model_time_copies(m_, n_bytes, upload_s, download_s);
  }
  // EXPERIMENTAL (geist_util.h). Replaces *out with the description.
  geist_status describe(std::string* out) const {
    return detail::fill_buffer(out, 4096, [&](char* d, size_t cap, size_t* n) {
      return geist_model_describe(m_, d, cap, n);
    });
  }

 private:
  explicit ModelHandle(geist_model* m) : m_(m) {}
  geist_model* m_ = nullptr;
};

// Owns a geist_session.
class SessionHandle {
 public:
  SessionHandle() = default;
  ~SessionHandle() { geist_session_destroy(s_); }
  SessionHandle(SessionHandle&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  SessionHandle& operator=(SessionHandle&& o) noexcept {
    if (this != &o) {
      geist_session_destroy(s_);
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }
  SessionHandle(const SessionHandle&) = delete;
  SessionHandle& operator=(const SessionHandle&) = delete;

  // geist_session_create; the message of a failure is on the model (model.last_error()).
  static geist_status create(const ModelHandle& model, SessionHandle* out,
                             const geist_session_params* params = nullptr) {
    geist_session* s = nullptr;
    const geist_status st = geist_session_create(model.get(), params, &s);
    *out = SessionHandle(s);
    return st;
  }

  geist_session* get() const { return s_; }
  explicit operator bool() const { return s_ != nullptr; }
  const char* last_error() const { return geist_session_last_error(s_); }

  geist_status prefill(const std::vector<geist_token>& tokens) {
    return geist_session_prefill(s_, tokens.data(), tokens.size());
  }
  geist_status prefill(const geist_token* tokens, size_t n) {
    return geist_session_prefill(s_, tokens, n);
  }
  geist_status prefill_text(const std::string& text, bool add_special = true) {
    return geist_session_prefill_text(s_, text.data(), text.size(), add_special ? 1 : 0);
  }
  geist_status decode(geist_token* out) { return geist_session_decode(s_, out); }
  // EXPERIMENTAL (geist_util.h): the token decode() would return now, the session unchanged.
  geist_status peek(geist_token* out) { return geist_session_peek(s_, out); }
  // EXPERIMENTAL (geist_util.h): forgets the tokens from position n on.
  geist_status rewind(int32_t n) { return geist_session_rewind(s_, n); }
  geist_status logits(const float** out, int32_t* n_vocab) {
    return geist_session_logits(s_, out, n_vocab);
  }
  geist_status reset() { return geist_session_reset(s_); }
  geist_status set_sampler(const geist_sampler_params& p) {
    return geist_session_set_sampler(s_, &p);
  }
  int32_t position() const { return geist_session_position(s_); }
  int32_t max_seq_len() const { return geist_session_max_seq_len(s_); }

  // EXPERIMENTAL (geist_util.h).
  geist_status prefill_all_logits(const geist_token* tokens, size_t n, float* out, size_t cap) {
    return geist_session_prefill_all_logits(s_, tokens, n, out, cap);
  }
  // Replaces *out with the session's token history.
  geist_status tokens(std::vector<geist_token>* out) const {
    const geist_token* t = nullptr;
    size_t n = 0;
    const geist_status st = geist_session_tokens(s_, &t, &n);
    if (st == GEIST_OK) {
      out->assign(t, t + n);
    } else {
      out->clear();
    }
    return st;
  }
  // The prefill grid: the multiples of it where a prefix state may be cached and reused
  // bit-exactly (geist_session_prefill_grid).
  int32_t prefill_grid() const { return geist_session_prefill_grid(s_); }
  // Stops a prefill running on another thread (geist_session_cancel).
  void cancel() { geist_session_cancel(s_); }

  // Snapshots (EXPERIMENTAL, geist_snapshot.h).
  geist_status snapshot_size(size_t* out) { return geist_session_snapshot_size(s_, out); }
  // Replaces *out with the image (empty on failure).
  geist_status snapshot(std::vector<uint8_t>* out) {
    size_t size = 0;
    geist_status st = geist_session_snapshot_size(s_, &size);
    if (st != GEIST_OK) {
      out->clear();
      return st;
    }
    out->resize(size);
    size_t written = 0;
    st = geist_session_snapshot(s_, out->data(), out->size(), &written);
    out->resize(st == GEIST_OK ? written : 0);
    return st;
  }
  geist_status snapshot(void* buf, size_t cap, size_t* written) {
    return geist_session_snapshot(s_, buf, cap, written);
  }
  geist_status restore(const std::vector<uint8_t>& image) {
    return geist_session_restore(s_, image.data(), image.size());
  }
  geist_status restore(const void* buf, size_t size) {
    return geist_session_restore(s_, buf, size);
  }
  // geist_session_restore_trusted: bytes the caller has verified already (geist_snapshot.h).
  geist_status restore_trusted(const void* buf, size_t size) {
    return geist_session_restore_trusted(s_, buf, size);
  }
  geist_status save_file(const std::string& path) {
    return geist_session_save_file(s_, path.c_str());
  }
  geist_status load_file(const std::string& path) {
    return geist_session_load_file(s_, path.c_str());
  }
  geist_status pin_prefix() { return geist_session_pin_prefix(s_); }
  geist_status reset_to_prefix() { return geist_session_reset_to_prefix(s_); }
  int32_t pin_len() const { return geist_session_pin_len(s_); }

 private:
  explicit SessionHandle(geist_session* s) : s_(s) {}
  geist_session* s_ = nullptr;
};

// EXPERIMENTAL (geist_batch.h). One session's part of a batch: its owed forward, then `chunk`
// when given (the vector must outlive the call); with decode, then its next token sampled
// into the item's token.
inline geist_batch_item batch_item(const SessionHandle& s,
                                   const std::vector<geist_token>* chunk = nullptr,
                                   bool decode = false) {
  geist_batch_item it;
  geist_batch_item_init(&it, s.get(), chunk != nullptr ? chunk->data() : nullptr,
                        chunk != nullptr ? chunk->size() : 0);
  it.decode = decode ? 1 : 0;
  return it;
}

// EXPERIMENTAL (geist_batch.h). Advances every item's session in shared forwards; each item's
// status says how its session fared.
inline geist_status batch_forward(const ModelHandle& model, std::vector<geist_batch_item>* items) {
  return geist_batch_forward(model.get(), items->data(), items->size());
}

// The names of the geist_kv_mode values, in enum order ("f32", "f16", "q8", "q4", "kivi4",
// "kivi2"), as the CLI's --kv-mode, the server and the Python package spell them.
inline constexpr const char* kKvModeNames[] = {"f32", "f16", "q8", "q4", "kivi4", "kivi2"};
inline constexpr size_t kNumKvModes = sizeof(kKvModeNames) / sizeof(kKvModeNames[0]);

// The name of a geist_kv_mode; "?" outside the enum.
inline const char* kv_mode_name(int32_t mode) {
  return mode >= 0 && static_cast<size_t>(mode) < kNumKvModes ? kKvModeNames[mode] : "?";
}

// The geist_kv_mode named `name`; false (and *out untouched) for any other text.
inline bool kv_mode_from_name(const std::string& name, int32_t* out) {
  for (size_t i = 0; i < kNumKvModes; ++i) {
    if (name == kKvModeNames[i]) {
      *out = static_cast<int32_t>(i);
      return true;
    }
  }
  return false;
}

// The names of the geist_backend values, in enum order ("auto", "cpu", "cuda",
// "cpu-devlocal"; geist_backend.h).
inline constexpr const char* kBackendNames[] = {"auto", "cpu", "cuda", "cpu-devlocal"};
inline constexpr size_t kNumBackends = sizeof(kBackendNames) / sizeof(kBackendNames[0]);

// The geist_backend named `name`; false (and *out untouched) for any other text.
inline bool backend_from_name(const std::string& name, int32_t* out) {
  for (size_t i = 0; i < kNumBackends; ++i) {
    if (name == kBackendNames[i]) {
      *out = static_cast<int32_t>(i);
      return true;
    }
  }
  return false;
}

static_assert(GEIST_KV_KIVI2 + 1 == kNumKvModes, "kKvModeNames follows geist_kv_mode");
static_assert(GEIST_BACKEND_CPU_DEVICE_LOCAL + 1 == kNumBackends,
              "kBackendNames follows geist_backend");

}  // namespace geist
