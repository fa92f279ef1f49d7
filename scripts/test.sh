#!/usr/bin/env bash
# Builds and runs the whole test suite: format check, Release build + tests (GCC), the
# ASan+UBSan build + tests (clang; the same tree builds the fuzzers), and a short libFuzzer run
# of every fuzz target. Stages and their timings: docs/TESTING.md.
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
# Where nvcc is, the release tree compiles the CUDA backend for sm_90 only (no compute_80 PTX:
# CI has no GPU and only checks that the backend compiles; the default build keeps
# "90-real 80-virtual"). docs/TESTING.md "CI time" has what it saves.
cmake -S "$root" -B "$root/build/test-release" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90-real >/dev/null
ninja -C "$root/build/test-release" -j "$jobs"
ctest --test-dir "$root/build/test-release" --output-on-failure -j "$jobs"

fuzz_build=""
if [ "${SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== ASan + UBSan build + tests ($(date +%T))"
  # One clang tree for the sanitizer tests and the fuzzers (GEIST_FUZZ=ON next to
  # GEIST_SANITIZE=ON): the library is compiled once for both (docs/TESTING.md has the timings).
  # -O1 -g1 (line tables: enough for the sanitizers' stack traces) instead of RelWithDebInfo's
  # -O2 -g; the tests themselves at -O0 (tests/CMakeLists.txt).
  fuzz_opt=ON
  if [ "${SKIP_FUZZ:-0}" = 1 ]; then fuzz_opt=OFF; fi
  CC=clang CXX=clang++ cmake -S "$root" -B "$root/build/test-asan-clang" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DGEIST_SANITIZE=ON \
    -DGEIST_FUZZ="$fuzz_opt" >/dev/null
  ninja -C "$root/build/test-asan-clang" -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    GEIST_SANITIZED=1 ctest --test-dir "$root/build/test-asan-clang" --output-on-failure -j "$jobs"
  fuzz_build="$root/build/test-asan-clang"
fi

if [ "${SKIP_FUZZ:-0}" != 1 ]; then
  echo "== fuzz (${FUZZ_SECONDS:-20} s per target) ($(date +%T))"
  # The sanitizer tree's fuzzers when it was built; else fuzz/run.sh builds its own tree.
  GEIST_FUZZ_BUILD="$fuzz_build" "$root/fuzz/run.sh" "${FUZZ_SECONDS:-20}"
fi
echo "== all tests passed ($(date +%T))"
