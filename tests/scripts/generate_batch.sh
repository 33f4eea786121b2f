#!/usr/bin/env bash
# `zoo generate MODEL --input prompts.jsonl`: many sequences through the engine at once. Each
# output line equals the same prompt run alone with `zoo generate` (greedy and seeded sampling),
# lines come out in input order, --out writes the JSONL atomically, and a bad line is an error
# naming the file, the line and the field, before any model work.
# Usage: generate_batch.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-generate-batch "$@"
M=$FIX/qwen3-tiny-text

cat >"$TMP/in.jsonl" <<'JSONL'
"Hello world"
{"input_ids": [1, 2, 3, 4, 5], "max_new_tokens": 5}

{"prompt": "The cat sat on the mat and looked at the long road ahead of it", "temperature": 0.8, "seed": 7, "top_k": 20}
{"prompt": "A", "temperature": 0.9, "top_p": 0.8, "min_p": 0.1, "seed": 3, "max_new_tokens": 12}
{"prompt": "Hello world", "repetition_penalty": 1.8, "max_new_tokens": 16}
{"prompt": "A", "temperature": 0.7, "frequency_penalty": 1.2, "presence_penalty": -0.5, "seed": 5, "max_new_tokens": 16}
JSONL
run batch generate "$M" --input "$TMP/in.jsonl" -n 8 --max-running 2 --max-batched-tokens 8
rc 0
cp "$TMP/out" "$TMP/batch.jsonl"
has err "6/6 done"
has err "KV pages at peak"
((cases++))
[[ $(wc -l <"$TMP/batch.jsonl") == 6 ]] || fail "expected 6 output lines: $(cat "$TMP/batch.jsonl")"
# ids of output line N (0-based), space-separated
ids_of() { python3 -c "import json,sys; print(' '.join(map(str, json.loads(open(sys.argv[1]).read().splitlines()[int(sys.argv[2])])['ids'])))" "$TMP/batch.jsonl" "$1"; }
field_of() { python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[int(sys.argv[2])])[sys.argv[3]])" "$TMP/batch.jsonl" "$1" "$2"; }
if command -v python3 >/dev/null; then
  alone() { "$ZOO" generate "$M" --ids -q "$@" 2>"$TMP/err" | xargs; }
  echo '{"input_ids": [1, 2, 3, 4, 5]}' >"$TMP/req.json"
  want=("$(alone --prompt "Hello world" -n 8)" "$(alone --request "$TMP/req.json" -n 5)"
    "$(alone --prompt "The cat sat on the mat and looked at the long road ahead of it" --temperature 0.8 --seed 7 --top-k 20 -n 8)"
    "$(alone --prompt A --temperature 0.9 --top-p 0.8 --min-p 0.1 --seed 3 -n 12)"
    "$(alone --prompt "Hello world" --repetition-penalty 1.8 -n 16)"
    "$(alone --prompt A --temperature 0.7 --top-k 0 --frequency-penalty 1.2 --presence-penalty -0.5 --seed 5 -n 16)")
  # Penalties (applied on the device by the runner in a batch, on the host alone) move the picks.
  ((cases++))
  [[ ${want[4]} != "$(alone --prompt "Hello world" -n 16)" ]] || fail "--repetition-penalty 1.8 changed nothing"
  [[ ${want[5]} != "$(alone --prompt A --temperature 0.7 --top-k 0 --seed 5 -n 16)" ]] || fail "frequency/presence penalties changed nothing"
  for i in 0 1 2 3 4 5; do
    ((cases++))
    got=$(ids_of $i)
    [[ -n $got && $got == "${want[$i]}" ]] || fail "line $i: batched '$got', alone '${want[$i]}'"
    [[ $(field_of $i index) == "$i" ]] || fail "line $i: index $(field_of $i index)"
    [[ $(field_of $i finish_reason) == length ]] || fail "line $i: finish_reason $(field_of $i finish_reason)"
  done
fi

# Logprobs: each new token's, and the top n, in the line (a line's field, or --logprobs for all).
printf '%s\n' '{"prompt": "Hello world", "logprobs": 3}' '"The cat"' >"$TMP/lp.jsonl"
run logprobs generate "$M" --input "$TMP/lp.jsonl" -n 6 --logprobs 1 -q
rc 0
((cases++))
python3 - "$TMP/out" <<'PY' || fail "logprobs lines: $(cat "$TMP/out")"
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
for line, top in zip(lines, (3, 1)):
    lp = line["logprobs"]
    assert len(lp) == len(line["ids"]) == 6, line
    for entry, id in zip(lp, line["ids"]):
        assert entry["id"] == id and entry["logprob"] <= 0 and len(entry["top_logprobs"]) == top, entry
        # greedy: the pick is the likeliest, and the top ones fall
        assert entry["top_logprobs"][0]["id"] == id and math.isclose(entry["top_logprobs"][0]["logprob"], entry["logprob"]), entry
        values = [t["logprob"] for t in entry["top_logprobs"]]
        assert values == sorted(values, reverse=True) and "token" in entry, entry
PY

# logprobs only where asked: a line without the field (and no --logprobs) gets none (before: a list
# of 0.0 logprobs); "logprobs": 0 gets each token's logprob and no alternatives.
printf '%s\n' '{"prompt": "Hello world", "logprobs": 0}' '"The cat"' >"$TMP/lp0.jsonl"
run logprobs0 generate "$M" --input "$TMP/lp0.jsonl" -n 4 -q
rc 0
((cases++))
python3 - "$TMP/out" "$TMP/batch.jsonl" <<'PY' || fail "logprobs not asked: $(cat "$TMP/out")"
import json, sys
asked, plain = [json.loads(l) for l in open(sys.argv[1])]
assert len(asked["logprobs"]) == len(asked["ids"]) == 4, asked
for entry, id in zip(asked["logprobs"], asked["ids"]):
    assert entry["id"] == id and entry["logprob"] <= 0 and entry["top_logprobs"] == [], entry
assert any(e["logprob"] < 0 for e in asked["logprobs"]), asked
assert "logprobs" not in plain, plain
for line in map(json.loads, open(sys.argv[2])):
    assert "logprobs" not in line, line
PY

# --out: the same lines, written atomically; stdout stays empty.
run out generate "$M" --input "$TMP/in.jsonl" -n 8 --out "$TMP/out.jsonl" -q
rc 0
((cases++))
cmp -s "$TMP/out.jsonl" "$TMP/batch.jsonl" || fail "--out differs from stdout"
[[ ! -s $TMP/out ]] || fail "stdout not empty with --out"
# stdin


((cases++))
"$ZOO" generate "$M" --input - -n 8 -q <"$TMP/in.jsonl" >"$TMP/stdin.jsonl" 2>"$TMP/err" || fail "--input -: $(cat "$TMP/err")"
cmp -s "$TMP/stdin.jsonl" "$TMP/batch.jsonl" || fail "--input - differs"

# Bad lines: exit 2, the file, the line and the field named.
bad() {
  local name=$1 line=$2 want=$3
  printf '"ok"\n%s\n' "$line" >"$TMP/bad.jsonl"
  run "$name" generate "$M" --input "$TMP/bad.jsonl" -q
  rc 2
  has err "bad.jsonl:2: "
  has err "$want"
  lacks err "loading"
}
bad not-json '{"prompt": ' "not valid JSON"
bad number '42' "a JSON string (a prompt) or an object"
bad both '{"prompt": "a", "input_ids": [1]}' "not both"
bad neither '{"seed": 1}' "needs prompt or input_ids"
bad empty-ids '{"input_ids": []}' "input_ids must be a non-empty array"
bad neg-id '{"input_ids": [1, -2]}' "input_ids must be within"
bad big-id '{"input_ids": [100000]}' "outside the vocabulary"
bad max-new '{"prompt": "a", "max_new_tokens": 0}' "max_new_tokens must be within [1,"
bad temp '{"prompt": "a", "temperature": "hot"}' "temperature must be a number"
bad top-p '{"prompt": "a", "top_p": 1.5}' "top_p must be within [0, 1]"
bad seed '{"prompt": "a", "seed": -1}' "seed must be an integer >= 0"
bad unknown '{"prompt": "a", "temprature": 1}' "unknown field 'temprature'"
bad stop '{"prompt": "a", "stop": ["x"]}' "stop strings are not implemented yet"
bad greedy-top-k '{"prompt": "a", "top_k": 5}' "top_k 5: has no effect under greedy decoding (temperature 0); give temperature to sample"
bad too-long '{"input_ids": [1], "max_new_tokens": 5000}' "exceed the context limit of 4096 tokens"
# The context limit: the model's max_position_embeddings (4096 here), or -c; beyond the model's refused.
echo '{"input_ids": [1, 2, 3, 4, 5], "max_new_tokens": 60}' >"$TMP/ctx.jsonl"
run ctx-small generate "$M" --input "$TMP/ctx.jsonl" -c 64 -q
rc 2
has err "ctx.jsonl:1: the prompt's 5 tokens plus max_new_tokens 60 exceed the context limit of 64 tokens"
run ctx-fits generate "$M" --input "$TMP/ctx.jsonl" -c 65 -q
rc 0
run ctx-above-model generate "$M" --input "$TMP/ctx.jsonl" -c 5000 -q
rc 2
has err "-c/--ctx-size 5000: above the model's max_position_embeddings 4096"
# A multimodal checkpoint's text model states its limit in text_config (256 in this fixture).
run ctx-above-text-model generate "$FIX/saved/gemma3-mm-bf16-untied" --input "$TMP/ctx.jsonl" -c 300 -q
rc 2
has err "-c/--ctx-size 300: above the model's text_config.max_position_embeddings 256"
run ctx-needs-input generate "$M" --prompt hi -c 64 -q
rc 2
printf '\n\n' >"$TMP/blank.jsonl"
run blank generate "$M" --input "$TMP/blank.jsonl" -q
rc 2
has err "no prompts"
run no-input-flag generate "$M" --prompt hi --max-running 4 -q
rc 2
has err "--max-running"
run both generate "$M" --prompt hi --input "$TMP/in.jsonl" -q
rc 2
run out-is-input generate "$M" --input "$TMP/in.jsonl" --out "$TMP/in.jsonl" -q
rc 2
((cases++))
[[ $(wc -l <"$TMP/in.jsonl") == 7 ]] || fail "--out naming the input touched it"

# zoo bench --batch: a row per batch size and context, pages in use, as JSON for scripts.
run bench bench "$SRC/configs/qwen3-tiny.yaml" -p 20 --batch 1,3 -n 2 -r 1 --json -q
rc 0
if command -v python3 >/dev/null; then
  ((cases++))
  python3 - "$TMP/out" <<'PY' || fail "bench --batch JSON: $(head -c 600 "$TMP/out")"
import json, sys
rows = json.load(open(sys.argv[1]))["batch_decode"]
assert [(r["batch"], r["context"]) for r in rows] == [(1, 20), (3, 20)], rows
for r in rows:
    assert r["ms_per_step"] > 0 and r["tokens_per_s"] > 0, r
    # 20 prompt tokens + 1 warm-up + 2 timed steps: 2 pages of 16 per sequence
    assert r["kv_pages_used"] == 2 * r["batch"], r
PY
fi
run bench-encode-batch bench "$SRC/configs/qwen3-tiny.yaml" --batch 2 --full-logits -q
rc 2

echo "$cases cases, $failures failures"
((failures == 0))
