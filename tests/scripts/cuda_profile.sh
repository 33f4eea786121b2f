#!/usr/bin/env bash
# ZOO_CUDA_PROFILE=1 gives the per-op picture of CUDA steps: for the decode steps (1 token) every op
# kind of the layer chain, the head and the device pick is listed with its device time, and the
# shares add up to 100%. The hd64 fixture: the CUDA backend takes head_dim 64, 96, 128 or 256.
# Skipped (77) where no CUDA device is usable or the build has no CUDA.
# Usage: cuda_profile.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-cuda-profile "$@"

ZOO_CUDA_PROFILE=1 "$ZOO" bench "$FIX/qwen3-tiny-hd64" --device cuda --prompt-len 8 --decode-context 8 \
  --new-tokens 4 --repeat 1 >"$TMP/out" 2>"$TMP/err"
rc=$?
if grep -qE "no CUDA device is usable|has no CUDA backend" "$TMP/err"; then
  echo "cuda_profile: skipped: no CUDA device or a build without CUDA"
  exit 77
fi
[[ $rc == 0 ]] || { echo "FAIL: zoo bench exited $rc: $(cat "$TMP/err")"; exit 1; }

# The first block of 1-token steps (each session prints its own when it ends): its header line,
# then its op lines up to the next header.
awk '/^ZOO_CUDA_PROFILE: steps of 1 token/ && !seen {on = 1; seen = 1; print; next} /^ZOO_CUDA_PROFILE:/ {on = 0} on' \
  "$TMP/err" >"$TMP/decode"
grep -q "steps of 1 token(s): [1-9][0-9]* steps" "$TMP/decode" || fail "no decode steps in the profile: $(cat "$TMP/err")"
for op in "norm" "gemm qkv" "qk norm+rope" "attention decode" "gemm o" "add+norm" "gemm down" "gemm head" "sample"; do
  grep -qE "^  ${op//+/\\+} +[0-9.]+ us/step" "$TMP/decode" || fail "op '$op' missing from the decode profile"
done
# gate|up: fused with SiLU at m = 1, or the two kernels.
grep -qE "^  gemm gate_up(\+act)? +[0-9.]+ us/step" "$TMP/decode" || fail "no gate|up GEMM in the decode profile"
total=$(awk '/us\/step/ {gsub("%", "", $NF); s += $NF} END {printf "%.0f", s}' "$TMP/decode")
[[ $total == 100 ]] || fail "the decode op shares add up to $total%, not 100%"

[[ $failures == 0 ]] || { cat "$TMP/decode"; exit 1; }
echo "cuda_profile: the decode profile lists every op kind and its shares add up"
