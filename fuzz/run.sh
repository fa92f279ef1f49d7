#!/usr/bin/env bash
# Builds the GGUF fuzzer with clang, makes a seed corpus in build/fuzz/corpus (small files
# written by fuzz_gguf_seed, plus the fixtures' stories260K.gguf when present) and fuzzes
# for SECONDS (default 30). Exits non-zero if the fuzzer finds a crash.
set -euo pipefail

seconds="${1:-30}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build/fuzz"
corpus="$build/corpus"
fixtures="${GEIST_FIXTURES:-$root/../shared/fixtures}"

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DGEIST_FUZZ=ON -DGEIST_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" -j2 fuzz_gguf fuzz_gguf_seed

mkdir -p "$corpus"
"$build/fuzz/fuzz_gguf_seed" "$corpus"
if [[ -f "$fixtures/models/stories260K.gguf" ]]; then
  cp -f "$fixtures/models/stories260K.gguf" "$corpus/stories260K.gguf"
fi

# Crash reproducers land in build/fuzz/artifacts; max_len keeps the big fixture from making
# every mutation a megabyte long (it is truncated to its header and first tensors).
mkdir -p "$build/artifacts"
"$build/fuzz/fuzz_gguf" -max_total_time="$seconds" -max_len=16384 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/artifacts/" "$corpus"
