#!/usr/bin/env bash
# Fails when any C/C++ source differs from .clang-format's style.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
mapfile -t files < <(git ls-files --cached --others --exclude-standard \
  '*.h' '*.cpp' '*.c' '*.cu' '*.cuh' | grep -v '\.inc$' || true)
[ ${#files[@]} -eq 0 ] && exit 0
clang-format --dry-run --Werror "${files[@]}"
echo "format check: ${#files[@]} files OK"
