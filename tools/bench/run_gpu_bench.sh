#!/usr/bin/env bash
# Zoo vs transformers on random weights at real model shapes, on the GPU host: synthesize each
# checkpoint with `zoo synth`, run `zoo bench` and bench_transformers.py on it from a warm page
# cache, then transformers again compiled (StaticCache + torch.compile reduce-overhead, decode only),
# measure the roofline once, and write a side-by-side markdown report.
#
#   tools/bench/run_gpu_bench.sh OUTDIR [SHAPE ...]    (default: qwen3-0.6b qwen3-4b qwen3-8b)
#
# SHAPE names SHAPES_DIR/SHAPE.json (configs/shapes). OUTDIR gets three files (few enough for a
# $OUT that returns at most 8): bench.log (timestamped, with every step's stderr), performance.md
# and results.json (every raw result in one bundle: `side_by_side.py --bundle` renders it again).
# Raw per-step JSON and YAMLs live in WORK_DIR, checkpoints in SYNTH_DIR, so one shape per call
# accumulates: each call's performance.md covers every shape benchmarked so far on this host.
# A failing step is logged and the run moves on; the exit status is 1 if any step failed.
#
# Environment (defaults in brackets):
#   ZOO [build-gpu/bin/zoo]  PYTHON [python3]  DEVICE [cuda] (cpu: a CPU dry run)
#   HF_DTYPE [bfloat16 on cuda; float32 on cpu, Zoo's default compute dtype there]
#   SYNTH_DIR [/tmp/zoo-synth]  WORK_DIR [/tmp/zoo-bench]  SHAPES_DIR [configs/shapes]
#   PROMPT_LENS [512,2048,8192]  DECODE_CONTEXTS [512,4096]  NEW_TOKENS [64]  REPEAT [3]
#   MAX_CONTEXT [8448]  STEP_TIMEOUT [300: seconds per step]
#   TIME_BUDGET [540: seconds after which no new shape starts; 0: no limit]
#   ROOFLINE [auto: measure unless WORK_DIR has it; 1: always; 0: never]  ROOFLINE_ARGS []
#   KEEP_SYNTH [1: keep checkpoints, deleting older ones only when the disk is short;
#               0: delete each after its shape]
#   COMPILED [1: also run the compiled transformers baseline; 0: skip it]
#   EAGER [1: run the eager transformers baseline; 0: skip it (a compiled-only call where the
#          eager numbers exist from an earlier run in WORK_DIR)]
#   COMPILED_ARGS [] extra bench_transformers.py arguments for it (--no-compile: CPU dry runs)
#   COMPILED_TIMEOUT [480: seconds for that step; torch.compile of a large body takes minutes]
set -uo pipefail

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }
if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  usage
  exit 2
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUTDIR=$1
shift
SHAPES=()
for arg in "${@:-qwen3-0.6b qwen3-4b qwen3-8b}"; do  # "a b", "a,b" and a b all work
  for s in ${arg//,/ }; do SHAPES+=("$s"); done
done

ZOO=${ZOO:-$ROOT/build-gpu/bin/zoo}
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
if [[ $DEVICE == cpu ]]; then HF_DTYPE=${HF_DTYPE:-float32}; else HF_DTYPE=${HF_DTYPE:-bfloat16}; fi
SYNTH_DIR=${SYNTH_DIR:-/tmp/zoo-synth}
WORK_DIR=${WORK_DIR:-/tmp/zoo-bench}
SHAPES_DIR=${SHAPES_DIR:-$ROOT/configs/shapes}
PROMPT_LENS=${PROMPT_LENS:-512,2048,8192}
DECODE_CONTEXTS=${DECODE_CONTEXTS:-512,4096}
NEW_TOKENS=${NEW_TOKENS:-64}
REPEAT=${REPEAT:-3}
MAX_CONTEXT=${MAX_CONTEXT:-8448}
STEP_TIMEOUT=${STEP_TIMEOUT:-300}
TIME_BUDGET=${TIME_BUDGET:-540}
ROOFLINE=${ROOFLINE:-auto}
ROOFLINE_ARGS=${ROOFLINE_ARGS:-}
KEEP_SYNTH=${KEEP_SYNTH:-1}
COMPILED=${COMPILED:-1}
EAGER=${EAGER:-1}
COMPILED_ARGS=${COMPILED_ARGS:-}
COMPILED_TIMEOUT=${COMPILED_TIMEOUT:-480}
BENCH_PY=$ROOT/tools/bench/bench_transformers.py
SIDE_PY=$ROOT/tools/bench/side_by_side.py
CANONICAL=(qwen3-0.6b qwen3-1.7b qwen3-4b qwen3-8b higgs-v3-4b)

if ! mkdir -p "$OUTDIR" "$WORK_DIR" "$SYNTH_DIR"; then
  echo "run_gpu_bench: cannot create $OUTDIR, $WORK_DIR or $SYNTH_DIR" >&2
  exit 2
fi
OUTDIR=$(cd "$OUTDIR" && pwd)
LOG=$OUTDIR/bench.log
FAILED=()
ATTEMPTED=()
SECONDS=0

log() {
  local line
  line="[$(date '+%Y-%m-%d %H:%M:%S') +${SECONDS}s] $*"
  echo "$line" >> "$LOG"
  echo "$line" >&2
}

TIMEOUT=()
if command -v timeout > /dev/null; then TIMEOUT=(timeout -k 15 "$STEP_TIMEOUT"); fi

# step LABEL OUTFILE CMD...: runs CMD under the step timeout with stderr into the log. Its stdout
# goes to OUTFILE (kept as OUTFILE.failed when the step fails), or into the log when OUTFILE is "-".
step() {
  local label=$1 out=$2 rc t0=$SECONDS
  shift 2
  log "begin $label: $*"
  if [[ $out == - ]]; then
    ${TIMEOUT[@]+"${TIMEOUT[@]}"} "$@" >> "$LOG" 2>&1
    rc=$?
  else
    rm -f "$out" "$out.failed"
    ${TIMEOUT[@]+"${TIMEOUT[@]}"} "$@" > "$out.tmp" 2>> "$LOG"
    rc=$?
    if [[ $rc -eq 0 ]]; then mv -f "$out.tmp" "$out"; else mv -f "$out.tmp" "$out.failed"; fi
  fi
  if [[ $rc -eq 0 ]]; then
    log "ok $label ($((SECONDS - t0)) s)"
  else
    local why=""
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
      why=" (timed out after ${TIMEOUT[3]:-$STEP_TIMEOUT} s?)"
    elif [[ $rc -gt 128 ]]; then
      why=" (killed by signal $((rc - 128)))"
    fi
    log "FAILED $label: exit $rc$why ($((SECONDS - t0)) s)"
    FAILED+=("$label")
  fi
  return $rc
}

# Bytes of a bf16 checkpoint at a shape (empty if it cannot be told: make_room then does nothing).
checkpoint_bytes() { "$PYTHON" "$SIDE_PY" --checkpoint-bytes "$1" 2>> "$LOG"; }

free_bytes() { df -PB1 "$SYNTH_DIR" 2> /dev/null | awk 'NR == 2 { print $4 }'; }

# Deletes other synthetic checkpoints while the disk lacks room for this one (+ 2 GB).
make_room() {
  local shape=$1 need=$2 free dir
  free=$(free_bytes)
  [[ -z $free || -z $need ]] && return 0
  for dir in "$SYNTH_DIR"/*/; do
    (( free >= need + 2000000000 )) && break
    dir=${dir%/}
    [[ -d $dir && $(basename "$dir") != "$shape" ]] || continue
    log "disk: $((free / 1000000000)) GB free, $((need / 1000000000)) GB needed: deleting $dir"
    rm -rf "$dir"
    free=$(free_bytes)
  done
  (( free >= need )) || log "warning: $((free / 1000000000)) GB free for a $((need / 1000000000)) GB checkpoint"
}

warm_page_cache() { cat "$1"/*.safetensors > /dev/null 2>> "$LOG" || log "warning: could not read all of $1"; }

# performance.md and results.json over this run's shapes and every other shape with a result in
# WORK_DIR (the canonical ones first), so a failed step shows as a gap rather than a missing page.
report() {
  local shapes=() s f
  for s in "${CANONICAL[@]}"; do
    [[ -f $WORK_DIR/zoo-$s.json || -f $WORK_DIR/hf-$s.json || -f $WORK_DIR/hfc-$s.json ||
      " ${ATTEMPTED[*]-} " == *" $s "* ]] && shapes+=("$s")
  done
  for f in ${ATTEMPTED[@]+"${ATTEMPTED[@]}"} "$WORK_DIR"/zoo-*.json "$WORK_DIR"/hf-*.json "$WORK_DIR"/hfc-*.json; do
    if [[ $f == */* ]]; then
      [[ -f $f ]] || continue
      s=$(basename "$f" .json)
      s=${s#zoo-}
      s=${s#hf-}
      s=${s#hfc-}
    else
      s=$f
    fi
    [[ " ${shapes[*]-} " == *" $s "* ]] || shapes+=("$s")
  done
  if [[ ${#shapes[@]} -eq 0 ]]; then
    log "report: no results yet"
    return 0
  fi
  if "$PYTHON" "$SIDE_PY" --results "$WORK_DIR" --shapes "${shapes[@]}" --config-dir "$SHAPES_DIR" \
    --out "$OUTDIR/performance.md" --write-bundle "$OUTDIR/results.json" > /dev/null 2>> "$LOG"; then
    log "report: $OUTDIR/performance.md (${shapes[*]})"
  else
    log "FAILED report"
    FAILED+=("report")
  fi
}

log "run_gpu_bench: shapes ${SHAPES[*]} on $DEVICE; out $OUTDIR; work $WORK_DIR; checkpoints $SYNTH_DIR"
log "settings: prompt $PROMPT_LENS, decode contexts $DECODE_CONTEXTS, new tokens $NEW_TOKENS, repeat $REPEAT," \
  "step timeout ${STEP_TIMEOUT}s, time budget ${TIME_BUDGET}s"
{
  echo "--- environment"
  echo "host $(hostname) ; git $(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo unknown)"
  command -v nvidia-smi > /dev/null &&
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
  "$PYTHON" --version
  df -h "$SYNTH_DIR" | tail -1
  free -g | sed -n 2p
  echo "---"
} >> "$LOG" 2>&1
if [[ ! -x $ZOO ]]; then
  log "FAILED: no zoo binary at $ZOO (set ZOO=...)"
  exit 2
fi

# The roofline first: it is short, and a later timeout cannot lose it.
if [[ $ROOFLINE == 1 || ($ROOFLINE == auto && ! -s $WORK_DIR/roofline.json) ]]; then
  # shellcheck disable=SC2086  # ROOFLINE_ARGS is a list of words
  step "roofline" "$WORK_DIR/roofline.json" \
    "$PYTHON" "$BENCH_PY" --roofline --device "$DEVICE" --json $ROOFLINE_ARGS
elif [[ $ROOFLINE == auto ]]; then
  log "roofline: reusing $WORK_DIR/roofline.json"
fi

for shape in "${SHAPES[@]}"; do
  if (( TIME_BUDGET > 0 && SECONDS > TIME_BUDGET )); then
    log "SKIPPED $shape: past the time budget of ${TIME_BUDGET}s (run it on its own)"
    FAILED+=("skipped $shape")
    continue
  fi
  config=$SHAPES_DIR/$shape.json
  if [[ ! -f $config ]]; then
    log "FAILED $shape: no $config"
    FAILED+=("config $shape")
    continue
  fi
  log "=== $shape"
  ATTEMPTED+=("$shape")
  ckpt=$SYNTH_DIR/$shape
  if [[ -f $ckpt/.zoo-synth-complete ]] && cmp -s "$config" "$ckpt/.zoo-synth-complete"; then
    log "reusing $ckpt"
  else
    make_room "$shape" "$(checkpoint_bytes "$config")"
    rm -rf "$ckpt"
    if ! step "synth $shape" - "$ZOO" synth --config "$config" --out "$ckpt" --seed 1; then
      rm -rf "$ckpt"
      continue
    fi
    cp "$config" "$ckpt/.zoo-synth-complete"  # marks a finished checkpoint, and of which config
  fi

  yaml=$WORK_DIR/$shape.yaml
  cat > "$yaml" << EOF
# written by tools/bench/run_gpu_bench.sh
model:
  checkpoint: $ckpt
  device: $DEVICE
  max_context: $MAX_CONTEXT
EOF
  warm_page_cache "$ckpt"
  step "zoo bench $shape" "$WORK_DIR/zoo-$shape.json" "$ZOO" bench "$yaml" --prompt-len "$PROMPT_LENS" \
    --decode-context "$DECODE_CONTEXTS" --new-tokens "$NEW_TOKENS" --repeat "$REPEAT" --json
  if [[ $EAGER == 1 ]]; then
    warm_page_cache "$ckpt"
    step "transformers bench $shape" "$WORK_DIR/hf-$shape.json" \
      "$PYTHON" "$BENCH_PY" "$ckpt" --device "$DEVICE" --dtype "$HF_DTYPE" --prompt-len "$PROMPT_LENS" \
      --decode-context "$DECODE_CONTEXTS" --new-tokens "$NEW_TOKENS" --repeat "$REPEAT" --json
  fi
  if [[ $COMPILED == 1 ]]; then
    warm_page_cache "$ckpt"
    saved_timeout=(${TIMEOUT[@]+"${TIMEOUT[@]}"})
    if [[ ${#TIMEOUT[@]} -gt 0 ]]; then TIMEOUT=(timeout -k 15 "$COMPILED_TIMEOUT"); fi
    # shellcheck disable=SC2086  # COMPILED_ARGS is a list of words
    step "transformers compiled $shape" "$WORK_DIR/hfc-$shape.json" \
      "$PYTHON" "$BENCH_PY" "$ckpt" --mode compiled --device "$DEVICE" --dtype "$HF_DTYPE" \
      --decode-context "$DECODE_CONTEXTS" --new-tokens "$NEW_TOKENS" --repeat "$REPEAT" --json $COMPILED_ARGS
    TIMEOUT=(${saved_timeout[@]+"${saved_timeout[@]}"})
  fi
  if [[ $KEEP_SYNTH == 0 ]]; then
    log "deleting $ckpt (KEEP_SYNTH=0)"
    rm -rf "$ckpt"
  fi
  report
done
report

if [[ ${#FAILED[@]} -gt 0 ]]; then
  log "done in ${SECONDS}s; failed: ${FAILED[*]}"
  exit 1
fi
log "done in ${SECONDS}s; all steps ok"
