#!/usr/bin/env bash
# Builds the fuzzers with clang and fuzzes each for SECONDS (default 30):
#   fuzz_gguf     seed corpus in build/fuzz/corpus (small files written by fuzz_gguf_seed, plus
#                 the fixtures' stories260K.gguf when present);
#   fuzz_restore  seed corpus in build/fuzz/corpus_restore (real snapshot images written by
#                 fuzz_restore_seed); needs the fixtures' models, skipped loudly without them.
#   fuzz_jinja    seed corpus in build/fuzz/corpus_jinja (the fixtures' chat templates, copied
#                 at run time); skipped loudly without the fixtures.
#   fuzz_tier_object  seed corpus in build/fuzz/corpus_tier (entries written by
#                 fuzz_tier_object_seed): the tier object readers (entry codec, disk-tier files).
# TARGETS (default "gguf restore jinja tier") picks which run. Exits non-zero if a fuzzer finds a crash.
# Usage: fuzz/run.sh [SECONDS] [TARGETS...]
set -euo pipefail

seconds="${1:-30}"
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then targets=(gguf restore jinja tier); fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build/fuzz"
fixtures="${GEIST_FIXTURES:-$root/../shared/fixtures}"

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DGEIST_FUZZ=ON -DGEIST_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
mkdir -p "$build/artifacts"

for t in "${targets[@]}"; do
  case "$t" in
    gguf)
      ninja -C "$build" -j2 fuzz_gguf fuzz_gguf_seed
      corpus="$build/corpus"
      mkdir -p "$corpus"
      "$build/fuzz/fuzz_gguf_seed" "$corpus"
      if [[ -f "$fixtures/models/stories260K.gguf" ]]; then
        cp -f "$fixtures/models/stories260K.gguf" "$corpus/stories260K.gguf"
      fi
      # Crash reproducers land in build/fuzz/artifacts; max_len keeps the big fixture from
      # making every mutation a megabyte long (it is truncated to its header and first tensors).
      "$build/fuzz/fuzz_gguf" -max_total_time="$seconds" -max_len=16384 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/artifacts/" "$corpus"
      ;;
    restore)
      if [[ ! -f "$fixtures/models/stories260K.gguf" ]]; then
        echo "SKIPPED: fuzz_restore needs the fixtures (not found at $fixtures)" >&2
        continue
      fi
      ninja -C "$build" -j2 fuzz_restore fuzz_restore_seed
      corpus="$build/corpus_restore"
      mkdir -p "$corpus"
      "$build/fuzz/fuzz_restore_seed" "$fixtures" "$corpus"
      GEIST_FIXTURES="$fixtures" "$build/fuzz/fuzz_restore" -max_total_time="$seconds" \
        -max_len=262144 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$build/artifacts/restore-" "$corpus"
      ;;
    jinja)
      if ! ls "$fixtures"/templates/*.jinja >/dev/null 2>&1; then
        echo "SKIPPED: fuzz_jinja needs the fixtures' templates (not found at $fixtures/templates)" >&2
        continue
      fi
      ninja -C "$build" -j2 fuzz_jinja
      corpus="$build/corpus_jinja"
      mkdir -p "$corpus"
      cp -f "$fixtures"/templates/*.jinja "$corpus/"
      "$build/fuzz/fuzz_jinja" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/artifacts/jinja-" \
        "$corpus"
      ;;
    tier)
      ninja -C "$build" -j2 fuzz_tier_object fuzz_tier_object_seed
      corpus="$build/corpus_tier"
      mkdir -p "$corpus"
      "$build/fuzz/fuzz_tier_object_seed" "$corpus"
      "$build/fuzz/fuzz_tier_object" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/artifacts/tier-" "$corpus"
      ;;
    *)
      echo "unknown fuzz target '$t' (gguf, restore, jinja, tier)" >&2
      exit 2
      ;;
  esac
done
