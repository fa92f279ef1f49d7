#!/usr/bin/env bash
# Runs the server conformance tests (node --test, the official openai client) against the
# geist binary given as $1. ctest calls this (tests/CMakeLists.txt); the npm packages come from
# the committed lock file (scripts/install_node_deps.sh, also run by scripts/install_deps.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export GEIST_BIN=${1:?usage: run.sh GEIST_BINARY [test files...]}
shift
if ! command -v node >/dev/null; then
  echo "tests/server: node is missing (run scripts/install_deps.sh)" >&2
  exit 1
fi
if [ ! -d "$here/node_modules/openai" ]; then
  # ctest runs one file per test, side by side: one npm ci at a time.
  flock "$here/.install.lock" "$here/../../scripts/install_node_deps.sh"
fi
cd "$here"
if [ $# -eq 0 ]; then
  set -- *.test.mjs
fi
exec node --test --test-reporter=spec "$@"
