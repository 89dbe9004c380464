#!/usr/bin/env bash
# The test command (README, .ci/run): installs the Debian packages, builds the dev preset
# (Debug + ASan + UBSan, warnings as errors), checks formatting, runs the fast test suite, then
# runs every fuzz target for a bounded time (BATON_FUZZ_SECONDS, default 20 each; 13 targets).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

echo "== format check"
git ls-files -- 'src/*.cc' 'src/*.h' 'bench/*.cc' 'fuzz/*.cc' | xargs -r clang-format --dry-run --Werror

echo "== build (dev: ASan + UBSan)"
cmake --preset dev >/dev/null
cmake --build --preset dev

echo "== fuzz (${BATON_FUZZ_SECONDS:-20} s per target)"
bash fuzz/run.sh "${BATON_FUZZ_SECONDS:-20}"

echo "== tests"
ctest --preset dev
