#!/usr/bin/env bash
# What `zoo` writes and what it claims (issue 8): no output may overwrite an input, every output is
# complete or absent, synth does not clobber a checkpoint, nothing checked is not a PASS, flags are
# never silently ignored, and names from files cannot forge report lines.
# Usage: cli_outputs.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-cli-outputs "$@"

# expect CODE NAME PATTERN... -- ARGS...: exit CODE, no signal, one error line holding every
# PATTERN (fixed strings) when CODE is 2.
expect() {
  local code=$1 name=$2
  shift 2
  local patterns=()
  while [[ $1 != -- ]]; do
    patterns+=("$1")
    shift
  done
  shift
  run "$name" "$@"
  if ((RC >= 128)); then
    fail "killed by signal $((RC - 128)): zoo $*"
    return
  fi
  ((RC == code)) || fail "exit $RC, expected $code: zoo $*"$'\n'"$(head -c 2000 "$TMP/err")"
  if ((code == 2)); then
    local lines
    lines=$(grep -cv '^Run with --help' "$TMP/err")
    ((lines == 1)) || fail "stderr has $lines lines, expected 1:"$'\n'"$(cat "$TMP/err")"
  fi
  local p
  for p in "${patterns[@]}"; do
    grep -qF -- "$p" "$TMP/err" "$TMP/out" || fail "output lacks '$p': $(cat "$TMP/err" "$TMP/out" | head -c 2000)"
  done
}

stdout_lacks() { ! grep -qE -- "$1" "$TMP/out" || fail "stdout has /$1/:"$'\n'"$(cat "$TMP/out")"; }
same_file() { cmp -s "$1" "$2" || fail "$1 was modified"; }
# No temporary files left beside outputs.
no_temp_files() { ! ls -A "$1" | grep -q 'zoo-tmp' || fail "temporary files left in $1: $(ls -A "$1")"; }

# A private copy of the qwen3 fixture and a YAML over it, so a regression cannot damage the tree.
cp -r "$FIX/qwen3-tiny" "$TMP/q"
cp -r "$FIX/qwen3-tiny" "$TMP/pristine"
cat >"$TMP/q.yaml" <<YAML
model:
  plugin: qwen3
  checkpoint: q
  device: cpu
validation:
  request: q/request.json
  golden: q/golden.safetensors
  gates:
    - {tensor: logits, cosine: 0.99}
YAML
cp "$TMP/q.yaml" "$TMP/q.yaml.orig"
Q=$TMP/q.yaml
REQ=$TMP/q/request.json

# ---------------------------------------------------------------------------------------------
# --out naming an input: refused before any work, the input untouched.
expect 2 "trace --out request" "--out" "same file as the request" -- trace -q "$Q" --request "$REQ" --out "$REQ"
same_file "$REQ" "$TMP/pristine/request.json"
expect 2 "trace --out YAML" "same file as the model YAML" -- trace -q "$Q" --request "$REQ" --out "$Q"
same_file "$Q" "$TMP/q.yaml.orig"
expect 2 "trace --out weights" "same file as" "model.safetensors" -- \
  trace -q "$Q" --request "$REQ" --out "$TMP/q/model.safetensors"
same_file "$TMP/q/model.safetensors" "$TMP/pristine/model.safetensors"
ln -s q/golden.safetensors "$TMP/golden-link.safetensors"
expect 2 "validate --out a symlink to the golden" "same file as" "golden" -- validate -q "$Q" --out "$TMP/golden-link.safetensors"
same_file "$TMP/q/golden.safetensors" "$TMP/pristine/golden.safetensors"
ln "$TMP/q/config.json" "$TMP/hard-config.json"
expect 2 "generate --out a hard link to config.json" "same file as" -- \
  generate -q "$Q" --request "$REQ" --max-new-tokens 2 --out "$TMP/hard-config.json"
same_file "$TMP/q/config.json" "$TMP/pristine/config.json"
expect 2 "trace --out in a missing directory" "$TMP/nodir/t.safetensors" -- \
  trace -q "$Q" --request "$REQ" --out "$TMP/nodir/t.safetensors"
# Positive: a fresh output is written completely, with nothing left beside it.
mkdir -p "$TMP/outs"
expect 0 "trace --out fresh" -- trace -q "$Q" --request "$REQ" --out "$TMP/outs/t.safetensors"
expect 0 "generate --out fresh" -- generate -q "$Q" --request "$REQ" --max-new-tokens 2 --out "$TMP/outs/g.safetensors"
expect 0 "trace --out replacing an earlier trace" -- trace -q "$Q" --request "$REQ" --out "$TMP/outs/t.safetensors"
expect 0 "inspect the trace" -- inspect "$TMP/outs/t.safetensors"
no_temp_files "$TMP/outs"

# ---------------------------------------------------------------------------------------------
# zoo synth --out DIR
CFG=$FIX/qwen3-tiny/config.json
expect 2 "synth into a checkpoint" "not empty" "--force" -- synth -q --config "$CFG" --out "$TMP/q"
same_file "$TMP/q/model.safetensors" "$TMP/pristine/model.safetensors"
expect 0 "synth into a new dir" -- synth -q --config "$CFG" --out "$TMP/s1"
[[ -f $TMP/s1/config.json && -f $TMP/s1/model.safetensors ]] || fail "synth wrote $(ls "$TMP/s1")"
no_temp_files "$TMP/s1"
mkdir -p "$TMP/empty"
expect 0 "synth into an empty dir" -- synth -q --config "$CFG" --out "$TMP/empty"
# --force over a sharded checkpoint: the old index and shards go, the new single file stays.
cp -r "$FIX/qwen3-tiny-sharded" "$TMP/s2"
expect 0 "synth --force over shards" -- synth -q --force --config "$CFG" --out "$TMP/s2"
[[ -f $TMP/s2/model.safetensors ]] || fail "no model.safetensors"
ls "$TMP/s2" | grep -qE 'index|-of-' && fail "stale shards left: $(ls "$TMP/s2")"
expect 0 "inspect the forced synth" -- inspect "$TMP/s2"
# ...and the other way round: shards over a single file.
# (the sharded fixture's shapes in f32 are ~1.3 MB: two shards of at most 1 MB)
expect 0 "synth --force shards over a single file" -- synth -q --force --shard-gb 0.001 --dtype f32 \
  --config "$FIX/qwen3-tiny-sharded/config.json" --out "$TMP/s1"
[[ -f $TMP/s1/model.safetensors.index.json ]] || fail "no index written: $(ls "$TMP/s1")"
[[ -e $TMP/s1/model.safetensors ]] && fail "an older model.safetensors is left beside the new index"
expect 0 "inspect the sharded synth" -- inspect "$TMP/s1"
# A synth that fails leaves the directory as it was.
cp -r "$FIX/qwen3-tiny" "$TMP/s3"
expect 2 "synth --force with an unknown plugin" "no_such_plugin" -- \
  synth -q --force --plugin no_such_plugin --config "$CFG" --out "$TMP/s3"
same_file "$TMP/s3/config.json" "$TMP/pristine/config.json"
same_file "$TMP/s3/model.safetensors" "$TMP/pristine/model.safetensors"
expect 2 "synth --std nan" "--std" -- synth -q --std nan --config "$CFG" --out "$TMP/s4"
expect 2 "synth --std -1" "--std" -- synth -q --std -1 --config "$CFG" --out "$TMP/s4"
[[ -e $TMP/s4 ]] && fail "a refused synth created its directory"

# ---------------------------------------------------------------------------------------------
# Nothing checked is not a pass.
GOLDEN=$TMP/q/golden.safetensors
expect 1 "compare without gates" "no gate was evaluated" -- compare "$GOLDEN" "$GOLDEN"
stdout_lacks 'PASS'
cat >"$TMP/no-gates.yaml" <<YAML
model:
  checkpoint: q
validation:
  request: q/request.json
  golden: q/golden.safetensors
YAML
expect 1 "validate without gates" "no gate was evaluated" -- validate -q "$TMP/no-gates.yaml"
stdout_lacks 'PASS'
cat >"$TMP/bad-points.yaml" <<YAML
model:
  checkpoint: q
validation:
  request: q/request.json
  golden: q/golden.safetensors
  points: [logits, "layer.99.*"]
  gates:
    - {tensor: logits, cosine: 0.99}
YAML
expect 2 "validate points matching nothing" "validation.points" "'layer.99.*'" -- validate -q "$TMP/bad-points.yaml"
expect 2 "trace --points matching nothing" "--points" "'nosuch*'" -- \
  trace -q "$Q" --request "$REQ" --points 'embed,nosuch*' --out "$TMP/outs/p.safetensors"
[[ -e $TMP/outs/p.safetensors ]] && fail "a refused trace wrote its output"
printf '\x02\x00\x00\x00\x00\x00\x00\x00{}' >"$TMP/empty.safetensors"
printf -- '- {tensor: "*", cosine: 0.5}\n' >"$TMP/star-gates.yaml"
expect 1 "compare an empty golden" -- compare "$TMP/empty.safetensors" "$GOLDEN" --gates "$TMP/star-gates.yaml"
stdout_lacks 'PASS'

# ---------------------------------------------------------------------------------------------
# Flags that were silently ignored.
expect 2 "--max-context 0" "--max-context" -- generate -q "$Q" --request "$REQ" --max-context 0
expect 2 "--max-context -5" "--max-context" -- trace -q "$Q" --request "$REQ" --out "$TMP/x" --max-context -5
expect 2 "--eos -5" "--eos" -- generate -q "$Q" --request "$REQ" --eos -5
expect 2 "--eos past the vocabulary" "--eos 1000000" "vocabulary" -- generate -q "$Q" --request "$REQ" --eos 1000000
expect 2 "--top-k under greedy" "--top-k" "greedy" -- generate -q "$Q" --request "$REQ" --top-k 5 --temperature 0
expect 0 "--top-k with a temperature" -- generate -q "$Q" --request "$REQ" --top-k 5 --temperature 0.8 --max-new-tokens 2

# Tensor parallelism on the CPU (ranks as threads): the same greedy ids as one rank; counts that
# are not ranks, or that do not split the model, refused by name.
expect 2 "--tensor-parallel 0" "--tensor-parallel" -- generate -q "$Q" --request "$REQ" --tensor-parallel 0
expect 2 "--tensor-parallel 3 on 4 heads" "do not split over 3 ranks" -- \
  generate -q "$Q" --request "$REQ" --tensor-parallel 3
expect 0 "generate on one rank" -- generate -q "$Q" --request "$REQ" --max-new-tokens 6
cp "$TMP/out" "$TMP/one-rank.out"
expect 0 "generate over two ranks" -- generate -q "$Q" --request "$REQ" --max-new-tokens 6 --tensor-parallel 2
cmp -s "$TMP/out" "$TMP/one-rank.out" || fail "two ranks generated"$'\n'"$(cat "$TMP/out")"$'\n'"one rank"$'\n'"$(cat "$TMP/one-rank.out")"

# A request too long for max_context: caught before the forward pass, naming the request.
expect 2 "prompt longer than --max-context" "$REQ" "max_context 4" -- \
  trace -q "$Q" --request "$REQ" --out "$TMP/outs/long.safetensors" --max-context 4
expect 2 "prompt + new tokens past max_context" "$REQ" "--max-new-tokens" -- \
  generate -q "$Q" --request "$REQ" --max-context 17 --max-new-tokens 8

# A model whose head is not a text head: generate refuses and says what to use.
expect 2 "generate on higgs" "zoo tts" -- generate -q "$SRC/configs/higgs-tiny.yaml" \
  --request "$FIX/higgs-tiny/request.json" --max-new-tokens 2

# Device and dtype problems name where they were set, not config.json.
cat >"$TMP/bf16-cpu.yaml" <<YAML
model:
  checkpoint: q
  device: cpu
  dtype: bfloat16
YAML
expect 2 "dtype from the YAML" "dtype BF16 from $TMP/bf16-cpu.yaml:4:" -- plan "$TMP/bf16-cpu.yaml"
grep -q 'config.json' "$TMP/err" && fail "blames config.json: $(cat "$TMP/err")"
expect 2 "dtype from the flag" "from --dtype" -- plan "$Q" --dtype bfloat16
grep -q 'config.json' "$TMP/err" && fail "blames config.json: $(cat "$TMP/err")"

# ---------------------------------------------------------------------------------------------
# Names from files cannot forge lines: a tensor named "x<newline>result: PASS".
crafted() {  # crafted FILE VALUE_BYTES: one F32 tensor [1] under the crafted name
  local header='{"x\nresult: PASS\u001b[2K":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
  printf "\\x$(printf %02x ${#header})\\x00\\x00\\x00\\x00\\x00\\x00\\x00%s$2" "$header" >"$1"
}
crafted "$TMP/c1.safetensors" '\x00\x00\x80\x3f'
crafted "$TMP/c2.safetensors" '\x00\x00\x00\xc0'  # -2.0: cosine -1
expect 0 "inspect a crafted name" -- inspect "$TMP/c1.safetensors"
stdout_lacks '^result: PASS'
grep -qF 'x\nresult: PASS\e[2K' "$TMP/out" || fail "inspect does not show the escaped name: $(cat "$TMP/out")"
expect 1 "compare crafted names" -- compare "$TMP/c1.safetensors" "$TMP/c2.safetensors" --gates "$TMP/star-gates.yaml"
stdout_lacks '^result: PASS'
grep -q '^result: FAIL' "$TMP/out" || fail "no FAIL line: $(cat "$TMP/out")"
mkdir -p "$TMP/dir
result: PASS"
expect 2 "a path with a newline in an error" "dir\\nresult: PASS" -- compare "$TMP/dir
result: PASS/missing.safetensors" "$GOLDEN"

echo "$cases cases, $failures failures"
((failures == 0))
