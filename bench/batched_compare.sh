#!/usr/bin/env bash
# Batched decode across sessions, geist next to llama.cpp's llama-batched-bench on the same
# GGUF, threads and sizes: B sequences each prefill their own P-token prompt, then generate N
# tokens each, for every B in the list. Prints aggregate prefill and decode tok/s, time to first
# token and geist's resident memory, and the ratios geist / llama.cpp.
#
#   bench/batched_compare.sh MODEL.gguf [-p 512] [-n 128] [-t 2] [-b 1,2,4,8,16] [-r 1]
#
# GEIST         geist binary (default: build/bin/geist, else the first build*/bin/geist)
# LLAMA_CPP_DIR a llama.cpp build directory holding bin/llama-batched-bench. Without it only
#               geist's numbers are printed. This script never fetches or builds it.
# A benchmark, not a test: run it on an otherwise idle machine. Needs jq.
set -euo pipefail

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 1 ]] || usage
model=$1
shift
p=512 n=128 t=2 bs=1,2,4,8,16 r=1
while [[ $# -gt 0 ]]; do
  case $1 in
    -p) p=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    -t) t=$2; shift 2 ;;
    -b) bs=$2; shift 2 ;;
    -r) r=$2; shift 2 ;;
    *) echo "batched_compare.sh: unknown option '$1'" >&2; usage ;;
  esac
done
[[ -f $model ]] || { echo "batched_compare.sh: no such model file: $model" >&2; exit 1; }
command -v jq >/dev/null || { echo "batched_compare.sh: needs jq" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/find_geist.sh
source "$root/bench/find_geist.sh" "$root" batched_compare.sh

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores;" \
  "threads $t; model $(basename "$model"); prompt $p + $n generated per sequence"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (numbers are noisy while other work runs)"
echo

g=$("$geist" bench -m "$model" -p "$p" -n "$n" -t "$t" -r "$r" --parallel "$bs" --json)

lb=
if [[ -n ${LLAMA_CPP_DIR:-} ]]; then
  for cand in "$LLAMA_CPP_DIR"/bin/llama-batched-bench "$LLAMA_CPP_DIR"/llama-batched-bench; do
    if [[ -x $cand ]]; then lb=$cand; break; fi
  done
  [[ -n $lb ]] || { echo "batched_compare.sh: no llama-batched-bench under LLAMA_CPP_DIR" >&2; exit 1; }
fi
l=
if [[ -n $lb ]]; then
  bmax=$(tr ',' '\n' <<<"$bs" | sort -n | tail -1)
  # Context for the largest batch (every sequence its own prompt); llama.cpp's defaults for
  # the rest (n_batch 2048, n_ubatch 512, flash attention auto).
  l=$("$lb" -m "$model" -c $((bmax * (p + n) + 64)) -npp "$p" -ntg "$n" -npl "$bs" -t "$t" \
    --output-format jsonl 2>/dev/null | grep '^{')
fi

printf '%4s | %12s %12s %6s | %12s %12s %6s | %10s %10s | %8s\n' B "geist pp/s" "llama pp/s" ratio \
  "geist tg/s" "llama tg/s" ratio "geist ttft" "llama ttft" "RSS MiB"
for b in ${bs//,/ }; do
  gr=$(jq -c "select(.parallel == $b)" <<<"$g")
  gp=$(jq -r .prefill_tps <<<"$gr") gd=$(jq -r .decode_tps <<<"$gr") gt=$(jq -r .ttft_ms <<<"$gr")
  rss=$(jq -r .rss_mib <<<"$gr")
  if [[ -n $l ]]; then
    lr=$(jq -c "select(.pl == $b)" <<<"$l")
    lp=$(jq -r .speed_pp <<<"$lr") ld=$(jq -r .speed_tg <<<"$lr")
    # llama-batched-bench's first token comes when the unified prompt batch is done.
    lt=$(jq -r '.t_pp * 1000' <<<"$lr")
    printf '%4d | %12.2f %12.2f %6.2f | %12.2f %12.2f %6.2f | %10.1f %10.1f | %8.1f\n' "$b" \
      "$gp" "$lp" "$(jq -n "$gp / $lp")" "$gd" "$ld" "$(jq -n "$gd / $ld")" "$gt" "$lt" "$rss"
  else
    printf '%4d | %12.2f %12s %6s | %12.2f %12s %6s | %10.1f %10s | %8.1f\n' "$b" "$gp" - - \
      "$gd" - - "$gt" - "$rss"
  fi
done
[[ -n $l ]] || echo "(set LLAMA_CPP_DIR to a llama.cpp build directory to compare)"
