#!/usr/bin/env bash
# Baseline for `zoo serve`: Hugging Face `transformers serve` (5.17) with continuous batching, bf16, on
# the GPU, measured by tools/bench/bench_serve.py the way zoo serve is measured.
#
#   usage (on the GPU host, from the repo root): bash tools/bench/transformers_serve_baseline.sh OUT_DIR CHECKPOINT_DIR PORT
#
# 1. Installs what `transformers serve` needs and the host lacks (fastapi, uvicorn, openai, accelerate, ...)
#    from wheels carried to the host (TS_WHEELS, default .gpu/wheels; made here with `pip download
#    --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 -d .gpu/wheels fastapi uvicorn
#    openai accelerate pydantic starlette rich typer requests`), offline, with --no-deps into $TS_DEPS (/tmp/tsdeps), put first on PYTHONPATH: the
#    host's python (the one with torch) is not touched. Which wheels: pip's resolver run against the host's
#    installed packages (--dry-run --report); all of them if that fails or pip is missing.
# 2. A checkpoint without tokenizer files (a `zoo synth` one) is served from /tmp/ts-ckpt: links to its
#    files plus the Qwen2/3 tokenizer.json of tests/fixtures/tokenizer/fixtures.tar.xz.
# 3. `transformers serve CKPT --continuous-batching --dtype bfloat16 --device cuda --host 127.0.0.1 --port P`
#    (the checkpoint preloaded: requests may omit `model` or must name that exact path).
# 4. bench_serve.py through a small adapter (tools/bench/transformers_serve_shim.py), because transformers
#    serve 5.17's /v1/completions differs from zoo serve's: it takes only a string prompt (the adapter turns
#    each token id into a one-token word, so prompts stay distinct and exactly --prompt-len tokens), answers
#    422 to `ignore_eos` (the adapter sends generation_config {"eos_token_id": -1} instead), and puts
#    `usage` in its last chunk next to a choice (the adapter rewrites that line as `"choices":[]` + usage so
#    the bench counts completion tokens and not a token event). A `data: {"error": ...}` line in a stream
#    counts as an error of that request.
# 5. Appends everything to OUT/baseline.log, the server's log is OUT/transformers-serve.log; stops the server.
#
# Every step is bounded, and all of them together by TS_DEADLINE seconds (570: inside a 600 s call).
# Knobs (environment): REQUESTS CONCURRENCY PROMPT_LEN MAX_TOKENS, TS_WAIT (240, server start),
# TS_SERVE_ARGS (extra `transformers serve` flags, e.g. "--cb-use-cuda-graph --attn-implementation sdpa"),
# TS_BENCH_ARGS (extra bench_serve.py flags, e.g. --json), TS_DEVICE (cuda), TS_DTYPE (bfloat16),
# TS_WHEELS (.gpu/wheels), TS_DEPS (/tmp/tsdeps), PYTHON (python3).
set -uo pipefail
out=${1:?usage: transformers_serve_baseline.sh OUT_DIR CHECKPOINT_DIR PORT}
ckpt=${2:?usage: transformers_serve_baseline.sh OUT_DIR CHECKPOINT_DIR PORT}
port=${3:?usage: transformers_serve_baseline.sh OUT_DIR CHECKPOINT_DIR PORT}
PY=${PYTHON:-python3}
wheels=${TS_WHEELS:-.gpu/wheels}
deps=${TS_DEPS:-/tmp/tsdeps}
requests=${REQUESTS:-512}
concurrency=${CONCURRENCY:-128}
prompt_len=${PROMPT_LEN:-128}
max_tokens=${MAX_TOKENS:-128}
deadline=${TS_DEADLINE:-570}
mkdir -p "$out"
out=$(cd "$out" && pwd)
log="$out/baseline.log"
slog="$out/transformers-serve.log"
say() { echo "[$(date +%T)] $*" | tee -a "$log"; }
# seconds for the next step: WANT, or what is left before the deadline (at least 1)
budget() { local want=$1 left=$((deadline - SECONDS)); ((left < want)) && want=$left; ((want < 1)) && want=1; echo "$want"; }
[ -f tools/bench/bench_serve.py ] || { say "run from the repo root (no tools/bench/bench_serve.py here)"; exit 2; }
[ -f "$ckpt/config.json" ] || { say "$ckpt/config.json: missing"; exit 2; }
ckpt=$(cd "$ckpt" && pwd)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_UPDATE_CHECK=1 HF_HUB_DISABLE_TELEMETRY=1
export TOKENIZERS_PARALLELISM=false PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
say "transformers serve baseline: $ckpt port $port, $requests requests x ($prompt_len in, $max_tokens out) at concurrency $concurrency"

# ---- 1. packages -------------------------------------------------------------------------------------------
want='fastapi uvicorn openai>=1.98.0 pydantic>=2 starlette rich typer accelerate>=1.1.0 requests'
check_imports() {
  timeout "$(budget 120)" env PYTHONPATH="$deps${PYTHONPATH:+:$PYTHONPATH}" "$PY" - <<'PY' >> "$log" 2>&1
import importlib.metadata as md
import fastapi, uvicorn, openai, pydantic, starlette, typer, accelerate, requests, torch, transformers  # noqa: F401
from transformers.utils.import_utils import is_serve_available, is_accelerate_available
assert is_serve_available(), "transformers: is_serve_available() is False"
assert is_accelerate_available(), "transformers: is_accelerate_available() is False"
import transformers.cli.serve, transformers.cli.serving.completion  # noqa: F401
print("imports ok:", ", ".join(f"{n} {md.version(n)}" for n in (
    "torch", "transformers", "huggingface_hub", "tokenizers", "fastapi", "starlette", "uvicorn", "openai",
    "pydantic", "pydantic_core", "typing_extensions", "typer", "accelerate")))
PY
}
install_wheels() {  # install_wheels FILE...: --no-deps into $deps (pip, or unzip where pip is missing)
  if "$PY" -m pip --version > /dev/null 2>&1; then
    timeout "$(budget 180)" "$PY" -m pip install --quiet --no-index --no-deps --no-compile --upgrade --target "$deps" "$@" >> "$log" 2>&1
  else
    timeout "$(budget 120)" "$PY" -c '
import sys, zipfile
for w in sys.argv[2:]:
    zipfile.ZipFile(w).extractall(sys.argv[1])' "$deps" "$@" >> "$log" 2>&1
  fi
}
if [ -f "$deps/.ok" ] && check_imports; then
  say "packages: $deps already has them"
else
  rm -rf "$deps"
  mkdir -p "$deps"
  if ! ls "$wheels"/*.whl > /dev/null 2>&1; then say "no wheels in $wheels"; exit 3; fi
  plan=()
  # shellcheck disable=SC2086  # $want is a list of requirements
  if "$PY" -m pip --version > /dev/null 2>&1 &&
     timeout "$(budget 120)" "$PY" -m pip install --dry-run --quiet --no-index --find-links "$wheels" \
       --report "$deps/plan.json" $want >> "$log" 2>&1; then
    mapfile -t plan < <("$PY" -c '
import json, sys, urllib.parse, urllib.request
for item in json.load(open(sys.argv[1]))["install"]:
    print(urllib.request.url2pathname(urllib.parse.urlparse(item["download_info"]["url"]).path))' "$deps/plan.json")
    say "packages: pip's plan against this python: ${#plan[@]} wheels: $(for p in "${plan[@]}"; do basename "$p" | cut -d- -f1-2; done | tr '\n' ' ')"
  else
    say "packages: no plan from pip (see above); installing every wheel in $wheels"
    plan=("$wheels"/*.whl)
  fi
  ok=0
  if ((${#plan[@]} == 0)) || install_wheels "${plan[@]}"; then check_imports && ok=1; fi
  if ((ok == 0)); then
    say "packages: the planned set does not import; installing every wheel in $wheels over it"
    install_wheels "$wheels"/*.whl && check_imports && ok=1
  fi
  ((ok == 1)) || { say "packages: transformers serve's imports fail (see $log)"; exit 3; }
  touch "$deps/.ok"
  say "packages: installed into $deps"
fi
export PYTHONPATH="$deps${PYTHONPATH:+:$PYTHONPATH}"

# ---- 2. the checkpoint, with a tokenizer -------------------------------------------------------------------
model=$ckpt
if [ ! -f "$ckpt/tokenizer.json" ]; then
  model=/tmp/ts-ckpt
  rm -rf "$model"
  mkdir -p "$model"
  for f in "$ckpt"/*; do
    case $(basename "$f") in tokenizer*.json | special_tokens_map.json | vocab.json | merges.txt) continue ;; esac
    ln -s "$f" "$model/"
  done
  timeout "$(budget 60)" tar -xJOf tests/fixtures/tokenizer/fixtures.tar.xz qwen/tokenizer.json > "$model/tokenizer.json" ||
    { say "cannot unpack qwen/tokenizer.json from tests/fixtures/tokenizer/fixtures.tar.xz"; exit 4; }
  cat > "$model/tokenizer_config.json" <<'JSON'
{
  "tokenizer_class": "Qwen2Tokenizer",
  "model_max_length": 131072,
  "bos_token": null,
  "eos_token": "<|im_end|>",
  "pad_token": "<|endoftext|>",
  "add_prefix_space": false,
  "clean_up_tokenization_spaces": false,
  "errors": "replace"
}
JSON
  say "checkpoint: $ckpt has no tokenizer.json; serving $model (links to its files + the Qwen tokenizer fixture)"
fi

# ---- 3. the bench adapter (tools/bench/transformers_serve_shim.py) --------------------------------------------
shim=tools/bench/transformers_serve_shim.py
export TS_TOKENIZER="$model/tokenizer.json"
url="http://127.0.0.1:$port"
bench() {  # bench SECONDS ARGS...: bench_serve.py through the adapter, requests name the served model
  local t=$1
  shift
  timeout "$(budget "$t")" "$PY" "$shim" tools/bench/bench_serve.py "$url" --model "$model" "$@"
}

# ---- 4. the server -----------------------------------------------------------------------------------------
spid=
stop_server() {
  [ -n "$spid" ] || return 0
  kill -TERM "$spid" 2> /dev/null
  for _ in $(seq 60); do kill -0 "$spid" 2> /dev/null || break; sleep 0.5; done
  if kill -0 "$spid" 2> /dev/null; then
    say "server: still up 30 s after TERM; KILL"
    kill -KILL "$spid" 2> /dev/null
  fi
  wait "$spid" 2> /dev/null
  say "server: stopped (exit $?)"
  spid=
}
trap stop_server EXIT
trap 'exit 130' INT TERM
# shellcheck disable=SC2086  # TS_SERVE_ARGS is a list of flags
"$PY" -m transformers.cli.transformers serve "$model" --continuous-batching \
  --dtype "${TS_DTYPE:-bfloat16}" --device "${TS_DEVICE:-cuda}" --host 127.0.0.1 --port "$port" \
  ${TS_SERVE_ARGS:-} > "$slog" 2>&1 < /dev/null &
spid=$!
say "server: pid $spid, log $slog"
up=0
start=$SECONDS
limit=$(budget "${TS_WAIT:-240}")
while ((SECONDS - start < limit)); do
  kill -0 "$spid" 2> /dev/null || break
  if timeout 5 "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=4).read()' \
       "$url/health" > /dev/null 2>&1; then up=1; break; fi
  sleep 2
done
if ((up == 0)); then
  if kill -0 "$spid" 2> /dev/null; then say "server: no answer from $url/health in $limit s"; else say "server: exited before answering"; fi
  tail -40 "$slog" | tee -a "$log"
  exit 5
fi
say "server: up after $((SECONDS - start)) s"

# ---- 5. warm-up, then the measured run ---------------------------------------------------------------------
# The first request starts the continuous-batching manager (its KV cache, CUDA graphs if any): untimed.
bench 120 --requests 4 --concurrency 4 --prompt-len "$prompt_len" --max-tokens 16 --seed 101 >> "$log" 2>&1
say "warm-up 1 (4 requests) rc $?"
bench 120 --requests "$concurrency" --concurrency "$concurrency" --prompt-len "$prompt_len" --max-tokens 16 \
  --seed 102 >> "$log" 2>&1
say "warm-up 2 ($concurrency requests at once) rc $?"
# shellcheck disable=SC2086  # TS_BENCH_ARGS is a list of flags
bench 300 --requests "$requests" --concurrency "$concurrency" --prompt-len "$prompt_len" --max-tokens "$max_tokens" \
  ${TS_BENCH_ARGS:-} >> "$log" 2>&1
rc=$?
say "transformers serve (continuous batching, ${TS_DTYPE:-bfloat16}): bench rc $rc$( ((rc == 124)) && echo ' (timed out)')"
kill -0 "$spid" 2> /dev/null || say "server: died during the run"
say "server log: $(grep -ciE 'error|traceback' "$slog") lines with error/traceback"
stop_server
exit "$rc"
