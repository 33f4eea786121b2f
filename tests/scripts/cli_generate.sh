#!/usr/bin/env bash
# `zoo generate` and friends on a Hugging Face model directory: the directory is a model like a
# YAML (same ids), eos ids come from generation_config.json / config.json (--eos overrides,
# --ignore-eos disables) and sampling defaults from generation_config.json (flags override).
# Usage: cli_generate.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-cli-generate "$@"
REQ=$FIX/qwen3-tiny/request.json

# model DIR [generation_config.json text] [config.json jq-free edit: EOS id]: a copy of the tiny
# Qwen3 fixture as a bare model directory.
model() {
  mkdir -p "$1"
  cp "$FIX/qwen3-tiny/config.json" "$FIX/qwen3-tiny/model.safetensors" "$1/"
  [[ -n ${2:-} ]] && printf '%s\n' "$2" >"$1/generation_config.json"
  [[ -n ${3:-} ]] && sed -i "s/\"eos_token_id\": null/\"eos_token_id\": $3/" "$1/config.json"
  return 0
}
# gen ARGS...: the generated ids on one line (stderr in $TMP/err); fails the test on a non-zero exit.
gen() {
  local out
  out=$("$ZOO" generate "$@" --request "$REQ" 2>"$TMP/err") || fail "zoo generate $* exited $?: $(cat "$TMP/err")"
  echo $out
}

model "$TMP/plain"
# The directory and the YAML are the same model.
yaml_ids=$(gen -q "$SRC/configs/qwen3-tiny.yaml" --max-new-tokens 8)
dir_ids=$(gen -q "$TMP/plain" --max-new-tokens 8)
[[ -n $dir_ids && $dir_ids == "$yaml_ids" ]] || fail "directory gave '$dir_ids', the YAML '$yaml_ids'"
read -r -a ids <<<"$dir_ids"
((${#ids[@]} == 8)) || fail "expected 8 ids, got '${dir_ids}'"
"$ZOO" plan "$TMP/plain" --dtype float32 --max-context 64 --device cpu >"$TMP/out" 2>&1 || fail "zoo plan DIR --dtype: $(cat "$TMP/out")"
"$ZOO" plan "$TMP" >"$TMP/out" 2>"$TMP/err"
[[ $? == 2 ]] && grep -qF "without config.json" "$TMP/err" || fail "plan on a non-model directory: $(cat "$TMP/err")"

# An eos id: the first id, from the third on, that did not occur before it.
k=2
while ((k < 8)); do
  seen=0
  for ((j = 0; j < k; j++)); do [[ ${ids[j]} == "${ids[k]}" ]] && seen=1; done
  ((seen == 0)) && break
  k=$((k + 1))
done
((k < 8)) || { echo "SKIP: greedy ids repeat ($dir_ids)"; exit 1; }
eos=${ids[k]}
want="${ids[*]:0:k+1}"

model "$TMP/genconf" "{\"eos_token_id\": [383, $eos], \"do_sample\": false}"
got=$(gen "$TMP/genconf" --max-new-tokens 8)
[[ $got == "$want" ]] || fail "generation_config.json eos $eos: got '$got', want '$want'"
grep -qF "generation_config.json" "$TMP/err" || fail "stderr does not say where eos came from: $(cat "$TMP/err")"
got=$(gen -q "$TMP/genconf" --max-new-tokens 8 --ignore-eos)
[[ $got == "$dir_ids" ]] || fail "--ignore-eos: got '$got', want '$dir_ids'"
got=$(gen -q "$TMP/genconf" --max-new-tokens 8 --eos "${ids[0]}")
[[ $got == "${ids[0]}" ]] || fail "--eos ${ids[0]}: got '$got'"

model "$TMP/cfgeos" "" "$eos"
got=$(gen -q "$TMP/cfgeos" --max-new-tokens 8)
[[ $got == "$want" ]] || fail "config.json eos $eos: got '$got', want '$want'"

# Sampling defaults: the file's values equal the same values given as flags; flags override.
model "$TMP/sampling" '{"do_sample": true, "temperature": 0.9, "top_k": 40, "top_p": 0.9}'
from_file=$(gen -q "$TMP/sampling" --max-new-tokens 8 --seed 5)
from_flags=$(gen -q "$TMP/plain" --max-new-tokens 8 --seed 5 --temperature 0.9 --top-k 40 --top-p 0.9)
[[ $from_file == "$from_flags" ]] || fail "generation_config.json sampling '$from_file' != flags '$from_flags'"
[[ $from_file != "$dir_ids" ]] || fail "sampling at temperature 0.9 gave the greedy ids '$from_file'"
got=$(gen -q "$TMP/sampling" --max-new-tokens 8 --seed 5 --temperature 0)
[[ $got == "$dir_ids" ]] || fail "--temperature 0 over a sampling default: got '$got', want greedy '$dir_ids'"

model "$TMP/badconf" '{"eos_token_id": "x"}'
"$ZOO" generate "$TMP/badconf" --request "$REQ" >"$TMP/out" 2>"$TMP/err"
[[ $? == 2 ]] && grep -qF "$TMP/badconf/generation_config.json: eos_token_id" "$TMP/err" ||
  fail "bad generation_config.json: $(cat "$TMP/err")"

echo "$failures failures"
((failures == 0))
