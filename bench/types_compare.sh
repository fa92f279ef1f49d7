#!/usr/bin/env bash
# Speed per weight type next to llama.cpp: from one f16 GGUF, writes each type with
# llama-quantize (--pure, token_embd / output at q8_0) and with `geist quantize`, says whether
# the two files are byte-identical, then runs bench/compare.sh (geist bench and llama-bench,
# same threads and sizes) on llama-quantize's file, and with --own geist bench on its own file
# when the bytes differ. One markdown row per type on stdout; the raw runs go to OUTDIR/TYPE.txt.
# Files already in OUTDIR are reused (--quantize-only writes them and stops: that step needs no
# quiet machine).
#
#   bench/types_compare.sh F16.gguf OUTDIR [-t 2] [-r 3] [-p 512] [-n 128] [--types q4_1,q5_0]
#                          [--own] [--quantize-only]
#
# GEIST         geist binary (default: build/bin/geist, else the first build*/bin/geist)
# LLAMA_CPP_DIR a llama.cpp build directory with bin/llama-quantize and bin/llama-bench
#               (required). This script never fetches or builds it.
# A benchmark, not a test: run it on a quiet machine; the files take ~1-2.5 GB each.
set -euo pipefail

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 2 ]] || usage
f16=$1 out=$2
shift 2
t=2 r=3 p=512 n=128
types=q4_1,q5_0,q5_1,iq4_nl,q2_k,q3_k,q5_k,iq4_xs own=0 qonly=0
while [[ $# -gt 0 ]]; do
  case $1 in
    -t) t=$2; shift 2 ;;
    -r) r=$2; shift 2 ;;
    -p) p=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --own) own=1; shift ;;
    --quantize-only) qonly=1; shift ;;
    *) echo "types_compare.sh: unknown option '$1'" >&2; usage ;;
  esac
done
[[ -f $f16 ]] || { echo "types_compare.sh: no such file: $f16" >&2; exit 1; }
[[ -n ${LLAMA_CPP_DIR:-} && -x $LLAMA_CPP_DIR/bin/llama-quantize ]] ||
  { echo "types_compare.sh: set LLAMA_CPP_DIR to a llama.cpp build with bin/llama-quantize" >&2; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/find_geist.sh
source "$root/bench/find_geist.sh" "$root" types_compare.sh
export GEIST=$geist
mkdir -p "$out"

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores;" \
  "threads $t; $(basename "$f16"); $r runs per test; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| type | files | geist pp$p | llama.cpp pp$p | ratio | geist tg$n | llama.cpp tg$n | ratio | geist weight GB/s | geist's own file pp / tg |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
IFS=, read -r -a list <<<"$types"
for ty in "${list[@]}"; do
  lf=$out/llama-$ty.gguf gf=$out/geist-$ty.gguf log=$out/$ty.txt
  : >"$log"
  if [[ ! -s $lf ]]; then
    "$LLAMA_CPP_DIR"/bin/llama-quantize --pure --token-embedding-type q8_0 --output-tensor-type q8_0 \
      "$f16" "$lf" "${ty^^}" "$t" >>"$log" 2>&1 || { rm -f "$lf"; echo "| $ty | llama-quantize failed (see $log) |"; continue; }
  fi
  if [[ ! -s $gf ]]; then
    "$geist" quantize -m "$f16" --type "$ty" -o "$gf" >>"$log" 2>&1 ||
      { rm -f "$gf"; echo "| $ty | geist quantize failed (see $log) |"; continue; }
  fi
  same=differ
  cmp -s "$lf" "$gf" && same=identical
  if [[ $qonly == 1 ]]; then echo "| $ty | $same | (quantized only) |"; continue; fi
  "$root"/bench/compare.sh "$lf" -p "$p" -n "$n" -t "$t" -r "$r" >>"$log" 2>&1 ||
    { echo "| $ty | $same | compare.sh failed (see $log) |"; continue; }
  pp=$(grep "^pp$p " "$log" | tail -1) tg=$(grep "^tg$n " "$log" | tail -1)
  gbps=$(grep -o '"decode_weight_gbps":[0-9.]*' "$log" | tail -1 | cut -d: -f2)
  own_row="-"
  if [[ $own == 1 && $same == differ ]]; then
    g=$("$geist" bench -m "$gf" -p "$p" -n "$n" -t "$t" -r "$r" --json 2>>"$log")
    own_row="$(jq -r '"\(.prefill_tps*100|round/100) / \(.decode_tps*100|round/100)"' <<<"$g")"
  fi
  # compare.sh's row: test, geist median, min, -, max, llama median, min, -, max, ratio.
  read -r _ gp _ _ _ lp _ _ _ rp <<<"$pp"
  read -r _ gd _ _ _ ld _ _ _ rd <<<"$tg"
  echo "| $ty | $same | $gp | $lp | $rp | $gd | $ld | $rd | $gbps | $own_row |"
done
