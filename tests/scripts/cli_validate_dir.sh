#!/usr/bin/env bash
# `zoo validate` of a model directory with --request, --golden and --gates (a gates file, or a model
# YAML's validation.gates); on a YAML the flags replace the section's fields; missing pieces are one
# line naming them.
# Usage: cli_validate_dir.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-cli-validate-dir "$@"
Q=$SRC/configs/qwen3-tiny.yaml
QDIR=$FIX/qwen3-tiny
REQ=$QDIR/request.json


# --- zoo validate DIR ---------------------------------------------------------------------------
run "validate DIR with the YAML's files" validate "$QDIR" --request "$REQ" --golden "$QDIR/golden.safetensors" \
  --gates "$Q"
rc 0
has out "VALIDATION PASSED"
# A gates file holding the `gates:` mapping alone.
printf 'gates:\n  semantic:\n    - {tensor: logits, cosine: 0.99999, argmax: exact}\n    - {tensor: "layer.*.output", cosine: 0.9998}\n' \
  >"$TMP/gates.yaml"
# groups GROUP...: the last --json report passed, its gates in exactly these groups.
groups() {
  python3 - "$TMP/out" "$@" <<'PY' || fail "gate groups: $(head -c 1500 "$TMP/out")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["passed"] and sorted({g["group"] for g in r["gates"]}) == sorted(sys.argv[2:]), r["gates"]
PY
}
run "validate DIR with a gates file" validate "$QDIR" --request "$REQ" --golden "$QDIR/golden.safetensors" \
  --gates "$TMP/gates.yaml" --json
rc 0
groups semantic
run "validate DIR with the YAML's groups" validate "$QDIR" --request "$REQ" --golden "$QDIR/golden.safetensors" \
  --gates "$Q" --json
groups semantic strict
run "validate DIR against another model's golden" validate "$QDIR" --request "$REQ" \
  --golden "$FIX/qwen3-tiny-f32-untied/golden.safetensors" --gates "$TMP/gates.yaml"
rc 1
has out "VALIDATION FAILED"
run "validate DIR without --gates" validate "$QDIR" --request "$REQ" --golden "$QDIR/golden.safetensors"
rc 2
has err "give --gates FILE"
run "validate DIR alone" validate "$QDIR"
rc 2
has err "give --request FILE, --golden FILE and --gates FILE"
[[ $(wc -l <"$TMP/err") == 1 ]] || fail "more than one line: $(cat "$TMP/err")"
run "validate --golden missing" validate "$QDIR" --request "$REQ" --golden "$TMP/none.safetensors" --gates "$Q"
rc 2
has err "$TMP/none.safetensors: no such file (--golden)"
# On a YAML the flags replace its fields: its own golden passes, another model's fails.
run "validate YAML --golden override" validate "$Q" --golden "$FIX/qwen3-tiny-f32-untied/golden.safetensors"
rc 1
run "validate YAML --gates override" validate "$Q" --gates "$TMP/gates.yaml" --json
rc 0
groups semantic

echo "$cases cases, $failures failures"
((failures == 0))
