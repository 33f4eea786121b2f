#!/usr/bin/env bash
# The `zoo` CLI on hostile input files (docs/safety.md, "Input files"): FIFOs and devices in every
# input position, absurd sizes in config.json and max_context, deep nesting. Each must end in exit
# 2 with one line naming the file or flag: never a hang (each run is under `timeout`), a signal or
# an out-of-memory death.
# Usage: cli_bad_input_files.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-cli-bad-files "$@"

# expect_error NAME PATTERN... -- ARGS...: exit 2 within 30 s, one stderr line holding every PATTERN.
expect_error() {
  CASE=$1
  shift
  local patterns=()
  while [[ $# -gt 0 && $1 != -- ]]; do
    patterns+=("$1")
    shift
  done
  shift
  cases=$((cases + 1))
  timeout -k 5 30 "$ZOO" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
  local rc=$?
  if ((rc == 124 || rc == 137)); then
    fail "hung (killed after 30 s): zoo $*"
    return
  fi
  if ((rc >= 128)); then
    fail "killed by signal $((rc - 128)): zoo $*"
    return
  fi
  ((rc == 2)) || fail "exit $rc, expected 2: zoo $*"$'\n'"$(head -c 2000 "$TMP/err")"
  local lines
  lines=$(grep -cv '^Run with --help' "$TMP/err")
  ((lines == 1)) || fail "stderr has $lines lines, expected 1:"$'\n'"$(head -c 2000 "$TMP/err")"
  local p
  for p in "${patterns[@]}"; do
    grep -qF -- "$p" "$TMP/err" || fail "stderr lacks '$p': $(head -c 2000 "$TMP/err")"
  done
}

QCFG=$SRC/configs/qwen3-tiny.yaml
REQ=$FIX/qwen3-tiny/request.json
GOLDEN=$FIX/qwen3-tiny/golden.safetensors
mkfifo "$TMP/fifo.yaml" "$TMP/fifo.json" "$TMP/fifo.safetensors"

# A FIFO or a device in each input position.
expect_error "plan on a FIFO YAML" "$TMP/fifo.yaml" "is a FIFO" -- plan "$TMP/fifo.yaml"
expect_error "plan on /dev/zero" "/dev/zero" "is a device" -- plan /dev/zero
expect_error "trace with a FIFO request" "$TMP/fifo.json" "is a FIFO" -- \
  trace -q "$QCFG" --request "$TMP/fifo.json" --out "$TMP/t.safetensors"
expect_error "trace with /dev/zero as request" "/dev/zero" "is a device" -- \
  trace -q "$QCFG" --request /dev/zero --out "$TMP/t.safetensors"
expect_error "generate with a FIFO request" "$TMP/fifo.json" "is a FIFO" -- \
  generate -q "$QCFG" --request "$TMP/fifo.json" --max-new-tokens 1
expect_error "compare a FIFO golden" "$TMP/fifo.safetensors" "is a FIFO" -- compare "$TMP/fifo.safetensors" "$GOLDEN"
expect_error "compare with FIFO gates" "$TMP/fifo.yaml" "is a FIFO" -- compare "$GOLDEN" "$GOLDEN" --gates "$TMP/fifo.yaml"
expect_error "compare with /dev/zero gates" "/dev/zero" "is a device" -- compare "$GOLDEN" "$GOLDEN" --gates /dev/zero
expect_error "inspect a FIFO" "$TMP/fifo.safetensors" "is a FIFO" -- inspect "$TMP/fifo.safetensors"
# In a checkpoint directory: config.json, the index, a shard.
mkdir -p "$TMP/fifo-config" "$TMP/fifo-shard"
cp "$FIX/qwen3-tiny/model.safetensors" "$TMP/fifo-config/"
mkfifo "$TMP/fifo-config/config.json"
printf 'model:\n  plugin: qwen3\n  checkpoint: fifo-config\n  device: cpu\n' >"$TMP/fifo-config.yaml"
expect_error "plan with a FIFO config.json" "config.json" "is a FIFO" -- plan "$TMP/fifo-config.yaml"
cp "$FIX/qwen3-tiny-sharded/"* "$TMP/fifo-shard/"
rm "$TMP/fifo-shard/model-00002-of-00003.safetensors"
mkfifo "$TMP/fifo-shard/model-00002-of-00003.safetensors"
expect_error "inspect with a FIFO shard" "model-00002-of-00003.safetensors" "is a FIFO" -- inspect "$TMP/fifo-shard"
# validate: the YAML's golden is a FIFO.
printf 'model:\n  checkpoint: %s\n  device: cpu\nvalidation:\n  request: %s\n  golden: fifo.safetensors\n' \
  "$FIX/qwen3-tiny" "$REQ" >"$TMP/fifo-golden.yaml"
expect_error "validate with a FIFO golden" "fifo.safetensors" "is a FIFO" -- validate -q "$TMP/fifo-golden.yaml"

# A FIFO named as a plugin: a problem listed by `zoo plugins` (exit 0), not a hang in the ELF check
# or in dlopen.
mkdir -p "$TMP/fifo-plugins"
mkfifo "$TMP/fifo-plugins/libzoo_fifo.so"
cases=$((cases + 1))
CASE="plugins with a FIFO .so"
timeout -k 5 30 "$ZOO" plugins --plugin-dir "$TMP/fifo-plugins/libzoo_fifo.so" >"$TMP/out" 2>"$TMP/err" </dev/null
rc=$?
if ((rc == 124 || rc == 137)); then
  fail "hung (killed after 30 s): zoo plugins --plugin-dir FIFO"
else
  ((rc == 0)) || fail "exit $rc, expected 0: $(head -c 2000 "$TMP/err")"
  grep -F "libzoo_fifo.so" "$TMP/out" | grep -qF "is a FIFO" ||
    fail "zoo plugins does not list the FIFO as a problem: $(head -c 2000 "$TMP/out")"
fi

# max_context that overflowed the KV-cache size (heap corruption, SIGABRT) is rejected by name.
expect_error "generate --max-context 2^59+1" "--max-context" "576460752303423489" -- \
  generate -q "$QCFG" --request "$REQ" --max-new-tokens 1 --max-context 576460752303423489
expect_error "generate --max-context -5" "--max-context" -- \
  generate -q "$QCFG" --request "$REQ" --max-new-tokens 1 --max-context=-5
printf 'model:\n  checkpoint: %s\n  device: cpu\n  max_context: 576460752303423489\n' "$FIX/qwen3-tiny" >"$TMP/ctx.yaml"
expect_error "YAML model.max_context 2^59+1" "ctx.yaml:4:" "model.max_context" -- \
  trace -q "$TMP/ctx.yaml" --request "$REQ" --out "$TMP/t.safetensors"

# config.json sizes: 2^62 heads (was SIGFPE), 1e9 layers (was 3 GB then out of memory).
edit_config() {  # NAME SED-EXPR: a copy of qwen3-tiny with config.json edited; prints its YAML
  mkdir -p "$TMP/$1"
  cp "$FIX/qwen3-tiny/"* "$TMP/$1/"
  sed -i "$2" "$TMP/$1/config.json"
  printf 'model:\n  checkpoint: %s\n  device: cpu\n' "$1" >"$TMP/$1.yaml"
  echo "$TMP/$1.yaml"
}
expect_error "config with 2^62 heads" "config.json" "num_attention_heads" "4611686018427387904" -- \
  generate -q "$(edit_config heads 's/"num_attention_heads": *[0-9]*/"num_attention_heads": 4611686018427387904/')" \
  --request "$REQ" --max-new-tokens 1
expect_error "config with 1e9 layers" "config.json" "num_hidden_layers" -- \
  plan "$(edit_config layers 's/"num_hidden_layers": *[0-9]*/"num_hidden_layers": 1000000000/')"
expect_error "config with rope_theta 1e-300" "config.json" "rope_theta" -- \
  plan "$(edit_config theta 's/"rope_theta": *[0-9.e+]*/"rope_theta": 1e-300/')"
expect_error "config with u64 max kv heads" "config.json" "18446744073709551615" -- \
  plan "$(edit_config kv 's/"num_key_value_heads": *[0-9]*/"num_key_value_heads": 18446744073709551615/')"
grep -q -- "-1" "$TMP/err" && fail "a u64 value was printed as -1: $(cat "$TMP/err")"

# Deep nesting in a request and a config.json.
{
  printf '{"input_ids": [1], "x": '
  head -c 200000 /dev/zero | tr '\0' '['
  head -c 200000 /dev/zero | tr '\0' ']'
  printf '}\n'
} >"$TMP/deep.json"
expect_error "trace with a 200k-deep request" "$TMP/deep.json" "nested more than" -- \
  trace -q "$QCFG" --request "$TMP/deep.json" --out "$TMP/t.safetensors"

# Positive control: the same commands work on ordinary files.
cases=$((cases + 1))
CASE="generate on the fixture"
timeout 60 "$ZOO" generate -q "$QCFG" --request "$REQ" --max-new-tokens 2 --max-context 64 >"$TMP/out" 2>"$TMP/err" ||
  fail "exit $?: $(cat "$TMP/err")"
[[ $(wc -w <"$TMP/out") == 2 ]] || fail "generate printed '$(cat "$TMP/out")', expected 2 ids"

echo "$cases cases, $failures failures"
((failures == 0))
