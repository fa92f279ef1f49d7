#!/usr/bin/env bash
# Installs the npm packages of the server tests (tests/server) exactly as the committed
# package-lock.json pins them. Idempotent: does nothing when they are installed and current.
set -euo pipefail
dir=$(cd "$(dirname "$0")/../tests/server" && pwd)
stamp="$dir/node_modules/.package-lock.json"
if [ -f "$stamp" ] && [ "$stamp" -nt "$dir/package-lock.json" ]; then
  exit 0
fi
echo "install_node_deps: npm ci in tests/server" >&2
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
