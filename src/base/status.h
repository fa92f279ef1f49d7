// Status values for every fallible internal function (tier 2 of the error model), and the
// always-on invariant check (tier 1).
#pragma once

#include <string>
#include <utility>

#include "geist/geist.h"

namespace geist {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(geist_status code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  // printf-style message.
  [[gnu::format(printf, 2, 3)]] static Status error(geist_status code, const char* fmt, ...);

  bool is_ok() const { return code_ == GEIST_OK; }
  explicit operator bool() const { return is_ok(); }
  geist_status code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<prefix>: <message>".
  Status with_prefix(const std::string& prefix) const;

 private:
  geist_status code_ = GEIST_OK;
  std::string message_;
};

// Invariant violated: a bug in geist. Prints the message and aborts.
[[noreturn]] void check_failed(const char* file, int line, const char* cond, const char* msg);

}  // namespace geist

#define GEIST_RETURN_IF_ERROR(expr)                   \
  do {                                                \
    ::geist::Status geist_status_ = (expr);           \
    if (!geist_status_.is_ok()) return geist_status_; \
  } while (0)

// Always-on assert for internal invariants (never for input validation).
#define GEIST_CHECK(cond, msg)                                            \
  do {                                                                    \
    if (!(cond)) ::geist::check_failed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)
