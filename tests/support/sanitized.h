// What a test runs in the sanitizer stage. scripts/test.sh runs the ASan + UBSan tree's ctest
// with GEIST_SANITIZED=1; code there runs about 10x slower, so the suites that loop over every
// KV mode run three representative ones (plain rows, quantized rows, KIVI groups + residual)
// and the release stage runs all six (docs/TESTING.md "What the sanitizer stage does not run").
// Every reduction says so on stdout: nothing is dropped silently.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "geist/geist.h"

namespace geist::test {

// True when GEIST_SANITIZED=1 (the sanitizer stage of scripts/test.sh).
inline bool sanitized_run() {
  const char* v = std::getenv("GEIST_SANITIZED");
  return v != nullptr && std::string(v) == "1";
}

// True when code runs far slower than natively: the sanitizer stage, or emulation
// (GEIST_EMULATED=1: scripts/test_arm64.sh under qemu-user, 10-50x slower). Wall-clock bounds
// of the tests that have them scale with it; the KV-mode selection above does not.
inline bool slow_run() {
  const char* v = std::getenv("GEIST_EMULATED");
  return sanitized_run() || (v != nullptr && std::string(v) == "1");
}

// Whether a test over every KV mode (geist_kv_mode values) runs `mode` in this run: every mode
// in the release stage, F32, Q4 and KIVI2 in the sanitizer stage.
inline bool kv_mode_in_run(int32_t mode) {
  if (!sanitized_run()) return mode >= GEIST_KV_F32 && mode <= GEIST_KV_KIVI2;
  return mode == GEIST_KV_F32 || mode == GEIST_KV_Q4 || mode == GEIST_KV_KIVI2;
}

// The KV modes a test over every mode runs (kv_mode_in_run), in order; prints for `what` how
// many of the six it runs.
inline std::vector<int32_t> kv_modes_for_run(const std::string& what) {
  std::vector<int32_t> modes;
  for (int32_t m = GEIST_KV_F32; m <= GEIST_KV_KIVI2; ++m) {
    if (kv_mode_in_run(m)) modes.push_back(m);
  }
  const int32_t all = GEIST_KV_KIVI2 - GEIST_KV_F32 + 1;
  if (sanitized_run()) {
    std::printf(
        "[ %s ] KV modes: %zu of %d (sanitizer stage: F32, Q4, KIVI2; the release stage "
        "runs all %d)\n",
        what.c_str(), modes.size(), all, all);
  } else {
    std::printf("[ %s ] KV modes: %zu of %d\n", what.c_str(), modes.size(), all);
  }
  std::fflush(stdout);
  return modes;
}

}  // namespace geist::test
