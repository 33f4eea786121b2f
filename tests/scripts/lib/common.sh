# Sourced by the CLI test scripts (ctest runs tests/scripts/*.sh with SOURCE_DIR BUILD_DIR):
#   source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" NAME "$@"
# Sets SRC, BUILD, ZOO, FIX (tests/fixtures), DATA (tests/data) and TMP (a fresh directory named
# after NAME, removed on exit); defines `fail`, `run` and the counters `failures` and `cases`.
SRC=$(cd "$2" && pwd)
BUILD=$(cd "$3" && pwd)
ZOO=$BUILD/bin/zoo
FIX=$SRC/tests/fixtures
DATA=$SRC/tests/data
[[ -x $ZOO ]] || { echo "no zoo binary at $ZOO"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failures=0
cases=0
CASE=

# fail MESSAGE: counts a failure, naming the current case (set by `run`) when there is one.
fail() {
  echo "FAIL${CASE:+ [$CASE]}: $*"
  failures=$((failures + 1))
}

# run NAME ARGS...: runs zoo ARGS, leaves $RC, $TMP/out, $TMP/err.
run() {
  CASE=$1
  shift
  cases=$((cases + 1))
  "$ZOO" "$@" >"$TMP/out" 2>"$TMP/err"
  RC=$?
}

# After `run`: has/lacks STREAM TEXT (STREAM: out or err) check the captured output for a fixed
# string; rc CODE checks the exit code. Each counts a failure naming the current case.
has() { grep -qF -- "$2" "$TMP/$1" || fail "$1 lacks '$2':"$'\n'"$(head -c 1500 "$TMP/$1")"; }
lacks() { grep -qF -- "$2" "$TMP/$1" && fail "$1 has '$2':"$'\n'"$(head -c 1500 "$TMP/$1")"; }
rc() { ((RC == $1)) || fail "exit $RC, expected $1: $(head -c 1500 "$TMP/err")"; }
