#!/usr/bin/env bash
# The demo command (README): installs the Debian packages, builds the release preset and shows
# baton on a built-in cluster: the summary, where two nodes meet, and the Slurm export.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target baton
baton=build/release/src/cli/baton

echo "\$ baton topo --preset superpod-h100"
$baton topo --preset superpod-h100
echo
echo "\$ baton topo --preset superpod-h100 --meet gpu001 gpu040"
$baton topo --preset superpod-h100 --meet gpu001 gpu040
echo
echo "\$ baton topo --preset gb200-nvl72 --meet gpu001 gpu018"
$baton topo --preset gb200-nvl72 --meet gpu001 gpu018
echo
echo "\$ baton topo --preset superpod-h100 --export slurm-topology"
$baton topo --preset superpod-h100 --export slurm-topology
