#!/usr/bin/env bash
# Installs every build and test dependency from Debian's packages (idempotent).
set -euo pipefail
PKGS=(g++ cmake ninja-build pkg-config python3
      libgtest-dev libgmock-dev libbenchmark-dev
      nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libfmt-dev
      libsqlite3-dev libssl-dev libcpp-httplib-dev libsimdjson-dev libglpk-dev
      clang libclang-rt-14-dev openssl
      nodejs chromium)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
# The chart library built into the binary and the browser driver the tests use, at the
# versions web/package-lock.json pins (Chromium itself is Debian's, above).
web="$(dirname "$0")/../web"
if [ ! -d "$web/node_modules/chart.js" ] || [ ! -d "$web/node_modules/playwright-core" ] ||
   [ "$web/package-lock.json" -nt "$web/node_modules/.package-lock.json" ]; then
  npm ci --prefix "$web" --no-audit --no-fund
fi
