#!/usr/bin/env bash
# The `zoo` CLI on bad input: exit 2 (1 for failed checks), never a signal, and ONE line on stderr
# naming the file and what is wrong (usage errors may add a "Run with --help" line). Also a few
# positive checks of the same commands, so a CLI that fails everything cannot pass.
# Usage: cli_bad_input.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-cli-bad-input "$@"

# expect_error CODE NAME PATTERN... -- ARGS...: the command exits CODE (no signal), stderr is one
# line (plus an optional "Run with --help" line) holding every PATTERN (fixed strings; a pattern
# starting with ~ is an extended regex).
expect_error() {
  local code=$1 name=$2
  shift 2
  local patterns=()
  while [[ $# -gt 0 && $1 != -- ]]; do
    patterns+=("$1")
    shift
  done
  shift
  run "$name" "$@"
  if ((RC >= 128)); then
    fail "killed by signal $((RC - 128)) (exit $RC): zoo $*"
    return
  fi
  ((RC == code)) || fail "exit $RC, expected $code: zoo $*"
  local lines
  lines=$(grep -cv '^Run with --help' "$TMP/err")
  ((lines == 1)) || fail "stderr has $lines lines besides the --help hint, expected 1:"$'\n'"$(cat "$TMP/err")"
  head -n1 "$TMP/err" | grep -q '^zoo: ' || fail "stderr does not start with 'zoo: ': $(head -n1 "$TMP/err")"
  local p
  for p in "${patterns[@]}"; do
    if [[ $p == ~* ]]; then
      grep -qE -- "${p:1}" "$TMP/err" || fail "stderr lacks /${p:1}/: $(cat "$TMP/err")"
    else
      grep -qF -- "$p" "$TMP/err" || fail "stderr lacks '$p': $(cat "$TMP/err")"
    fi
  done
}

# expect_ok NAME ARGS...: exit 0.
expect_code() {
  local code=$1 name=$2
  shift 2
  run "$name" "$@"
  if ((RC >= 128)); then
    fail "killed by signal $((RC - 128)): zoo $*"
  elif ((RC != code)); then
    fail "exit $RC, expected $code: zoo $*"$'\n'"$(head -c 2000 "$TMP/err")"
  fi
}

# stdout_has PATTERN: fixed string in the last command's stdout.
stdout_has() {
  grep -qF -- "$1" "$TMP/out" || fail "stdout lacks '$1'"
}

# A model YAML over a copy of a fixture, written next to it: yaml_for NAME CHECKPOINT_DIR [PLUGIN]
yaml_for() {
  local file=$TMP/$1.yaml
  {
    echo "model:"
    [[ -n ${3:-} ]] && echo "  plugin: $3"
    echo "  checkpoint: $2"
    echo "  device: cpu"
  } >"$file"
  echo "$file"
}

# ---------------------------------------------------------------------------------------------
# Usage errors
expect_error 2 "no arguments" "subcommand" --
expect_error 2 "unknown subcommand" "frobnicate" -- frobnicate
expect_error 2 "unknown option" "--frobnicate" -- inspect "$FIX/qwen3-tiny" --frobnicate
expect_error 2 "missing positional" "path" -- inspect
expect_error 2 "missing --request" "--request" -- trace "$SRC/configs/qwen3-tiny.yaml" --out "$TMP/t.safetensors"
expect_error 2 "missing --out" "--out" -- trace "$SRC/configs/qwen3-tiny.yaml" --request "$FIX/qwen3-tiny/request.json"
expect_error 2 "generate --max-new-tokens 0" "--max-new-tokens" -- \
  generate "$SRC/configs/qwen3-tiny.yaml" --request "$FIX/qwen3-tiny/request.json" --max-new-tokens 0
expect_error 2 "generate --max-new-tokens abc" "--max-new-tokens" -- \
  generate "$SRC/configs/qwen3-tiny.yaml" --request "$FIX/qwen3-tiny/request.json" --max-new-tokens abc
expect_error 2 "bad --device" "gpu7" -- plan "$SRC/configs/qwen3-tiny.yaml" --device gpu7

# ---------------------------------------------------------------------------------------------
# zoo inspect
expect_error 2 "inspect missing path" "$TMP/nowhere" -- inspect "$TMP/nowhere"
mkdir -p "$TMP/empty-dir"
expect_error 2 "inspect dir without safetensors" "$TMP/empty-dir" -- inspect "$TMP/empty-dir"
head -c 100 "$FIX/qwen3-tiny/model.safetensors" >"$TMP/truncated-header.safetensors"
expect_error 2 "inspect truncated header" "$TMP/truncated-header.safetensors" -- inspect "$TMP/truncated-header.safetensors"
size=$(stat -c %s "$FIX/qwen3-tiny/model.safetensors")
head -c $((size / 2)) "$FIX/qwen3-tiny/model.safetensors" >"$TMP/truncated-data.safetensors"
expect_error 2 "inspect truncated data" "$TMP/truncated-data.safetensors" -- inspect "$TMP/truncated-data.safetensors"
printf 'hello, I am not a checkpoint\n' >"$TMP/text.safetensors"
expect_error 2 "inspect text file" "$TMP/text.safetensors" -- inspect "$TMP/text.safetensors"
expect_error 2 "inspect a README" "$FIX/README.md" -- inspect "$FIX/README.md"
: >"$TMP/zero.safetensors"
expect_error 2 "inspect empty file" "$TMP/zero.safetensors" -- inspect "$TMP/zero.safetensors"
# An index naming a shard that is not there.
mkdir -p "$TMP/lost-shard"
cp "$FIX/qwen3-tiny-sharded/model.safetensors.index.json" "$FIX/qwen3-tiny-sharded/config.json" \
  "$FIX/qwen3-tiny-sharded/model-00001-of-00003.safetensors" "$FIX/qwen3-tiny-sharded/model-00002-of-00003.safetensors" \
  "$TMP/lost-shard/"
expect_error 2 "inspect index with a missing shard" "model-00003-of-00003.safetensors" -- inspect "$TMP/lost-shard"

# Positive: the sharded fixture lists every tensor its index names.
expect_code 0 "inspect sharded fixture" inspect "$FIX/qwen3-tiny-sharded"
index_names=$(sed -n 's/^ *"\([^"]*\)": "model-[0-9]*-of-[0-9]*\.safetensors",\{0,1\}$/\1/p' \
  "$FIX/qwen3-tiny-sharded/model.safetensors.index.json")
count=0
for name in $index_names; do
  count=$((count + 1))
  grep -qE "(^|[[:space:]])${name//./\\.}([[:space:]]|$)" "$TMP/out" || fail "inspect does not list '$name'"
done
((count >= 20)) || fail "read only $count names from the index (parser broken?)"
grep -qF "lm_head.weight" <<<"$index_names" || fail "the index lost its stray lm_head.weight?"

# ---------------------------------------------------------------------------------------------
# zoo plan: model YAML problems name file:line:col
cat >"$TMP/unknown-key.yaml" <<EOF
model:
  plugin: qwen3
  checkpoint: $FIX/qwen3-tiny
  devcie: cpu
EOF
expect_error 2 "plan YAML unknown key" "~unknown-key\.yaml:4:[0-9]+" "devcie" -- plan "$TMP/unknown-key.yaml"
cat >"$TMP/wrong-type.yaml" <<EOF
model:
  plugin: qwen3
  checkpoint: $FIX/qwen3-tiny
  max_context: plenty
EOF
expect_error 2 "plan YAML wrong type" "~wrong-type\.yaml:4:[0-9]+" "max_context" -- plan "$TMP/wrong-type.yaml"
cat >"$TMP/list-not-map.yaml" <<EOF
model: [qwen3, $FIX/qwen3-tiny]
EOF
expect_error 2 "plan YAML model is a list" "~list-not-map\.yaml:1:[0-9]+" -- plan "$TMP/list-not-map.yaml"
cat >"$TMP/no-checkpoint-dir.yaml" <<EOF
model:
  plugin: qwen3
  checkpoint: does/not/exist
EOF
expect_error 2 "plan YAML missing checkpoint dir" "~no-checkpoint-dir\.yaml:3:[0-9]+" "does/not/exist" -- \
  plan "$TMP/no-checkpoint-dir.yaml"
cat >"$TMP/no-checkpoint-key.yaml" <<EOF
model:
  plugin: qwen3
EOF
expect_error 2 "plan YAML without checkpoint" "no-checkpoint-key.yaml" "checkpoint" -- plan "$TMP/no-checkpoint-key.yaml"
printf 'model:\n  plugin: [qwen3\n  checkpoint: {\n' >"$TMP/malformed.yaml"
expect_error 2 "plan malformed YAML" "~malformed\.yaml:[0-9]+:[0-9]+" -- plan "$TMP/malformed.yaml"
expect_error 2 "plan missing YAML" "$TMP/none.yaml" -- plan "$TMP/none.yaml"
cat >"$TMP/unknown-plugin.yaml" <<EOF
model:
  plugin: no_such_plugin
  checkpoint: $FIX/qwen3-tiny
EOF
expect_error 2 "plan unknown plugin" "no_such_plugin" "qwen3" -- plan "$TMP/unknown-plugin.yaml"

# Positive: the Higgs plan shows the alias of the final norm.
expect_code 0 "plan higgs-tiny" plan "$SRC/configs/higgs-tiny.yaml"
grep -qE 'model\.norm\.weight +<- +body\.norm\.weight' "$TMP/out" || fail "plan does not show 'model.norm.weight <- body.norm.weight'"

# ---------------------------------------------------------------------------------------------
# config.json problems (a copy of the fixture, edited)
cp -r "$FIX/qwen3-tiny" "$TMP/no-hidden"
sed -i '/"hidden_size"/d' "$TMP/no-hidden/config.json"
expect_error 2 "config.json missing hidden_size" "hidden_size" "$TMP/no-hidden/config.json" -- \
  plan "$(yaml_for no-hidden "$TMP/no-hidden" qwen3)"
cp -r "$FIX/qwen3-tiny" "$TMP/dynamic"
sed -i 's/"rope_scaling": null/"rope_scaling": {"rope_type": "dynamic", "factor": 4.0}/' "$TMP/dynamic/config.json"
grep -q dynamic "$TMP/dynamic/config.json" || fail "could not edit rope_scaling into the config"
expect_error 2 "config.json unsupported rope_type" "rope_type" "dynamic" "$TMP/dynamic/config.json" -- \
  plan "$(yaml_for dynamic "$TMP/dynamic")"
cp -r "$FIX/qwen3-tiny" "$TMP/bad-json"
printf '{"model_type": "qwen3",\n' >"$TMP/bad-json/config.json"
expect_error 2 "config.json not JSON" "$TMP/bad-json/config.json" -- plan "$(yaml_for bad-json "$TMP/bad-json" qwen3)"
cp -r "$FIX/qwen3-tiny" "$TMP/no-config"
rm "$TMP/no-config/config.json"
expect_error 2 "config.json missing" "config.json" -- plan "$(yaml_for no-config "$TMP/no-config" qwen3)"
cp -r "$FIX/qwen3-tiny" "$TMP/unknown-type"
sed -i 's/"model_type": "qwen3"/"model_type": "llama9"/; s/Qwen3ForCausalLM/Llama9ForCausalLM/' "$TMP/unknown-type/config.json"
expect_error 2 "config.json unknown model_type" "llama9" "$TMP/unknown-type/config.json" -- \
  plan "$(yaml_for unknown-type "$TMP/unknown-type")"

# ---------------------------------------------------------------------------------------------
# zoo trace: request problems name the request file
QCFG=$SRC/configs/qwen3-tiny.yaml
trace_bad() {  # trace_bad NAME JSON PATTERN...
  local name=$1 json=$2
  shift 2
  local file=$TMP/request-${name//[^a-zA-Z0-9]/-}.json
  printf '%s\n' "$json" >"$file"
  expect_error 2 "trace request: $name" "$file" "$@" -- trace -q "$QCFG" --request "$file" --out "$TMP/trace.safetensors"
}
trace_bad "not JSON" 'input_ids: [1, 2]'
trace_bad "not an object" '[1, 2, 3]'
trace_bad "no input_ids" '{"ids": [1, 2, 3]}' "input_ids"
trace_bad "string id" '{"input_ids": [1, "2", 3]}' "input_ids"
trace_bad "float id" '{"input_ids": [1, 2.5]}' "input_ids"
trace_bad "id >= vocab" '{"input_ids": [1, 384]}' "384" "vocab"
trace_bad "huge id" '{"input_ids": [1, 99999999999]}' "99999999999"
trace_bad "negative id" '{"input_ids": [-1, 2]}' "-1"
trace_bad "empty input_ids" '{"input_ids": []}' "input_ids"
trace_bad "unknown field" '{"input_ids": [1, 2], "audio_codes": [[1, 2, 3, 4]]}' "audio_codes"
expect_error 2 "trace missing request" "$TMP/absent.json" -- trace -q "$QCFG" --request "$TMP/absent.json" --out "$TMP/t.safetensors"
[[ ! -e $TMP/trace.safetensors ]] || fail "a failed trace left $TMP/trace.safetensors behind"

# ---------------------------------------------------------------------------------------------
# zoo compare
GOLDEN=$FIX/qwen3-tiny/golden.safetensors
expect_error 2 "compare missing golden" "$TMP/missing.safetensors" -- compare "$TMP/missing.safetensors" "$GOLDEN"
expect_error 2 "compare missing actual" "$TMP/missing.safetensors" -- compare "$GOLDEN" "$TMP/missing.safetensors"
expect_error 2 "compare text file" "$TMP/text.safetensors" -- compare "$GOLDEN" "$TMP/text.safetensors"
expect_error 2 "compare gates unknown key" "~gates-unknown-key\.yaml:[0-9]+:[0-9]+" "cosin" -- \
  compare "$GOLDEN" "$GOLDEN" --gates "$DATA/gates-unknown-key.yaml"
expect_error 2 "compare gates wrong type" "~gates-wrong-type\.yaml:[0-9]+:[0-9]+" -- \
  compare "$GOLDEN" "$GOLDEN" --gates "$DATA/gates-wrong-type.yaml"
expect_error 2 "compare missing gates file" "$TMP/gates.yaml" -- compare "$GOLDEN" "$GOLDEN" --gates "$TMP/gates.yaml"

# Positive: a golden against itself passes its gates; without gates nothing is checked (exit 1).
expect_code 1 "compare golden golden without gates" compare "$GOLDEN" "$GOLDEN"
expect_code 0 "compare golden golden with gates" compare "$GOLDEN" "$GOLDEN" --gates "$DATA/gates-qwen3-drift.yaml"
# A trace of a perturbed request (last id changed) fails the gates, and the report names the
# first tensor in forward order that fails: embed (the changed token's embedding row).
sed 's/\(.*\), *\([0-9]*\)\]/\1, 0]/' "$FIX/qwen3-tiny/request.json" >"$TMP/perturbed.json"
cmp -s "$TMP/perturbed.json" "$FIX/qwen3-tiny/request.json" && fail "could not perturb the request"
expect_code 0 "trace perturbed request" trace -q "$QCFG" --request "$TMP/perturbed.json" --out "$TMP/perturbed.safetensors"
expect_code 1 "compare perturbed trace" compare "$GOLDEN" "$TMP/perturbed.safetensors" --gates "$DATA/gates-qwen3-drift.yaml"
grep -qiE 'first fail[a-z ]*: *embed\b' "$TMP/out" || fail "report does not name embed as the first failing tensor:"$'\n'"$(cat "$TMP/out")"
grep -qE '(FAIL|fail).*logits' "$TMP/out" || fail "report does not list the logits gate failure"
# The qwen3-tiny model traced against another fixture's golden: shapes differ, exit 1.
expect_code 0 "trace qwen3-tiny points" trace -q "$QCFG" --request "$FIX/qwen3-tiny/request.json" \
  --points 'embed,logits' --out "$TMP/points.safetensors"
expect_code 1 "compare against another fixture's golden" compare "$FIX/qwen3-tiny-sharded/golden.safetensors" \
  "$TMP/points.safetensors" --gates "$DATA/gates-qwen3-drift.yaml"
grep -q 'embed' "$TMP/out" || fail "report does not name embed"

# ---------------------------------------------------------------------------------------------
# zoo validate / generate
cat >"$TMP/no-validation.yaml" <<EOF
model:
  plugin: qwen3
  checkpoint: $FIX/qwen3-tiny
EOF
expect_error 2 "validate without validation section" "no-validation.yaml" "validation" -- validate -q "$TMP/no-validation.yaml"
expect_code 0 "validate qwen3-tiny" validate -q "$SRC/configs/qwen3-tiny.yaml"
expect_code 0 "validate higgs-tiny" validate -q "$SRC/configs/higgs-tiny.yaml"
expect_code 0 "generate 3 tokens" generate -q "$QCFG" --request "$FIX/qwen3-tiny/request.json" --max-new-tokens 3
[[ $(wc -w <"$TMP/out") == 3 ]] || fail "generate printed '$(cat "$TMP/out")', expected 3 ids"

# ---------------------------------------------------------------------------------------------
# Plugin directories with junk in them
mkdir -p "$TMP/junk-plugins"
printf 'not a shared object\n' >"$TMP/junk-plugins/x.so"
expect_code 0 "plugins with a text x.so" plugins --plugin-dir "$TMP/junk-plugins/x.so"
grep -qF "$TMP/junk-plugins/x.so" "$TMP/out" || fail "zoo plugins does not list x.so as a problem:"$'\n'"$(cat "$TMP/out")"
stdout_has "qwen3"
expect_code 0 "plugins with a dir holding a text x.so" plugins --plugin-dir "$TMP/junk-plugins"
grep -qF "$TMP/junk-plugins/x.so" "$TMP/out" || fail "zoo plugins does not list x.so as a problem"
mkdir -p "$TMP/broken-plugins"
# A real plugin cut short: an ELF header whose segments run past the end of the file.
head -c 6000 "$BUILD/lib/zoo/plugins/libzoo_qwen3.so" >"$TMP/broken-plugins/libzoo_truncated.so"
printf 'junk\n' >"$TMP/broken-plugins/libzoo_text.so"
expect_code 0 "plugins with broken .so files" plugins --plugin-dir "$TMP/broken-plugins"
grep -qF "libzoo_truncated.so" "$TMP/out" || fail "zoo plugins does not list the truncated plugin"
grep -qF "libzoo_text.so" "$TMP/out" || fail "zoo plugins does not list the text plugin"
# Broken plugins do not stop a model served by a good one...
expect_code 0 "plan with a dir of broken plugins" plan "$QCFG" --plugin-dir "$TMP/broken-plugins"
stdout_has "model.embed_tokens.weight"
# ...and when nothing serves the model, the error says plugins failed to load.
expect_error 2 "plan unknown plugin with broken plugins" "no_such_plugin" "failed to load" -- \
  plan "$TMP/unknown-plugin.yaml" --plugin-dir "$TMP/broken-plugins"

# Hostile input, round 3 (issue 49): each was an internal or a JSON library message.
# A tensor listed twice in --extra-tensors: the writer's internal "duplicate tensor" error before.
printf '{"tensors": [{"name": "extra.a", "shape": [2]}, {"name": "extra.b", "shape": [2]}, {"name": "extra.a", "shape": [3]}]}\n' \
  >"$TMP/dup-extra.json"
expect_error 2 "synth --extra-tensors listed twice" "$TMP/dup-extra.json: tensors[2]: tensor 'extra.a' is listed twice (first at tensors[0])" -- \
  synth --config "$FIX/qwen3-tiny/config.json" --extra-tensors "$TMP/dup-extra.json" --out "$TMP/dup-extra-out" -q
[[ -e $TMP/dup-extra-out ]] && fail "synth made its output directory for a bad --extra-tensors"
# A string dropout in tokenizer.json: nlohmann's "[json.exception.type_error.302] type must be number".
mkdir -p "$TMP/dropout"
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
d['model']['dropout'] = '0.1'
json.dump(d, open(sys.argv[2], 'w'))" "$FIX/qwen3-tiny-text/tokenizer.json" "$TMP/dropout/tokenizer.json"
echo '"hi"' >"$TMP/hi.jsonl"
expect_error 2 "tokenizer.json string dropout" "$TMP/dropout/tokenizer.json: model.dropout is a string, not a number" -- \
  tokenize "$TMP/dropout" --input "$TMP/hi.jsonl"
lacks err "json.exception"

echo "$cases cases, $failures failures"
((failures == 0))
