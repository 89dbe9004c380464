# Sourced by the benchmark scripts: the baton binary they run.
# bench_baton ROOT [BINARY]: BINARY when given, else the release build, else the dev build.
bench_baton() {
  if [[ -n ${2:-} ]]; then
    echo "$2"
  elif [[ -x $1/build/release/src/cli/baton ]]; then
    echo "$1/build/release/src/cli/baton"
  else
    echo "$1/build/dev/src/cli/baton"
  fi
}
