#!/usr/bin/env bash
# Installs the Debian 12 packages geist needs. Idempotent: does nothing when all are present.
set -euo pipefail
# --arm64: also the cross compiler, qemu-user and the :arm64 libraries (scripts/test_arm64.sh).
pkgs=(cmake ninja-build g++ clang libclang-rt-14-dev clang-format libgtest-dev libgmock-dev
      libhwy-dev libxxhash-dev jq
      nlohmann-json3-dev python3-jinja2
      libcpp-httplib-dev pkg-config libssl-dev zlib1g-dev libbrotli-dev chromium)
# The Redis tier: hiredis as the client; redis-server in its tests; HAProxy for
# scripts/deploy_local.sh (docs/DEPLOY.md).
pkgs+=(libhiredis-dev redis-server haproxy curl)
# Node (server tests: the openai npm client, puppeteer-core): Debian's when none is installed.
if ! command -v node >/dev/null; then pkgs+=(nodejs npm); fi
# The Python package (python/): venv + pip to install it, pytest to test it, numpy optional.
pkgs+=(python3-venv python3-pip python3-pytest python3-numpy)
if [ "${1:-}" = "--arm64" ]; then
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO dpkg --add-architecture arm64
    $SUDO apt-get update -qq
  fi
  pkgs+=(g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libgtest-dev:arm64 libxxhash-dev:arm64)
  # The server and the Redis tier (cpp-httplib with OpenSSL, zlib and Brotli; hiredis).
  pkgs+=(libcpp-httplib-dev:arm64 libssl-dev:arm64 zlib1g-dev:arm64 libbrotli-dev:arm64
    libhiredis-dev:arm64)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  "$(dirname "$0")/install_node_deps.sh"
  exit 0
fi
echo "install_deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
"$(dirname "$0")/install_node_deps.sh"
