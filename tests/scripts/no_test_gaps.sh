#!/usr/bin/env bash
# Every Catch2 case is one ctest entry of its own: a case name holding ';' (a CMake list separator)
# or '[' (a Catch tag) once folded 40 cases into entries that selected nothing and said Passed.
# Lists each test binary's cases and requires an entry of ctest's named after each (entries added
# by hand beside them, such as qwen3/isa-generic, are fine).
# Usage: no_test_gaps.sh SOURCE_DIR BUILD_DIR
set -u
export LC_ALL=C  # one collation for sort and comm
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-no-test-gaps "$@"
entries=$(ctest --test-dir "$BUILD" -N 2>/dev/null | sed -n 's/^ *Test *#[0-9]*: //p')
[[ -n $entries ]] || fail "ctest -N in $BUILD lists no tests"
binaries=0
for bin in "$BUILD"/bin/test_*; do
  [[ -x $bin ]] || continue
  dir=${bin##*/test_}
  binaries=$((binaries + 1))
  names=$("$bin" --list-test-names-only 2>/dev/null | sed '/^$/d') || { fail "$bin --list-test-names-only"; continue; }
  bad=$(grep -E '[][;]' <<<"$names")
  [[ -z $bad ]] || fail "test_$dir: case names with ';', '[' or ']' (ctest cannot select them): $bad"
  want=$(sed "s|^|$dir/|" <<<"$names" | sort)
  have=$(grep "^$dir/" <<<"$entries" | sort)
  missing=$(comm -23 <(echo "$want") <(echo "$have"))
  [[ -z $missing ]] || fail "test_$dir: cases without a ctest entry of their own:"$'\n'"$(head -20 <<<"$missing")"
done
((binaries > 0)) || fail "no test binaries in $BUILD/bin"
echo "$binaries binaries checked, $failures failures"
((failures == 0))
