#!/usr/bin/env bash
# Installs everything baton needs to build, test and demo: Debian 12 packages (python3-torch for
# the real training jobs of examples/ and tests/realjob, run with /usr/bin/python3), and the
# dashboard's npm packages pinned in web/package-lock.json. Idempotent; run as root (or through
# sudo). Nothing is downloaded at build time. The Kubernetes test control plane
# (scripts/k8s-control-plane.sh) is built apart, once, from Go modules through the Go module proxy,
# with Go 1.26 (Debian 12 ships an older one; without Go its test skips).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git
  clang clang-format clang-tidy libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libsqlite3-dev sqlite3 libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev
  libpq-dev libpqxx-dev postgresql curl ccache
  openssl python3-yaml
  slurmctld slurmd slurm-client munge
  chromium
  python3-torch
)
# Node.js and npm for the dashboard's pinned packages (web/package-lock.json) and its browser
# tests; a machine that already has a node with npm (another packaging) keeps it.
if ! command -v npm >/dev/null 2>&1; then packages+=(nodejs npm); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The dashboard's npm packages, exactly as web/package-lock.json pins them (uPlot is embedded in
# the daemon at build time; playwright-core drives Chromium in the browser tests).
if [[ ! -f web/node_modules/.package-lock.json ]] ||
   ! cmp -s web/package-lock.json web/node_modules/.baton-installed-lock; then
  npm ci --prefix web --no-audit --no-fund --loglevel=error
  cp web/package-lock.json web/node_modules/.baton-installed-lock
fi
