#!/usr/bin/env bash
# Runs every command block the docs mark runnable, so that a command a page tells people to type
# keeps working. The convention (docs/README.md): a fenced block whose info string is `sh runnable`
# (or `bash runnable`) is run as one bash script under `set -eo pipefail`, with the built `baton`
# first on PATH, from a fresh temp dir that holds a link to the repository's data/ (so a command
# written from the repository root works) and, when the repository sits beside a ../shared
# checkout, ../shared too. A block marked `sh runnable needs-shared` is skipped, saying so, where
# ../shared is absent. A block fails on a non-zero exit or after BATON_DOC_BLOCK_TIMEOUT seconds
# (default 120); the failure names the file and the line of the block's opening fence.
# Usage: run_doc_blocks.sh BATON_BINARY SOURCE_DIR
set -uo pipefail
baton=$(realpath "$1")
src=$(realpath "$2")
limit=${BATON_DOC_BLOCK_TIMEOUT:-120}
shared="$src/../shared"

[[ -x $baton ]] || { echo "FAIL: no baton binary at $1"; exit 1; }
bindir=$(mktemp -d -t baton-docs-bin.XXXXXX)
ln -s "$baton" "$bindir/baton"
trap 'rm -rf "$bindir"' EXIT

files=("$src/README.md")
while IFS= read -r f; do files+=("$f"); done < <(find "$src/docs" -name '*.md' | sort)

passes=0 failures=0 skips=0
for file in "${files[@]}"; do
  rel=${file#"$src"/}
  # One record per runnable block: "LINE<TAB>FLAGS", a newline, its lines, then a \036.
  # Fences of other blocks are tracked so that their contents are never taken for an opener.
  blocks=$(awk '
    in_block && /^```[ \t]*$/ { in_block = 0; printf "%s\036", body; next }
    in_block { body = body $0 "\n"; next }
    in_other { if ($0 ~ /^```[ \t]*$/) in_other = 0; next }
    /^```(sh|bash)[ \t]+runnable([ \t]|$)/ {
      in_block = 1; flags = $0; sub(/^```(sh|bash)[ \t]+runnable[ \t]*/, "", flags)
      body = NR "\t" flags "\n"; next
    }
    /^```/ { in_other = 1 }
    END { if (in_block) exit 1 }
  ' "$file") || {
    echo "FAIL $rel: a runnable block is not closed"; failures=$((failures + 1)); continue
  }
  [[ -z $blocks ]] && continue
  while IFS= read -r -d $'\036' block; do
    header=${block%%$'\n'*}
    line=${header%%$'\t'*}
    flags=${header#*$'\t'}
    script=${block#*$'\n'}
    if [[ " $flags " == *" needs-shared "* && ! -d $shared/data ]]; then
      echo "skip $rel:$line (needs ../shared/data, absent)"
      skips=$((skips + 1))
      continue
    fi
    dir=$(mktemp -d -t baton-docs.XXXXXX)
    mkdir "$dir/work"
    ln -s "$src/data" "$dir/work/data"
    [[ -d $shared ]] && ln -s "$(realpath "$shared")" "$dir/shared"
    started=$SECONDS
    out=$(cd "$dir/work" && PATH="$bindir:$PATH" BATON_SOURCE_DIR="$src" \
      timeout --kill-after=5 "$limit" bash -c "set -eo pipefail
$script" 2>&1)
    rc=$?
    if [[ $rc -eq 0 ]]; then
      echo "ok   $rel:$line ($((SECONDS - started)) s)"
      passes=$((passes + 1))
    else
      why="exit $rc"
      [[ $rc -eq 124 || $rc -eq 137 ]] && why="timed out after $limit s"
      echo "FAIL $rel:$line: the block's commands failed ($why); its last output:"
      if [[ -n $out ]]; then tail -n 15 <<<"$out" | sed 's/^/    /'; else echo "    (no output)"; fi
      failures=$((failures + 1))
    fi
    rm -rf "$dir"
  done <<<"$blocks"
done

echo "$passes passed, $failures failed, $skips skipped"
# No block found means the convention broke (a renamed info string), not that all is well.
if [[ $((passes + failures + skips)) -eq 0 ]]; then
  echo "FAIL: no runnable block found in README.md or docs/"
  exit 1
fi
[[ $failures -eq 0 ]]
