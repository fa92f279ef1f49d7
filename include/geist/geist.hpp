// geist — thin C++ RAII wrappers over the C ABI (geist.h, geist_snapshot.h, geist_batch.h,
// geist_util.h).
// Header-only; every call forwards to the C function of the same name and returns its geist_status
// (no exceptions). The handles are move-only; a session must be destroyed before its model.
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

  // On failure *err (if not null) receives the message.
  static geist_status load(const std::string& path, ModelHandle* out,
                           const geist_model_params* params = nullptr, std::string* err = nullptr) {
    char buf[512] = {};
    geist_model* m = nullptr;
    const geist_status s = geist_model_load(path.c_str(), params, &m, buf, sizeof buf);
    if (err != nullptr) *err = buf;
    *out = ModelHandle(m);
    return s;
  }

  geist_model* get() const { return m_; }
  explicit operator bool() const { return m_ != nullptr; }
  int32_t n_vocab() const { return geist_model_n_vocab(m_); }
  const char* last_error() const { return geist_model_last_error(m_); }

 private:
  explicit ModelHandle(geist_model* m) : m_(m) {}
  geist_model* m_ = nullptr;
};

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
  geist_status prefill_text(const std::string& text, bool add_special = true) {
    return geist_session_prefill_text(s_, text.data(), text.size(), add_special ? 1 : 0);
  }
  geist_status decode(geist_token* out) { return geist_session_decode(s_, out); }
  geist_status logits(const float** out, int32_t* n_vocab) {
    return geist_session_logits(s_, out, n_vocab);
  }
  geist_status reset() { return geist_session_reset(s_); }
  geist_status set_sampler(const geist_sampler_params& p) {
    return geist_session_set_sampler(s_, &p);
  }
  int32_t position() const { return geist_session_position(s_); }
  int32_t max_seq_len() const { return geist_session_max_seq_len(s_); }

  // Snapshots (EXPERIMENTAL, see geist_snapshot.h).
  geist_status snapshot_size(size_t* out) { return geist_session_snapshot_size(s_, out); }
  // Replaces *out with the image.
  geist_status snapshot(std::vector<uint8_t>* out) {
    size_t size = 0;
    geist_status st = geist_session_snapshot_size(s_, &size);
    if (st != GEIST_OK) return st;
    out->resize(size);
    size_t written = 0;
    st = geist_session_snapshot(s_, out->data(), out->size(), &written);
    out->resize(st == GEIST_OK ? written : 0);
    return st;
  }
  geist_status restore(const std::vector<uint8_t>& image) {
    return geist_session_restore(s_, image.data(), image.size());
  }
  geist_status restore(const void* buf, size_t size) {
    return geist_session_restore(s_, buf, size);
  }
  geist_status save_file(const std::string& path) {
    return geist_session_save_file(s_, path.c_str());
  }
  geist_status load_file(const std::string& path) {
    return geist_session_load_file(s_, path.c_str());
  }
  // EXPERIMENTAL: stop a prefill running on another thread (geist_session_cancel).
  void cancel() { geist_session_cancel(s_); }
  geist_status pin_prefix() { return geist_session_pin_prefix(s_); }
  geist_status reset_to_prefix() { return geist_session_reset_to_prefix(s_); }
  int32_t pin_len() const { return geist_session_pin_len(s_); }

 private:
  explicit SessionHandle(geist_session* s) : s_(s) {}
  geist_session* s_ = nullptr;
};

// EXPERIMENTAL (geist_batch.h). One session's part of a batch: its owed forward, then `chunk`
// when given (the vector must outlive the call).
inline geist_batch_item batch_item(const SessionHandle& s,
                                   const std::vector<geist_token>* chunk = nullptr) {
  geist_batch_item it;
  geist_batch_item_init(&it, s.get(), chunk != nullptr ? chunk->data() : nullptr,
                        chunk != nullptr ? chunk->size() : 0);
  return it;
}

// EXPERIMENTAL (geist_batch.h). Advances every item's session in shared forwards; each item's
// status says how its session fared.
inline geist_status batch_forward(const ModelHandle& model, std::vector<geist_batch_item>* items) {
  return geist_batch_forward(model.get(), items->data(), items->size());
}

}  // namespace geist
