#!/usr/bin/env bash
# Builds the fuzzers with clang and fuzzes each for SECONDS (default 30):
#   fuzz_gguf     seed corpus in BUILD/corpus (small files written by fuzz_gguf_seed, plus
#                 the fixtures' stories260K.gguf when present);
#   fuzz_restore  seed corpus in BUILD/corpus_restore (real snapshot images written by
#                 fuzz_restore_seed); needs the fixtures' models, skipped loudly without them.
#   fuzz_jinja    seed corpus in BUILD/corpus_jinja (the fixtures' chat templates, copied
#                 at run time); skipped loudly without the fixtures.
#   fuzz_openai   seed corpus in BUILD/corpus_openai (valid chat, completions and session
#                 bodies written here) with a dictionary of the schema's keys; also renders
#                 with the fixtures' Qwen3.5 template when present.
#   fuzz_tier_object  seed corpus in BUILD/corpus_tier (entries written by
#                 fuzz_tier_object_seed): the tier object readers (entry codec, disk-tier files).
#   fuzz_redis_object  the Redis tier's object reader (manifest + parts); seed corpus in
#                 BUILD/corpus_redis (valid framed objects written by fuzz_redis_object_seed).
# TARGETS (default "gguf restore jinja openai tier redis") picks which run. Exits non-zero if a
# fuzzer finds a crash (its reproducer lands in BUILD/artifacts).
# BUILD is build/fuzz (configured here: fuzzers only), or GEIST_FUZZ_BUILD: a tree already
# configured with -DGEIST_FUZZ=ON (scripts/test.sh passes its sanitizer tree, which builds the
# fuzzers next to the tests). libFuzzer runs one process on one core: FUZZ_JOBS (default: the
# number of cores) fuzzers run side by side, each for SECONDS, its output in BUILD/fuzz-logs.
# Usage: fuzz/run.sh [SECONDS] [TARGETS...]
set -euo pipefail

seconds="${1:-30}"
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then targets=(gguf restore jinja openai tier redis); fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fixtures="${GEIST_FIXTURES:-$root/../shared/fixtures}"
fuzz_jobs="${FUZZ_JOBS:-$(nproc)}"

if [[ -n "${GEIST_FUZZ_BUILD:-}" ]]; then
  build="$GEIST_FUZZ_BUILD"
  if ! grep -qx 'GEIST_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
    echo "fuzz/run.sh: GEIST_FUZZ_BUILD=$build is not a tree configured with -DGEIST_FUZZ=ON" >&2
    exit 2
  fi
else
  build="$root/build/fuzz"
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DGEIST_FUZZ=ON -DGEIST_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
mkdir -p "$build/artifacts" "$build/fuzz-logs"

# Which targets run (fixture-less ones skip loudly) and what they need built.
run=()
ninja_targets=()
for t in "${targets[@]}"; do
  case "$t" in
    gguf) ninja_targets+=(fuzz_gguf fuzz_gguf_seed) ;;
    restore)
      if [[ ! -f "$fixtures/models/stories260K.gguf" ]]; then
        echo "SKIPPED: fuzz_restore needs the fixtures (not found at $fixtures)" >&2
        continue
      fi
      ninja_targets+=(fuzz_restore fuzz_restore_seed)
      ;;
    jinja)
      if ! ls "$fixtures"/templates/*.jinja >/dev/null 2>&1; then
        echo "SKIPPED: fuzz_jinja needs the fixtures' templates (not found at $fixtures/templates)" >&2
        continue
      fi
      ninja_targets+=(fuzz_jinja)
      ;;
    openai) ninja_targets+=(fuzz_openai) ;;
    tier) ninja_targets+=(fuzz_tier_object fuzz_tier_object_seed) ;;
    redis) ninja_targets+=(fuzz_redis_object fuzz_redis_object_seed) ;;
    *)
      echo "unknown fuzz target '$t' (gguf, restore, jinja, openai, tier, redis)" >&2
      exit 2
      ;;
  esac
  run+=("$t")
done
[[ ${#run[@]} -eq 0 ]] && exit 0
ninja -C "$build" -j2 "${ninja_targets[@]}"

# Seed corpora (written fresh each run; libFuzzer adds what it finds to them), then the command
# line of each target. Crash reproducers land in BUILD/artifacts; max_len keeps the big GGUF
# fixture from making every mutation a megabyte long.
common=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
declare -A cmd=()
for t in "${run[@]}"; do
  case "$t" in
    gguf)
      corpus="$build/corpus"
      mkdir -p "$corpus"
      "$build/fuzz/fuzz_gguf_seed" "$corpus"
      if [[ -f "$fixtures/models/stories260K.gguf" ]]; then
        cp -f "$fixtures/models/stories260K.gguf" "$corpus/stories260K.gguf"
      fi
      cmd[$t]="$(printf '%q ' "$build/fuzz/fuzz_gguf" "${common[@]}" -max_len=16384 \
        -artifact_prefix="$build/artifacts/" "$corpus")"
      ;;
    restore)
      corpus="$build/corpus_restore"
      mkdir -p "$corpus"
      "$build/fuzz/fuzz_restore_seed" "$fixtures" "$corpus"
      cmd[$t]="$(printf '%q ' env GEIST_FIXTURES="$fixtures" "$build/fuzz/fuzz_restore" \
        "${common[@]}" -max_len=262144 -artifact_prefix="$build/artifacts/restore-" "$corpus")"
      ;;
    jinja)
      corpus="$build/corpus_jinja"
      mkdir -p "$corpus"
      cp -f "$fixtures"/templates/*.jinja "$corpus/"
      cmd[$t]="$(printf '%q ' "$build/fuzz/fuzz_jinja" "${common[@]}" -max_len=65536 \
        -artifact_prefix="$build/artifacts/jinja-" "$corpus")"
      ;;
    openai)
      corpus="$build/corpus_openai"
      mkdir -p "$corpus"
      printf '%s' '{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":8,"temperature":0.7,"top_p":0.9,"top_k":40,"min_p":0.05,"seed":1,"stop":["\n\n","END"],"stream":true,"stream_options":{"include_usage":true},"logprobs":true,"top_logprobs":3,"presence_penalty":0.5,"frequency_penalty":0.5}' >"$corpus/chat.json"
      printf '%s' '{"messages":[{"role":"user","content":[{"type":"text","text":"Weather?"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c0","type":"function","function":{"name":"get","arguments":"{\"city\":\"Oslo\"}"}}]},{"role":"tool","tool_call_id":"c0","content":"3 C"}],"tools":[{"type":"function","function":{"name":"get","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"tool_choice":"auto","chat_template_kwargs":{"enable_thinking":false},"response_format":{"type":"text"},"cache_salt":"a","n":1}' >"$corpus/tools.json"
      printf '%s' '{"prompt":"Once upon a time","max_tokens":16,"logprobs":2,"echo":false,"stop":"x","repeat_penalty":1.1,"repeat_last_n":64,"n_predict":4}' >"$corpus/completion.json"
      printf '%s' '{"prompt":[[1,2,3,511]],"max_completion_tokens":3,"seed":-5}' >"$corpus/ids.json"
      printf '%s' '{"id":"sess-1.a_b","messages":[{"role":"user","content":"Hello"}]}' >"$corpus/session.json"
      dict="$build/openai.dict"
      : >"$dict"
      for k in messages role content system user assistant tool tools tool_calls tool_choice \
        function name arguments parameters prompt max_tokens max_completion_tokens n_predict \
        temperature top_p top_k min_p presence_penalty frequency_penalty repeat_penalty \
        repeat_last_n seed stop n logprobs top_logprobs stream stream_options include_usage \
        response_format type text cache_salt prompt_cache_key user model chat_template_kwargs \
        enable_thinking id reasoning_content; do
        printf '"\\"%s\\""\n' "$k" >>"$dict"
      done
      cmd[$t]="$(printf '%q ' env GEIST_FIXTURES="$fixtures" "$build/fuzz/fuzz_openai" \
        "${common[@]}" -max_len=16384 -dict="$dict" -artifact_prefix="$build/artifacts/openai-" \
        "$corpus")"
      ;;
    tier)
      corpus="$build/corpus_tier"
      mkdir -p "$corpus"
      "$build/fuzz/fuzz_tier_object_seed" "$corpus"
      cmd[$t]="$(printf '%q ' "$build/fuzz/fuzz_tier_object" "${common[@]}" -max_len=4096 \
        -artifact_prefix="$build/artifacts/tier-" "$corpus")"
      ;;
    redis)
      corpus="$build/corpus_redis"
      mkdir -p "$corpus"
      "$build/fuzz/fuzz_redis_object_seed" "$corpus"
      cmd[$t]="$(printf '%q ' "$build/fuzz/fuzz_redis_object" "${common[@]}" -max_len=65536 \
        -artifact_prefix="$build/artifacts/redis-" "$corpus")"
      ;;
  esac
done

# Up to fuzz_jobs fuzzers at a time. A finished one prints its final stats (its whole log when
# it failed); the script fails when any did.
declare -A pid_of=()
failed=()
report() {  # target exit-status
  local log="$build/fuzz-logs/$1.log"
  if [[ "$2" -eq 0 ]]; then
    echo "== fuzz_$1: OK ($seconds s; log $log)"
    grep -E '^(stat::|Done |#[0-9]+.*DONE)' "$log" || true
  else
    echo "== fuzz_$1: FAILED (exit $2; reproducer in $build/artifacts)"
    cat "$log"
    failed+=("$1")
  fi
}
reap_one() {
  local st=0 p k
  wait -n -p p || st=$?
  for k in "${!pid_of[@]}"; do
    if [[ "${pid_of[$k]}" == "$p" ]]; then
      unset "pid_of[$k]"
      report "$k" "$st"
      return
    fi
  done
}
for t in "${run[@]}"; do
  while [[ ${#pid_of[@]} -ge $fuzz_jobs ]]; do reap_one; done
  echo "== fuzz_$t: $seconds s ($(date +%T))"
  bash -c "${cmd[$t]}" >"$build/fuzz-logs/$t.log" 2>&1 &
  pid_of[$t]=$!
done
while [[ ${#pid_of[@]} -gt 0 ]]; do reap_one; done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
