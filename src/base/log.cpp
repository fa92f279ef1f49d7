#include "base/log.h"

#include <cstdarg>
#include <cstdio>

namespace geist {

void Logger::log(geist_log_level level, const char* fmt, ...) const {
  if (!fn) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fn(user, level, buf);
}

}  // namespace geist
