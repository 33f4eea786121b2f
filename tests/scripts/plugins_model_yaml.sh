#!/usr/bin/env bash
# `zoo plugins MODEL.yaml`: lists what the YAML's plugins.paths load (FROM plugins.paths) beside the
# built-in plugins (FROM built-in), in the table and in --json; a bad YAML is exit 2 naming the file.
# Usage: plugins_model_yaml.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
zoo=$build/bin/zoo
test_plugins=$build/lib/zoo/test-plugins
[[ -x $zoo ]] || { echo "no zoo binary at $zoo"; exit 1; }
[[ -f $test_plugins/libzoo_test_echo.so ]] || { echo "no test plugins in $test_plugins"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zoo-plugins-yaml.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# A YAML whose plugins.paths names the echo plugin's file (relative to the YAML) and a missing dir.
mkdir -p "$tmp/model"
ln -s "$test_plugins/libzoo_test_echo.so" "$tmp/libzoo_test_echo.so"
cat >"$tmp/model.yaml" <<YAML
model:
  plugin: echo
  checkpoint: $src/tests/fixtures/qwen3-tiny
plugins:
  paths: [libzoo_test_echo.so, no-such-dir]
YAML

out=$(cd / && env -u ZOO_PLUGIN_PATH "$zoo" plugins "$tmp/model.yaml") || fail "zoo plugins MODEL exited with $?"
echo "$out"
head -n1 <<<"$out" | grep -qE '^NAME +VERSION +MODEL TYPES +PATH +FROM$' || fail "no FROM column: $(head -n1 <<<"$out")"
row=$(grep -E '^echo[[:space:]]' <<<"$out") || fail "the YAML's plugin (echo) is not listed"
grep -qE 'libzoo_test_echo\.so +plugins\.paths$' <<<"$row" || fail "echo is not marked as from plugins.paths: $row"
row=$(grep -E '^qwen3[[:space:]]' <<<"$out") || fail "the built-in qwen3 plugin is not listed"
grep -qE ' built-in$' <<<"$row" || fail "qwen3 is not marked built-in: $row"

# Without the YAML the echo plugin is not found: it came from plugins.paths alone.
out=$(cd / && env -u ZOO_PLUGIN_PATH "$zoo" plugins) || fail "zoo plugins exited with $?"
if grep -qE '^echo[[:space:]]' <<<"$out"; then fail "echo listed without the YAML"; fi

# --plugin-dir and ZOO_PLUGIN_PATH are marked as such; --json carries the origin.
out=$(cd / && ZOO_PLUGIN_PATH="$test_plugins" "$zoo" plugins) || fail "zoo plugins exited with $?"
grep -E '^echo[[:space:]]' <<<"$out" | grep -qE ' ZOO_PLUGIN_PATH$' || fail "echo not marked ZOO_PLUGIN_PATH: $out"
json=$(cd / && env -u ZOO_PLUGIN_PATH "$zoo" plugins --json --plugin-dir "$test_plugins" "$tmp/model.yaml") ||
  fail "zoo plugins --json MODEL exited with $?"
python3 - "$json" <<'PY' || fail "--json origins wrong: $json"
import json, sys
plugins = {p["name"]: p["origin"] for p in json.loads(sys.argv[1])["plugins"]}
# --plugin-dir is searched before plugins.paths, so it finds echo first.
assert plugins["echo"] == "--plugin-dir", plugins
assert plugins["qwen3"] == "built-in", plugins
PY

# A bad YAML: exit 2, one line naming the file.
printf 'model:\n  checkpoint: [\n' >"$tmp/bad.yaml"
set +e
"$zoo" plugins "$tmp/bad.yaml" >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
((rc == 2)) || fail "bad YAML: exit $rc, expected 2: $(cat "$tmp/err")"
grep -qF "$tmp/bad.yaml" "$tmp/err" || fail "bad YAML: the error does not name the file: $(cat "$tmp/err")"
[[ $(wc -l <"$tmp/err") -eq 1 ]] || fail "bad YAML: stderr is not one line: $(cat "$tmp/err")"
set +e
"$zoo" plugins "$tmp/missing.yaml" >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
((rc == 2)) || fail "missing YAML: exit $rc, expected 2"
grep -qF "$tmp/missing.yaml" "$tmp/err" || fail "missing YAML: the error does not name the file: $(cat "$tmp/err")"
echo PASS
