#!/usr/bin/env bash
# Logit parity of geist and llama.cpp on the same GGUF files (geist mkmodel presets by default).
# Needs LLAMA_CPP_DIR pointing at a llama.cpp source tree with a build in $LLAMA_CPP_DIR/build
# (this script never fetches or builds llama.cpp; it compiles only bench/llamacpp_logits.cpp
# against that build). Usage: bench/llamacpp_parity.sh [FILE.gguf ...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
: "${LLAMA_CPP_DIR:?set LLAMA_CPP_DIR to a llama.cpp checkout with a build/ directory}"
geist="${GEIST:-$root/build/release/bin/geist}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
lib="$LLAMA_CPP_DIR/build/bin"
g++ -O2 -std=c++17 "$root/bench/llamacpp_logits.cpp" -I"$LLAMA_CPP_DIR/include" \
  -I"$LLAMA_CPP_DIR/ggml/include" -L"$lib" -lllama -lggml -lggml-base -Wl,-rpath,"$lib" \
  -o "$work/llamacpp_logits"
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  for p in tiny-llama tiny-qwen35; do
    for t in f32 f16 q8_0 q4_0; do
      "$geist" mkmodel --preset "$p" --type "$t" -o "$work/$p-$t.gguf" >/dev/null
      files+=("$work/$p-$t.gguf")
    done
  done
fi
ids=$(python3 -c "import random; random.seed(3); print(','.join(str(random.randrange(1, 3000)) for _ in range(48)))")
printf '%-22s %10s %10s %8s\n' file "max|d|" "mean|d|" argmax
for f in "${files[@]}"; do
  "$work/llamacpp_logits" "$f" "$work/ref.f32" ${ids//,/ } 2>/dev/null
  "$geist" logits -m "$f" --tokens "$ids" -o "$work/geist.f32" --kv-mode f32 >/dev/null 2>&1
  python3 - "$work/ref.f32" "$work/geist.f32" "$(basename "$f")" <<'PY'
import array, sys
a = array.array('f'); a.frombytes(open(sys.argv[1], 'rb').read())
b = array.array('f'); b.frombytes(open(sys.argv[2], 'rb').read())
assert len(a) == len(b), "size mismatch"
rows = 48; nv = len(a) // rows
d = [abs(x - y) for x, y in zip(a, b)]
top = lambda v, r: max(range(nv), key=lambda i: v[r * nv + i])
agree = sum(top(a, r) == top(b, r) for r in range(rows))
print(f"{sys.argv[3]:<22} {max(d):10.3g} {sum(d) / len(d):10.3g} {agree:5d}/{rows}")
PY
done
