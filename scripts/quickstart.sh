#!/usr/bin/env bash
# Installs dependencies, builds geist (Release) and runs the main job on a built-in default
# model: `geist mkmodel` writes a small Llama-architecture GGUF with random weights (no
# download), then `geist run` generates from it. Pass MODEL=path/to/file.gguf to run a real
# model instead, and PROMPT="..." to change the prompt.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build/release}"
"$root/scripts/install_deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGEIST_TESTS=OFF >/dev/null
ninja -C "$build" geist_cli
geist="$build/bin/geist"
model="${MODEL:-$build/tiny-llama-q8_0.gguf}"
if [ -z "${MODEL:-}" ] && [ ! -f "$model" ]; then
  "$geist" mkmodel --preset tiny-llama --type q8_0 -o "$model"
fi
"$geist" info -m "$model"
"$geist" run -m "$model" -p "${PROMPT:-Once upon a time}" -n "${N:-48}" --seed 42
