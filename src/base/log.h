// Logging through a caller-supplied callback carried by a handle (no global logger).
#pragma once

#include "geist/geist.h"

namespace geist {

struct Logger {
  geist_log_fn fn = nullptr;
  void* user = nullptr;

  [[gnu::format(printf, 3, 4)]] void log(geist_log_level level, const char* fmt, ...) const;
};

}  // namespace geist
