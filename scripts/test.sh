#!/usr/bin/env bash
# Builds and runs the whole test suite: format check, Release build + tests, the
# ASan+UBSan build + tests, and a short libFuzzer run of every fuzz target.
# Environment: GEIST_FIXTURES (fixture dir, default ../shared/fixtures),
# GEIST_REQUIRE_FIXTURES=1 (missing fixtures fail instead of skipping; .ci/run sets it),
# FUZZ_SECONDS (default 20: six targets; longer runs are made by hand, docs in fuzz/run.sh), SKIP_SANITIZE=1 / SKIP_FUZZ=1 for a quick local run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
jobs="${JOBS:-$(nproc)}"
"$root/scripts/install_deps.sh"

echo "== format check ($(date +%T))"
"$root/scripts/format_check.sh"

echo "== release build + tests ($(date +%T))"
cmake -S "$root" -B "$root/build/test-release" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$root/build/test-release" -j "$jobs"
ctest --test-dir "$root/build/test-release" --output-on-failure -j "$jobs"

if [ "${SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== ASan + UBSan build + tests ($(date +%T))"
  # -O1 -g1 (line tables: enough for the sanitizers' stack traces) instead of RelWithDebInfo's
  # -O2 -g: this stage's build was the longest part of CI on two cores.
  cmake -S "$root" -B "$root/build/test-asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DGEIST_SANITIZE=ON >/dev/null
  ninja -C "$root/build/test-asan" -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    GEIST_SANITIZED=1 ctest --test-dir "$root/build/test-asan" --output-on-failure -j "$jobs"
fi

if [ "${SKIP_FUZZ:-0}" != 1 ]; then
  echo "== fuzz (${FUZZ_SECONDS:-20} s per target) ($(date +%T))"
  "$root/fuzz/run.sh" "${FUZZ_SECONDS:-20}"
fi
echo "== all tests passed ($(date +%T))"
