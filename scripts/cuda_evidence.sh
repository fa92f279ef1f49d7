#!/usr/bin/env bash
# The CUDA backend's evidence, on a machine with an NVIDIA GPU (CI has none: there the CUDA
# tests skip). Builds with -DGEIST_CUDA=ON, then
#   tests: test_cuda; test_snapshot and test_archs on the cuda backend (GEIST_TEST_BACKEND);
#          test_api and test_cli (their auto backend picks the GPU); fixtures required;
#   bench: `geist bench --backend cuda` on the qwen35-0.8b and llama-1b q8_0 mkmodel files,
#          prefill 512 and 2048 tokens, decode 128 steps, medians of REPS runs each.
# Usage: scripts/cuda_evidence.sh [tests] [bench]   (both when none is named)
# Environment: GEIST_FIXTURES (default ../shared/fixtures), BUILD (default build/cuda-evidence),
# MODELS (where the mkmodel files are made, default $BUILD/models), REPS (default 3).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$root/build/cuda-evidence}"
models="${MODELS:-$build/models}"
reps="${REPS:-3}"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests bench)

if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "cuda_evidence: no NVIDIA GPU is visible (nvidia-smi -L failed): nothing to show" >&2
  exit 1
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

echo "== build ($(date +%T))"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGEIST_CUDA=ON >/dev/null
ninja -C "$build" >/dev/null
geist="$build/bin/geist"

run_tests() {
  export GEIST_REQUIRE_FIXTURES=1  # GEIST_FIXTURES, if set, is read by the tests themselves
  local failed=0
  for t in "cuda:" "snapshot:cuda" "archs:cuda" "api:" "cli:"; do
    local suite="${t%%:*}" backend="${t#*:}"
    echo "== test_$suite${backend:+ (GEIST_TEST_BACKEND=$backend)} ($(date +%T))"
    if ! env ${backend:+GEIST_TEST_BACKEND=$backend} "$build/tests/test_$suite" --gtest_brief=1; then
      failed=1
    fi
  done
  return $failed
}

# One bench figure: the median tok/s of `geist bench ... --json` field $2.
bench_one() {
  local model="$1" field="$2"
  shift 2
  "$geist" bench -m "$model" --backend cuda -r "$reps" --json "$@" | jq -r ".$field"
}

run_bench() {
  mkdir -p "$models"
  printf "%-14s %10s %10s %10s\n" model pp512 pp2048 tg128
  for preset in qwen35-0.8b llama-1b; do
    local f="$models/$preset-q8_0.gguf"
    [ -f "$f" ] || "$geist" mkmodel --preset "$preset" --type q8_0 -o "$f" >/dev/null
    printf "%-14s %10.0f %10.0f %10.1f\n" "$preset" \
      "$(bench_one "$f" prefill_tps -p 512 -n 0)" "$(bench_one "$f" prefill_tps -p 2048 -n 0)" \
      "$(bench_one "$f" decode_tps -p 0 -n 128)"
  done
}

status=0
for step in "${steps[@]}"; do
  case "$step" in
    tests) run_tests || status=1 ;;
    bench) run_bench ;;
    *)
      echo "cuda_evidence: unknown step '$step' (tests, bench)" >&2
      exit 2
      ;;
  esac
done
exit $status
