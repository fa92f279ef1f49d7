#!/usr/bin/env bash
# Builds the fuzzers with clang and fuzzes each for SECONDS (default 30):
#   fuzz_gguf     seed corpus in build/fuzz/corpus (small files written by fuzz_gguf_seed, plus
#                 the fixtures' stories260K.gguf when present);
#   fuzz_restore  seed corpus in build/fuzz/corpus_restore (real snapshot images written by
#                 fuzz_restore_seed); needs the fixtures' models, skipped loudly without them.
#   fuzz_jinja    seed corpus in build/fuzz/corpus_jinja (the fixtures' chat templates, copied
#                 at run time); skipped loudly without the fixtures.
#   fuzz_openai   seed corpus in build/fuzz/corpus_openai (valid chat, completions and session
#                 bodies written here) with a dictionary of the schema's keys; also renders
#                 with the fixtures' Qwen3.5 template when present.
#   fuzz_tier_object  seed corpus in build/fuzz/corpus_tier (entries written by
#                 fuzz_tier_object_seed): the tier object readers (entry codec, disk-tier files).
#   fuzz_redis_object  the Redis tier's object reader (manifest + parts); seed corpus in
#                 build/fuzz/corpus_redis (valid framed objects written by fuzz_redis_object_seed).
# TARGETS (default "gguf restore jinja openai tier redis") picks which run. Exits non-zero if a fuzzer finds a crash.
# Usage: fuzz/run.sh [SECONDS] [TARGETS...]
set -euo pipefail

seconds="${1:-30}"
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then targets=(gguf restore jinja openai tier redis); fi
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
    openai)
      ninja -C "$build" -j2 fuzz_openai
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
      GEIST_FIXTURES="$fixtures" "$build/fuzz/fuzz_openai" -max_total_time="$seconds"         -max_len=16384 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -dict="$dict"         -artifact_prefix="$build/artifacts/openai-" "$corpus"
      ;;
    tier)
      ninja -C "$build" -j2 fuzz_tier_object fuzz_tier_object_seed
      corpus="$build/corpus_tier"
      mkdir -p "$corpus"
      "$build/fuzz/fuzz_tier_object_seed" "$corpus"
      "$build/fuzz/fuzz_tier_object" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/artifacts/tier-" "$corpus"
      ;;
    redis)
      ninja -C "$build" -j2 fuzz_redis_object fuzz_redis_object_seed
      corpus="$build/corpus_redis"
      mkdir -p "$corpus"
      "$build/fuzz/fuzz_redis_object_seed" "$corpus"
      "$build/fuzz/fuzz_redis_object" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/artifacts/redis-" \
        "$corpus"
      ;;
    *)
      echo "unknown fuzz target '$t' (gguf, restore, jinja, openai, tier, redis)" >&2
      exit 2
      ;;
  esac
done
