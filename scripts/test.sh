#!/usr/bin/env bash
# The test command (README, .ci/run): installs the Debian packages, checks formatting, builds the
# dev preset (clang, Debug + ASan + UBSan, warnings as errors, with the fuzz targets), runs
# clang-tidy over the C++ files the last commit changed, fuzzes every
# target for a bounded time (BATON_FUZZ_SECONDS, default 10 each), then runs every test (all labels)
# (which also replays each fuzz target's seed corpus).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

echo "== format check"
git ls-files -- 'src/*.cc' 'src/*.h' 'bench/*.cc' 'fuzz/*.cc' | xargs -r clang-format --dry-run --Werror

echo "== build (dev: clang, ASan + UBSan, fuzz targets)"
# Through ccache (installed by install-deps.sh): a second run, or a clone elsewhere on the same
# machine, recompiles only what changed. Paths are hashed relative to the clone.
if command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
fi
cmake --preset dev >/dev/null
cmake --build --preset dev

echo "== clang-tidy (.clang-tidy) over the C++ sources the last commit changed"
# The whole tree takes about half an hour on 2 cores (run-clang-tidy -p build/dev); a commit's own
# files take a minute or two. BATON_TIDY_BASE=REV widens it to everything changed since REV.
tidy_base=${BATON_TIDY_BASE:-HEAD~1}
if git rev-parse -q --verify "$tidy_base^{commit}" >/dev/null; then
  mapfile -t tidy_files < <(git diff --name-only --diff-filter=AM "$tidy_base" -- \
    'src/*.cc' 'bench/*.cc' 'fuzz/*.cc')
  if ((${#tidy_files[@]})); then
    printf '%s\n' "${tidy_files[@]}" | xargs -r -n 4 -P 2 clang-tidy -p build/dev --quiet
  fi
else
  echo "no $tidy_base to compare with: skipped"
fi

echo "== fuzz (${BATON_FUZZ_SECONDS:-10} s per target)"
bash fuzz/run.sh "${BATON_FUZZ_SECONDS:-10}"

echo "== tests"
ctest --preset dev
