#!/usr/bin/env bash
# The flags llama-cli users type: -m/--model, -n/--n-predict, --temp, -s in generate (and tts,
# bench with llama-bench's -p/-n/-r) mean what they mean there, and -t/--threads sizes the CPU pool.
# Usage: cli_aliases.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-cli-aliases "$@"
Q=$SRC/configs/qwen3-tiny.yaml
QDIR=$FIX/qwen3-tiny
REQ=$QDIR/request.json

H=$SRC/configs/higgs-tiny.yaml

# --- llama-cli spellings (and llama-bench's for bench) ----------------------------------------
run "reference run" generate "$Q" --request "$REQ" --max-new-tokens 4 --temperature 0.8 --seed 11
rc 0
want=$(cat "$TMP/out")
run "-m -n --temp -s" generate -m "$Q" --request "$REQ" -n 4 --temp 0.8 -s 11
rc 0
[[ $(cat "$TMP/out") == "$want" ]] || fail "aliases gave '$(cat "$TMP/out")', want '$want'"
run "--model --n-predict" generate --model "$Q" --request "$REQ" --n-predict 4 --temperature 0.8 --seed 11
rc 0
[[ $(cat "$TMP/out") == "$want" ]] || fail "long aliases gave '$(cat "$TMP/out")', want '$want'"
run "-n counts tokens" generate "$Q" --request "$REQ" -n 3 --ids -q --ignore-eos
rc 0
[[ $(wc -w <"$TMP/out") == 3 ]] || fail "-n 3 printed '$(cat "$TMP/out")'"
# -t/--threads sizes the CPU pool (what ZOO_NUM_THREADS does); bench --json reports the pool's size.
for flag in -t --threads; do
  for n in 1 3; do
    run "bench $flag $n" bench "$Q" -p 4 -n 2 -r 1 --json "$flag" "$n"
    rc 0
    python3 -c 'import json,sys; b=json.load(open(sys.argv[1])); assert b["threads"]==int(sys.argv[2]), b["threads"]' \
      "$TMP/out" "$n" || fail "bench $flag $n: threads $(head -c 300 "$TMP/out")"
  done
done
run "generate -t 2" generate "$Q" --request "$REQ" -n 2 --ids -q -t 2
rc 0
run "generate -t 0" generate "$Q" --request "$REQ" -n 2 -t 0
rc 2
has err "--threads"
run "bench -m -p -n -r" bench -m "$Q" -p 4 -n 2 -r 1 --json
rc 0
python3 -c 'import json,sys; b=json.load(open(sys.argv[1])); assert b["repeat"]==1 and b["prefill"][0]["tokens"]==4 \
  and b["decode"][0]["new_tokens"]==2, b' "$TMP/out" || fail "bench aliases: $(head -c 600 "$TMP/out")"
run "tts -m" tts -m "$H" --text "Hi" --max-frames 8 --codes-out "$TMP/m.json" -s 1
rc 0

run "tts reference" tts "$H" --text "Hello there" --max-frames 12 --codes-out "$TMP/a.json" --seed 9 --temperature 0.8
rc 0
run "tts -s --temp" tts "$H" --text "Hello there" --max-frames 12 --codes-out "$TMP/b.json" -s 9 --temp 0.8
rc 0
cmp -s "$TMP/a.json" "$TMP/b.json" || fail "tts -s 9 --temp 0.8 did not repeat --seed 9 --temperature 0.8"
run "generate --help names the aliases" generate --help
has out "-n,--max-new-tokens,--n-predict"
has out "--temperature,--temp"
has out "-s,--seed"

echo "$cases cases, $failures failures"
((failures == 0))
