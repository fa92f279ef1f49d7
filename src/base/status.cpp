#include "base/status.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace geist {

Status Status::error(geist_status code, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return Status(code, buf);
}

Status Status::with_prefix(const std::string& prefix) const {
  if (is_ok()) return *this;
  return Status(code_, prefix + ": " + message_);
}

void check_failed(const char* file, int line, const char* cond, const char* msg) {
  std::fprintf(stderr, "geist: internal invariant violated at %s:%d: %s (%s)\n", file, line, cond,
               msg ? msg : "");
  std::abort();
}

}  // namespace geist
