#!/usr/bin/env bash
# A Catch2 case that calls ZOO_SKIP (no GPU) must reach ctest as Skipped (exit 77, which every
# discovered case maps with SKIP_RETURN_CODE), a passing one as 0, and a failure never as 77.
# Usage: skip_signal.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
bin="$2/bin/test_kernels"
[[ -x "$bin" ]] || { echo "FAIL: no $bin" >&2; exit 1; }
status=0
expect() {  # expect RC NAME
  "$bin" "$2" >/dev/null 2>&1
  local rc=$?
  if [[ "$1" == nonzero-not-77 ]]; then
    ((rc != 0 && rc != 77)) || { echo "FAIL: '$2' exited $rc, want a failure code other than 77" >&2; status=1; }
  elif ((rc != $1)); then
    echo "FAIL: '$2' exited $rc, want $1" >&2
    status=1
  fi
}
expect 77 "skip signal: a skipped case"
expect 0 "skip signal: a passing case"
expect nonzero-not-77 "skip signal: a case that skips after a failed check"
expect nonzero-not-77 "skip signal: a skipped case,skip signal: a case that skips after a failed check"
# A run with a skipped and a passing case is a skip: something that should have run did not.
expect 77 "skip signal: a skipped case,skip signal: a passing case"
((status == 0)) && echo PASS
exit $status
