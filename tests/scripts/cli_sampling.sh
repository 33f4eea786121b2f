#!/usr/bin/env bash
# Sampling as a user meets it: a sampled run without --seed (or with --seed -1) draws a fresh seed
# and prints it, and that seed repeats the run (generate and tts); greedy runs print none; a
# sampling flag asks to sample, the knobs not given taking generation_config.json's values, else
# transformers' GenerationConfig defaults (temperature 1, top_k 50, top_p 1).
# Usage: cli_sampling.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-cli-sampling "$@"
Q=$SRC/configs/qwen3-tiny.yaml
QDIR=$FIX/qwen3-tiny
REQ=$QDIR/request.json

U64_MAX=18446744073709551615
# The seed of the last run's "generate: temperature ..., seed N" (or "tts: ...") line.
seed() { sed -nE 's/^(generate|tts): temperature .*, seed ([0-9]+).*/\2/p' "$TMP/err"; }
gen() { run "$1" generate "$Q" --request "$REQ" --max-new-tokens 8 "${@:2}"; }
H=$SRC/configs/higgs-tiny.yaml

# --- Seeds --------------------------------------------------------------------------------------
gen "sampled, no seed" --temperature 1
rc 0
s1=$(seed) out1=$(cat "$TMP/out")
gen "sampled again, no seed" --temperature 1
rc 0
s2=$(seed)
[[ -n $s1 && -n $s2 ]] || fail "no seed printed: $(cat "$TMP/err")"
[[ $s1 != "$s2" ]] || fail "two runs without --seed drew the same seed $s1"
gen "the printed seed repeats the run" --temperature 1 --seed "$s1"
rc 0
[[ $(seed) == "$s1" && $(cat "$TMP/out") == "$out1" ]] || fail "--seed $s1: '$(cat "$TMP/out")', want '$out1'"
gen "--seed -1 is random" --temperature 1 --seed -1
rc 0
m1=$(seed)
gen "--seed -1 again" --temperature 1 --seed -1
m2=$(seed)
[[ -n $m1 && $m1 != "$U64_MAX" && $m1 != "$m2" ]] || fail "--seed -1 gave seeds '$m1', '$m2'"
gen "the largest seed is a seed" --temperature 1 --seed "$U64_MAX"
rc 0
[[ $(seed) == "$U64_MAX" ]] || fail "--seed $U64_MAX printed '$(seed)'"
for bad in -2 -18446744073709551615 18446744073709551616 12x; do
  gen "--seed $bad" --temperature 1 --seed "$bad"
  rc 2
  has err "--seed"
done
gen "greedy prints no seed" --seed 5
rc 0
has err "generate: greedy"
lacks err "seed"

# tts: random unless given, printed; greedy prints none.
tts() { run "$1" tts "$H" --text "Hello there" --max-frames 12 --codes-out "$TMP/$2.json" "${@:3}"; }
tts "tts, no seed" a
rc 0
t1=$(seed)
tts "tts again, no seed" b
t2=$(seed)
[[ -n $t1 && -n $t2 && $t1 != "$t2" ]] || fail "tts seeds '$t1', '$t2': $(cat "$TMP/err")"
tts "tts with the printed seed" c --seed "$t1"
[[ $(seed) == "$t1" ]] && cmp -s "$TMP/a.json" "$TMP/c.json" || fail "tts --seed $t1 did not repeat the codes"
tts "tts --seed -3" e --seed -3
rc 2
has err "--seed"
tts "tts greedy" f --temperature 0
rc 0
has err "tts: greedy"
lacks err "seed"

# --- Sampling defaults: GenerationConfig's for what is not given -------------------------------
gen "--temperature alone" --temperature 0.7 --seed 3
rc 0
has err "generate: temperature 0.7, top_k 50, top_p 1, seed 3"
gen "--top-p alone samples" --top-p 0.9 --seed 3
rc 0
has err "generate: temperature 1, top_k 50, top_p 0.9, seed 3"
gen "--top-k alone samples" --top-k 5 --seed 3
rc 0
has err "generate: temperature 1, top_k 5, top_p 1, seed 3"
gen "--temperature 0 with --top-p" --temperature 0 --top-p 0.9
rc 2
has err "--top-p 0.9"
# A model's generation_config.json fills the knobs not given, even when it does not sample.
cp -r "$QDIR" "$TMP/genconf"
echo '{"do_sample": false, "top_k": 20, "top_p": 0.95}' >"$TMP/genconf/generation_config.json"
run "the model's top_k under --temperature" generate "$TMP/genconf" --request "$REQ" --max-new-tokens 2 \
  --temperature 0.5 --seed 1
rc 0
has err "generate: temperature 0.5, top_k 20, top_p 0.95, seed 1"
run "the model's greedy default" generate "$TMP/genconf" --request "$REQ" --max-new-tokens 2
has err "generate: greedy"
run "generate --help says where defaults come from" generate --help
has out "GenerationConfig"

echo "$cases cases, $failures failures"
((failures == 0))
