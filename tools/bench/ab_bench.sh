#!/usr/bin/env bash
# Before/after decode and prefill of two zoo builds on the same synthetic checkpoints, in one run
# on one GPU, interleaved (A B A B ...) so drift in clocks or temperature hits both alike.
#
#   tools/bench/ab_bench.sh ZOO_A ZOO_B OUTFILE [SHAPE ...]   (default: qwen3-0.6b qwen3-8b)
#
# Environment: SYNTH_DIR [/tmp/zoo-synth]  PROMPT_LENS [512,8192]  DECODE_CONTEXTS [512]
#   NEW_TOKENS [64]  REPEAT [3]  ROUNDS [2]  DEVICE [cuda]  MAX_CONTEXT [8448]
# OUTFILE gets one JSON line per (round, build, shape) with `zoo bench --json`'s result, and a
# summary table goes to stdout: the minimum over every repeat of every round (the least disturbed
# run of each build) and, beside it, the median over rounds of each run's median.
set -euo pipefail
if [[ $# -lt 3 ]]; then
  awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"
  exit 2
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
A=$1 B=$2 OUTFILE=$3
shift 3
SHAPES=("${@:-qwen3-0.6b}")
[[ $# -gt 0 ]] || SHAPES=(qwen3-0.6b qwen3-8b)
SYNTH_DIR=${SYNTH_DIR:-/tmp/zoo-synth}
ROUNDS=${ROUNDS:-2}
: > "$OUTFILE"
for shape in "${SHAPES[@]}"; do
  ckpt=$SYNTH_DIR/$shape
  [[ -f $ckpt/config.json ]] || "$B" synth --config "$ROOT/configs/shapes/$shape.json" --out "$ckpt" --seed 1 >&2
  yaml=$(mktemp --suffix .yaml)
  printf 'model:\n  checkpoint: %s\n  device: %s\n  max_context: %s\n' "$ckpt" "${DEVICE:-cuda}" "${MAX_CONTEXT:-8448}" > "$yaml"
  for round in $(seq 1 "$ROUNDS"); do
    for build in A B; do
      zoo=$A
      [[ $build == B ]] && zoo=$B
      result=$("$zoo" bench "$yaml" --prompt-len "${PROMPT_LENS:-512,8192}" --decode-context "${DECODE_CONTEXTS:-512}" \
        --new-tokens "${NEW_TOKENS:-64}" --repeat "${REPEAT:-3}" --json)
      printf '{"shape": "%s", "round": %d, "build": "%s", "result": %s}\n' "$shape" "$round" "$build" \
        "$(tr -d '\n' <<< "$result")" >> "$OUTFILE"
    done
  done
  rm -f "$yaml"
done
python3 - "$OUTFILE" << 'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
def metrics(result):
    # (median of the run's repeats, minimum of them) per metric
    out = {}
    for d in result.get("decode", []):
        spread = d.get("ms_per_token_spread", {})
        out[f"decode ms/token @ctx {d['context']}"] = (d["ms_per_token"], spread.get("min", d["ms_per_token"]))
    for p in result.get("prefill", []):
        spread = p.get("seconds_spread", {})
        out[f"prefill ms @{p['tokens']} tokens"] = (1e3 * p["seconds"], 1e3 * spread.get("min", p["seconds"]))
    return out
table = {}
for r in rows:
    for k, v in metrics(r["result"]).items():
        table.setdefault((r["shape"], k), {}).setdefault(r["build"], []).append(v)
print("| shape | metric | A min | B min | B/A min | A median | B median | B/A median |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
nan = (float("nan"), float("nan"))
for (shape, k), builds in sorted(table.items()):
    a_runs, b_runs = builds.get("A", [nan]), builds.get("B", [nan])
    a_min, b_min = min(v[1] for v in a_runs), min(v[1] for v in b_runs)
    a_med, b_med = statistics.median(v[0] for v in a_runs), statistics.median(v[0] for v in b_runs)
    print(f"| {shape} | {k} | {a_min:.3f} | {b_min:.3f} | {b_min / a_min:.3f} | {a_med:.3f} | {b_med:.3f} | {b_med / a_med:.3f} |")
PY
