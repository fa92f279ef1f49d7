#!/usr/bin/env bash
# The CUDA backend's evidence, on a machine with an NVIDIA GPU (CI has none: there the CUDA
# tests skip). Builds with -DGEIST_CUDA=ON, then
#   tests: test_cuda; test_snapshot and test_archs on the cuda backend (GEIST_TEST_BACKEND);
#          test_api and test_cli (their auto backend picks the GPU); fixtures required;
#   bench: `geist bench --backend cuda` on the qwen35-0.8b and llama-1b q8_0 mkmodel files,
#          prefill 512 and 2048 tokens, decode 128 steps, medians of REPS runs each; with
#          LLAMA_CPP_DIR (a llama.cpp CUDA build: bin/llama-bench) next to llama-bench -ngl 99
#          on the same files, and the ratios;
#   batched: first the batch invariance tests on the GPU (test_cuda --gtest_filter=CudaBatch.*:
#          every session memcmp-equal to its lone run), then `geist bench --parallel 1,4,16,64
#          --backend cuda` (prompt 512, 128 generated each) next to llama-batched-bench -ngl 99
#          (LLAMA_CPP_DIR);
#   types: each weight type of the real-files issue on the qwen35-0.8b shape (an f16 mkmodel file
#          written by llama-quantize --pure, token_embd / output at q8_0, as bench/types_compare.sh
#          does; needs LLAMA_CPP_DIR with bin/llama-quantize): geist bench --backend cuda next to
#          llama-bench -ngl 99, pp2048 and tg128 (TYPES, default the eight new types and q8_0);
#   server: bench/server_bench.mjs on the GPU (node), geist serve --backend cuda next to
#          llama-server -ngl 99 (LLAMA_CPP_DIR) with 64 sequences, 128 requests at 1, 8, 32 and 64
#          clients (SERVER_CONCURRENCY);
#   sanitize: compute-sanitizer memcheck, racecheck, initcheck and synccheck over test_cuda's
#          kernel tests (SANITIZE_FILTER, a gtest filter, default the kernel suites; the model-level
#          suites take far longer under the tools), each tool bounded by SANITIZE_SECONDS (600).
# Usage: scripts/cuda_evidence.sh [tests] [bench] [batched] [types] [server] [sanitize]
#        (tests bench if none)
# Environment: GEIST_FIXTURES (default ../shared/fixtures), BUILD (default build/cuda-evidence),
# MODELS (where the mkmodel files are made, default $BUILD/models), REPS (default 3),
# LLAMA_CPP_DIR (a llama.cpp CUDA build directory; never fetched or built by this script).
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

model_file() {  # the mkmodel file of a preset, made once
  mkdir -p "$models"
  local f="$models/$1-q8_0.gguf"
  [ -f "$f" ] || "$geist" mkmodel --preset "$1" --type q8_0 -o "$f" >/dev/null
  echo "$f"
}

# llama-bench's mean tok/s of one test (n_prompt $2, n_gen $3) on file $1, fully offloaded.
llama_one() {
  "$LLAMA_CPP_DIR/bin/llama-bench" -m "$1" -ngl 99 -p "$2" -n "$3" -r "$reps" -o json 2>/dev/null |
    jq -r ".[] | select(.n_prompt == $2 and .n_gen == $3) | .avg_ts"
}

run_bench() {
  local cmp=""
  [ -n "${LLAMA_CPP_DIR:-}" ] && [ -x "$LLAMA_CPP_DIR/bin/llama-bench" ] && cmp=1
  printf "%-12s %-7s %12s %12s %7s\n" model test "geist tok/s" "llama tok/s" ratio
  for preset in qwen35-0.8b llama-1b; do
    local f
    f=$(model_file "$preset")
    for t in "pp512 512 0 prefill_tps" "pp2048 2048 0 prefill_tps" "tg128 0 128 decode_tps"; do
      set -- $t
      local g l="-" r="-"
      g=$(bench_one "$f" "$4" -p "$2" -n "$3")
      if [ -n "$cmp" ]; then
        l=$(llama_one "$f" "$2" "$3")
        r=$(jq -n "$g / $l * 100 | round / 100")
      fi
      printf "%-12s %-7s %12.1f %12s %7s\n" "$preset" "$1" "$g" "$l" "$r"
    done
  done
}

run_batched() {
  local bs="${BATCHES:-1,4,16,64}" bmax
  echo "== test_cuda --gtest_filter=CudaBatch.* ($(date +%T))"
  GEIST_REQUIRE_FIXTURES=1 GEIST_REQUIRE_CUDA=1 "$build/tests/test_cuda" --gtest_brief=1 \
    --gtest_filter='CudaBatch.*' || echo "cuda_evidence: the batch invariance tests FAILED" >&2
  bmax=$(tr ',' '\n' <<<"$bs" | sort -n | tail -1)
  printf "%-12s %4s %12s %12s %7s %10s %10s\n" model B "geist tg/s" "llama tg/s" ratio \
    "geist ttft" "llama ttft"
  for preset in qwen35-0.8b llama-1b; do
    local f g l=""
    f=$(model_file "$preset")
    g=$("$geist" bench -m "$f" --backend cuda -p 512 -n 128 -r 1 --parallel "$bs" --json)
    if [ -n "${LLAMA_CPP_DIR:-}" ] && [ -x "$LLAMA_CPP_DIR/bin/llama-batched-bench" ]; then
      l=$("$LLAMA_CPP_DIR/bin/llama-batched-bench" -m "$f" -ngl 99 -c $((bmax * 640 + 64)) \
        -npp 512 -ntg 128 -npl "$bs" --output-format jsonl 2>/dev/null | grep '^{')
    fi
    for b in ${bs//,/ }; do
      local gd gt ld="-" lt="-" r="-"
      gd=$(jq -r "select(.parallel == $b) | .decode_tps" <<<"$g")
      gt=$(jq -r "select(.parallel == $b) | .ttft_ms" <<<"$g")
      if [ -n "$l" ]; then
        ld=$(jq -r "select(.pl == $b) | .speed_tg" <<<"$l")
        lt=$(jq -r "select(.pl == $b) | .t_pp * 1000 | round" <<<"$l")
        r=$(jq -n "$gd / $ld * 100 | round / 100")
      fi
      printf "%-12s %4d %12.1f %12s %7s %10.1f %10s\n" "$preset" "$b" "$gd" "$ld" "$r" "$gt" "$lt"
    done
  done
}

# The suites of test_cuda that exercise kernels directly (the model-level ones, CudaModels,
# CudaBatch, CudaGraphs, CudaSnapshot, CudaQuantFixtures, run whole models and take many
# minutes under the tools).
kernel_suites='CudaOps.*:CudaKv.*:DeltaNetCuda.*:CudaMatmulPrefill.*:CudaMatmulQ8.*:CudaRopeAttendRows.*:CudaRopeAttend.*:CudaSwigluFfn.*:CudaDecodeFusion.*:CudaTransfer.*'

run_sanitize() {
  local cs failed=0 rc
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck initcheck synccheck; do
    echo "== compute-sanitizer --tool $tool ($(date +%T))"
    rc=0
    timeout "${SANITIZE_SECONDS:-600}" "$cs" --tool "$tool" --error-exitcode 9 \
      "$build/tests/test_cuda" --gtest_brief=1 --gtest_filter="${SANITIZE_FILTER:-$kernel_suites}" \
      >"$build/sanitize-$tool.log" 2>&1 || rc=$?
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests from|FAILED" "$build/sanitize-$tool.log" | tail -6
    case $rc in
      0) ;;
      124) echo "cuda_evidence: $tool did not finish in ${SANITIZE_SECONDS:-600} s" >&2; failed=1 ;;
      9) echo "cuda_evidence: $tool found errors ($build/sanitize-$tool.log)" >&2; failed=1 ;;
      *) echo "cuda_evidence: $tool: a test failed under the tool, rc $rc ($build/sanitize-$tool.log)" >&2; failed=1 ;;
    esac
  done
  return $failed
}

run_types() {
  local q="${LLAMA_CPP_DIR:-}/bin/llama-quantize" f16 ty f gj lj gp gd lp ld
  if [ ! -x "$q" ] || [ ! -x "$LLAMA_CPP_DIR/bin/llama-bench" ]; then
    echo "cuda_evidence: types needs LLAMA_CPP_DIR with bin/llama-quantize and bin/llama-bench" >&2
    return 1
  fi
  mkdir -p "$models"
  f16="$models/qwen35-0.8b-f16.gguf"
  [ -f "$f16" ] || "$geist" mkmodel --preset qwen35-0.8b --type f16 -o "$f16" >/dev/null
  printf "%-7s %12s %12s %6s %11s %11s %6s\n" type "geist pp2048" "llama pp2048" ratio \
    "geist tg128" "llama tg128" ratio
  for ty in ${TYPES:-q4_1 q5_0 q5_1 iq4_nl q2_k q3_k q5_k iq4_xs q8_0}; do
    f="$models/qwen35-0.8b-llama-$ty.gguf"
    if [ ! -f "$f" ] && ! "$q" --pure --token-embedding-type q8_0 --output-tensor-type q8_0 \
      "$f16" "$f" "${ty^^}" "$(nproc)" >"$models/quantize-$ty.log" 2>&1; then
      rm -f "$f"
      echo "$ty: llama-quantize failed ($models/quantize-$ty.log)"
      continue
    fi
    gj=$("$geist" bench -m "$f" --backend cuda -p 2048 -n 128 -r "$reps" --json) || {
      echo "$ty: geist bench failed"
      continue
    }
    lj=$("$LLAMA_CPP_DIR/bin/llama-bench" -m "$f" -ngl 99 -p 2048 -n 128 -r "$reps" -o json 2>/dev/null)
    gp=$(jq -r .prefill_tps <<<"$gj")
    gd=$(jq -r .decode_tps <<<"$gj")
    lp=$(jq -r '.[] | select(.n_prompt == 2048) | .avg_ts' <<<"$lj")
    ld=$(jq -r '.[] | select(.n_gen == 128) | .avg_ts' <<<"$lj")
    printf "%-7s %12.0f %12.0f %6s %11.1f %11.1f %6s\n" "$ty" "$gp" "$lp" \
      "$(jq -n "$gp / $lp * 100 | round / 100")" "$gd" "$ld" "$(jq -n "$gd / $ld * 100 | round / 100")"
  done
}

run_server() {
  local node ls=""
  node=$(command -v node || true)
  if [ -z "$node" ]; then
    echo "cuda_evidence: server needs node (Node 20) on PATH" >&2
    return 1
  fi
  [ -n "${LLAMA_CPP_DIR:-}" ] && ls="$LLAMA_CPP_DIR/bin/llama-server"
  for preset in qwen35-0.8b llama-1b; do
    echo "== server $preset ($(date +%T))"
    GEIST_BIN="$geist" LLAMA_SERVER="${ls:-/none}" "$node" "$root/bench/server_bench.mjs" \
      -m "$(model_file "$preset")" -t 8 --parallel 64 --requests 128 \
      --concurrency "${SERVER_CONCURRENCY:-1,8,32,64}" --geist-args "--backend cuda" \
      --llama-args "-ngl 99" | grep -v '^{'
  done
}

status=0
for step in "${steps[@]}"; do
  case "$step" in
    tests) run_tests || status=1 ;;
    bench) run_bench ;;
    batched) run_batched ;;
    types) run_types || status=1 ;;
    server) run_server || status=1 ;;
    sanitize) run_sanitize || status=1 ;;
    *)
      echo "cuda_evidence: unknown step '$step' (tests, bench, batched, types, server, sanitize)" >&2
      exit 2
      ;;
  esac
done
exit $status
