#!/usr/bin/env bash
# A symlink loop given where a file or directory is expected is reported as one ("symlink loop
# (too many levels of symbolic links)"), exit 2, never as "no such file" (which sends the user
# looking for a missing file) nor silently skipped (a --plugin-dir).
# Usage: symlink_loops.sh SOURCE_DIR BUILD_DIR
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-symlink-loops "$@"
ln -s loop "$TMP/loop"
want="$TMP/loop: symlink loop (too many levels of symbolic links)"
echo '"hi"' >"$TMP/in.jsonl"

expect_loop() {  # NAME ARGS...: exit 2, one line holding $want
  local name=$1
  shift
  run "$name" "$@"
  ((RC == 2)) || fail "exit $RC, expected 2: $(head -c 300 "$TMP/err")"
  [[ $(wc -l <"$TMP/err") -eq 1 ]] || fail "not one line: $(head -c 500 "$TMP/err")"
  grep -qF -- "$want" "$TMP/err" || fail "no '$want' in: $(cat "$TMP/err")"
}
expect_loop "tokenize MODEL" tokenize "$TMP/loop" --input "$TMP/in.jsonl"
expect_loop "validate --golden" validate "$SRC/configs/qwen3-tiny.yaml" --golden "$TMP/loop"
expect_loop "validate --request" validate "$SRC/configs/qwen3-tiny.yaml" --request "$TMP/loop"

# A model directory whose config.json is a loop: named as one (before: "a directory without
# config.json", which sends the user looking for a missing file).
mkdir "$TMP/model"
ln -s config.json "$TMP/model/config.json"
want="$TMP/model/config.json: symlink loop (too many levels of symbolic links)"
expect_loop "plan MODEL_DIR" plan "$TMP/model"
expect_loop "generate MODEL_DIR" generate "$TMP/model" --prompt hi -n 1
want="$TMP/loop: symlink loop (too many levels of symbolic links)"

# A plugin directory that is a loop is a problem `zoo plugins` lists (exit 0), not an absent one.
run "plugins --plugin-dir" plugins --plugin-dir "$TMP/loop"
((RC == 0)) || fail "exit $RC: $(head -c 300 "$TMP/err")"
grep -qF -- "$want" "$TMP/out" || fail "the loop is not listed as a problem: $(cat "$TMP/out")"

(( failures == 0 )) && echo "symlink_loops: $cases cases passed" || { echo "$failures failure(s)"; exit 1; }
