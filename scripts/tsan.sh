#!/usr/bin/env bash
# A bounded ThreadSanitizer run of the server's tests (the HTTP server and its connection guard,
# the API, the scheduling controller): builds them with the tsan preset and runs each under a
# time limit, failing on any report not judged benign in scripts/tsan.supp. Not part of the test
# command (the TSan build adds about ten minutes on 2 cores); run it after changing threads or
# locks in src/server.
set -euo pipefail
cd "$(dirname "$0")/.."
tests=(server_http_unit_test server_test server_controller_test)
cmake --preset tsan >/dev/null
cmake --build --preset tsan --target "${tests[@]}"
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 suppressions=$PWD/scripts/tsan.supp"
status=0
for t in "${tests[@]}"; do
  echo "== $t"
  if ! timeout "${BATON_TSAN_SECONDS:-600}" "build/tsan/src/server/$t" --gtest_brief=1; then
    echo "$t: failed or reported a race (exit above)"
    status=1
  fi
done
exit $status
