#!/usr/bin/env bash
# Batch-1 decode of real-size shapes against the weight-streaming floor: synthesizes each shape's
# random bf16 checkpoint (zoo synth), runs `zoo bench --json` on CUDA, deletes the checkpoint (the
# GPU host's disk holds one 9B shape at a time) and prints ms/token, the weight bytes a step reads
# over the step time, and that as a share of the copy bandwidth (COPY_GBS, default the H200's
# measured 4270 GB/s read+write; docs/performance.md).
#
#   tools/bench/family_decode.sh ZOO OUTFILE [SHAPE ...]   (default: gemma-2-9b olmo-2-7b mistral-7b)
#
# Environment: SYNTH_DIR [/tmp/zoo-synth]  CONTEXT [512]  NEW_TOKENS [64]  REPEAT [3]  COPY_GBS [4270]
set -euo pipefail
if [[ $# -lt 2 ]]; then
  awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"
  exit 2
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ZOO=$1 OUTFILE=$2
shift 2
SHAPES=("$@")
[[ $# -gt 0 ]] || SHAPES=(gemma-2-9b olmo-2-7b mistral-7b)
SYNTH_DIR=${SYNTH_DIR:-/tmp/zoo-synth}
: > "$OUTFILE"
for shape in "${SHAPES[@]}"; do
  ckpt=$SYNTH_DIR/$shape
  rm -rf "$ckpt"
  "$ZOO" synth --config "$ROOT/configs/shapes/$shape.json" --out "$ckpt" --seed 1 >&2
  yaml=$(mktemp --suffix .yaml)
  printf 'model:\n  checkpoint: %s\n  device: cuda\n  max_context: 2048\n' "$ckpt" > "$yaml"
  result=$("$ZOO" bench "$yaml" --prompt-len "${CONTEXT:-512}" --new-tokens "${NEW_TOKENS:-64}" \
    --repeat "${REPEAT:-3}" --json)
  printf '{"shape": "%s", "result": %s}\n' "$shape" "$(tr -d '\n' <<< "$result")" >> "$OUTFILE"
  rm -rf "$ckpt" "$yaml"
done
python3 - "$OUTFILE" "${COPY_GBS:-4270}" <<'PY'
import json, sys
copy = float(sys.argv[2])
print(f"{'shape':<12} {'ms/token':>9} {'weights GB/s':>13} {'of copy bw':>10} {'floor ms':>9}")
for line in open(sys.argv[1]):
    row = json.loads(line)
    d = row["result"]["decode"][0]
    bytes_ = row["result"]["weight_bytes_read_per_token"]["bytes"]
    print(f"{row['shape']:<12} {d['ms_per_token']:>9.3f} {d['weight_gb_per_s']:>13.0f} "
          f"{d['weight_gb_per_s'] / copy:>9.0%} {bytes_ / copy / 1e6:>9.3f}")
PY
