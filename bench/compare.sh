#!/usr/bin/env bash
# Prefill and decode speed of geist next to llama.cpp's llama-bench on the same GGUF file, the
# same thread count and the same test sizes; prints both and the ratio geist / llama.cpp.
#
#   bench/compare.sh MODEL.gguf [-p 512] [-n 128] [-t THREADS] [-r 5]
#
# GEIST         geist binary (default: build/bin/geist, else the first build*/bin/geist)
# LLAMA_CPP_DIR a llama.cpp build directory holding bin/llama-bench (or llama-bench). Without
#               it only geist's numbers are printed. This script never fetches or builds it.
# Needs jq. Numbers are medians of the runs, with min-max; a benchmark, not a test.
set -euo pipefail

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 1 ]] || usage
model=$1
shift
p=512 n=128 t=$(nproc) r=5
while [[ $# -gt 0 ]]; do
  case $1 in
    -p) p=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    -t) t=$2; shift 2 ;;
    -r) r=$2; shift 2 ;;
    *) echo "compare.sh: unknown option '$1'" >&2; usage ;;
  esac
done
[[ -f $model ]] || { echo "compare.sh: no such model file: $model" >&2; exit 1; }
command -v jq >/dev/null || { echo "compare.sh: needs jq" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/find_geist.sh
source "$root/bench/find_geist.sh" "$root" compare.sh

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores;" \
  "threads $t; model $(basename "$model"); $r runs per test"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (numbers are noisy while other work runs)"
echo

g=$("$geist" bench -m "$model" -p "$p" -n "$n" -t "$t" -r "$r" --json)
gp=$(jq -r '.prefill_tps' <<<"$g") gpmin=$(jq -r '.prefill_tps_min' <<<"$g") gpmax=$(jq -r '.prefill_tps_max' <<<"$g")
gd=$(jq -r '.decode_tps' <<<"$g") gdmin=$(jq -r '.decode_tps_min' <<<"$g") gdmax=$(jq -r '.decode_tps_max' <<<"$g")

lb=
if [[ -n ${LLAMA_CPP_DIR:-} ]]; then
  for cand in "$LLAMA_CPP_DIR"/bin/llama-bench "$LLAMA_CPP_DIR"/llama-bench; do
    if [[ -x $cand ]]; then lb=$cand; break; fi
  done
  [[ -n $lb ]] || { echo "compare.sh: no llama-bench under LLAMA_CPP_DIR=$LLAMA_CPP_DIR" >&2; exit 1; }
fi

# Median, min and max of a JSON array of samples.
stats() { jq -r 'sort | [ (if length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end), .[0], .[-1] ] | map(tostring) | join(" ")'; }

if [[ -z $lb ]]; then
  printf '%-8s %14s %22s\n' test "geist tok/s" "min - max"
  printf 'pp%-6s %14.2f %10.2f - %-10.2f\n' "$p" "$gp" "$gpmin" "$gpmax"
  printf 'tg%-6s %14.2f %10.2f - %-10.2f\n' "$n" "$gd" "$gdmin" "$gdmax"
  echo
  echo "(set LLAMA_CPP_DIR to a llama.cpp build directory to compare with llama-bench)"
  exit 0
fi

l=$("$lb" -m "$model" -p "$p" -n "$n" -t "$t" -r "$r" -o json)
read -r lp lpmin lpmax < <(jq -c "[.[] | select(.n_prompt == $p and .n_gen == 0)][0].samples_ts" <<<"$l" | stats)
read -r ld ldmin ldmax < <(jq -c "[.[] | select(.n_prompt == 0 and .n_gen == $n)][0].samples_ts" <<<"$l" | stats)

printf '%-8s %14s %22s %16s %22s %8s\n' test "geist tok/s" "min - max" "llama.cpp tok/s" "min - max" ratio
printf 'pp%-6s %14.2f %10.2f - %-10.2f %16.2f %10.2f - %-10.2f %8.2f\n' "$p" "$gp" "$gpmin" "$gpmax" \
  "$lp" "$lpmin" "$lpmax" "$(jq -n "$gp / $lp")"
printf 'tg%-6s %14.2f %10.2f - %-10.2f %16.2f %10.2f - %-10.2f %8.2f\n' "$n" "$gd" "$gdmin" "$gdmax" \
  "$ld" "$ldmin" "$ldmax" "$(jq -n "$gd / $ld")"
echo
echo "geist: $(jq -c '{decode_weight_gbps, peak_rss_mib}' <<<"$g")"
