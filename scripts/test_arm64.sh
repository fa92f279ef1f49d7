#!/usr/bin/env bash
# Cross-builds geist for 64-bit Arm (Highway's NEON target) and runs the test suites that work
# under qemu-user emulation on this x86-64 machine. Not part of scripts/test.sh: emulation is
# 10-50x slower, and the whole run takes ~10 minutes on 2 cores.
# Left out: cli, example_simple, example_simple_shared and the server_* suites start the aarch64
# binaries (`geist`, the examples) as child processes, which needs binfmt_misc registration;
# python loads the aarch64 libgeist into the host's x86-64 Python; snapshot runs past its time
# limit under emulation. They run natively on an Arm machine (scripts/test.sh there).
# Environment: GEIST_FIXTURES, GEIST_REQUIRE_FIXTURES as for scripts/test.sh.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
jobs="${JOBS:-$(nproc)}"
"$root/scripts/install_deps.sh" --arm64

build="$root/build/test-arm64"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGEIST_CUDA=OFF \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchain-aarch64-linux-gnu.cmake" >/dev/null
ninja -C "$build" -j "$jobs"
# Emulation is 10-50x slower: the tests' wall-clock bounds scale (tests/support/sanitized.h).
GEIST_EMULATED=1 ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 3600 \
  -E '^(cli|example_simple|example_simple_shared|python|server_.*|snapshot(_[0-9]+)?)$'
