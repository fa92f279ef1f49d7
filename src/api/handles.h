// What the opaque C handles hold, and the exception/status guard every C entry point runs
// its body in. Internal to src/api.
#pragma once

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include "base/status.h"
#include "engine/model.h"
#include "engine/session.h"
#include "geist/geist.h"

struct geist_model {
  std::unique_ptr<geist::Model> model;
  std::atomic<int> n_sessions{0};  // live sessions; freeing the model with any is refused

  // A model is shared across threads, so each thread gets its own last-error slot: a message
  // returned to one thread is never overwritten by a failure on another.
  mutable std::mutex errors_mu;
  mutable std::map<std::thread::id, std::string> errors;  // guarded by errors_mu

  void set_error(const std::string& msg) const noexcept {
    try {
      std::lock_guard<std::mutex> lock(errors_mu);
      errors[std::this_thread::get_id()] = msg;
    } catch (...) {  // no memory for the message: keep the status, lose the text
    }
  }
  const char* last_error() const noexcept {
    try {
      std::lock_guard<std::mutex> lock(errors_mu);
      auto it = errors.find(std::this_thread::get_id());
      return it == errors.end() ? "" : it->second.c_str();  // map nodes never move
    } catch (...) {
      return "";
    }
  }
};

struct geist_session {
  geist_model* owner = nullptr;
  std::unique_ptr<geist::Session> session;
  mutable std::string error;  // last failing call's message

  void set_error(const std::string& msg) const noexcept {
    try {
      error = msg;
    } catch (...) {
      error.clear();
    }
  }
};

namespace geist::api {

// Hands a message to a sink without letting an allocation failure escape.
template <class Sink>
void sink_message(Sink& sink, const char* msg) noexcept {
  try {
    sink(std::string(msg));
  } catch (...) {  // no memory for the text: the status code still says what happened
  }
}

// Runs f() (returning Status) and maps everything that can escape to a status code, handing
// failure messages to sink(const std::string&). No exception leaves this function.
template <class F, class Sink>
geist_status guarded(F&& f, Sink&& sink) noexcept {
  try {
    Status s = f();
    if (!s.is_ok()) sink_message(sink, s.message().c_str());
    return s.code();
  } catch (const std::bad_alloc&) {
    sink_message(sink, "out of memory");
    return GEIST_E_OOM;
  } catch (const std::exception& e) {
    try {
      const std::string msg = std::string("internal error: ") + e.what();
      sink_message(sink, msg.c_str());
    } catch (...) {
    }
    return GEIST_E_INTERNAL;
  } catch (...) {
    sink_message(sink, "internal error: unknown exception");
    return GEIST_E_INTERNAL;
  }
}

// The buffer protocol of geist_detokenize: the full length always goes to *n_out; the bytes
// are written only when they fit.
inline Status write_string(const std::string& s, char* out, size_t cap, size_t* n_out) {
  *n_out = s.size();
  if (s.size() > cap) {
    return Status::error(GEIST_E_INVALID_ARG, "output buffer holds %zu bytes but %zu are needed",
                         cap, s.size());
  }
  if (!s.empty()) std::memcpy(out, s.data(), s.size());
  return Status::ok();
}

}  // namespace geist::api
