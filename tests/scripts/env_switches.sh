#!/usr/bin/env bash
# Every ZOO_* switch README lists is checked at startup, whatever the device and command: a junk
# value is exit 2 with one line naming the variable (under --json, an error of kind "input"), and
# an accepted value runs. CUDA-only switches were read only on CUDA, so on a CPU run a typo was
# silently the default.
# Usage: env_switches.sh SOURCE_DIR BUILD_DIR
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-env-switches "$@"

# name, a value it accepts
switches=(
  "ZOO_NUM_THREADS 2" "ZOO_CPU_ISA generic" "ZOO_CUDA_PROFILE 1" "ZOO_CODEC_PROFILE 0" "ZOO_TTS_HOST_SAMPLING 1"
  "ZOO_GEMV 8" "ZOO_GEMV_SILU 0" "ZOO_GEMM_ANCHOR_ROWS 16" "ZOO_DECODE_ATTN 64" "ZOO_PDL 0" "ZOO_MOE_CUBLAS 1" "ZOO_CUDA_PRE_HOPPER 1" "ZOO_PREFILL_ROWS 128"
  "ZOO_CUDNN 0" "ZOO_CUDNN_MIN_TOKENS 1" "ZOO_CUDNN_LOG 1"
)
for entry in "${switches[@]}"; do
  read -r name good <<<"$entry"
  for bad in junk 2.5 -1 1e300 18446744073709551616 "$(printf 'x%.0s' {1..200})"; do
    CASE="$name=${bad:0:20}"
    cases=$((cases + 1))
    env "$name=$bad" "$ZOO" plugins >"$TMP/out" 2>"$TMP/err"
    rc=$?
    # 0 and 1 are the flags' values; -1 is outside every range here, so every bad value is bad.
    [[ $rc -eq 2 ]] || { fail "exit $rc, expected 2: $(head -c 300 "$TMP/err")"; continue; }
    [[ $(wc -l <"$TMP/err") -eq 1 ]] || fail "not one line: $(head -c 500 "$TMP/err")"
    grep -q "^zoo: error: $name must be " "$TMP/err" || fail "does not name $name: $(cat "$TMP/err")"
    [[ $(wc -c <"$TMP/err") -lt 200 ]] || fail "the value is echoed whole: $(wc -c <"$TMP/err") bytes"
  done
  CASE="$name --json"
  env "$name=junk" "$ZOO" plugins --json >"$TMP/out" 2>"$TMP/err"
  rc=$?
  python3 - "$TMP/out" "$name" <<'PY' || fail "--json: exit $rc: $(head -c 300 "$TMP/out")"
import json, sys
err = json.load(open(sys.argv[1]))["error"]
assert err["kind"] == "input" and err["exit_code"] == 2 and err["message"].startswith(sys.argv[2]), err
PY
  CASE="$name=$good"
  env "$name=$good" "$ZOO" plugins >"$TMP/out" 2>"$TMP/err" || fail "exit $?: $(head -c 300 "$TMP/err")"
  CASE="$name="
  env "$name=" "$ZOO" plugins >"$TMP/out" 2>"$TMP/err" || fail "empty is the default, got exit $?: $(head -c 300 "$TMP/err")"
done
# --help needs no valid environment (it runs no command).
CASE="--help"
ZOO_GEMV=junk "$ZOO" --help >/dev/null 2>&1 || fail "--help with a bad switch: exit $?"

(( failures == 0 )) && echo "env_switches: $cases cases passed" || { echo "$failures failure(s)"; exit 1; }
