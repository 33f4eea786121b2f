#!/usr/bin/env bash
# By class, not by case: every numeric option of every command (read from its --help: the INT,
# UINT and FLOAT ones) is tried with nan, inf, -1, 0, 1e300 and 2^64. Each value is either a usage
# error, exit 2, whose first line names the option and stays short (no 309-digit bound, no value
# echoed whole), or one of the documented meanings below, which runs (exit 0).
# Usage: numeric_options.sh SOURCE_DIR BUILD_DIR
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-numeric-options "$@"
QWEN=$SRC/configs/qwen3-tiny.yaml
REQ=$FIX/qwen3-tiny/request.json
echo '"hi"' >"$TMP/in.jsonl"

# A command line that runs (and quickly) for each command, before the option under test.
base_args() {
  case $1 in
    generate) echo "generate $QWEN --request $REQ -n 1 -q" ;;
    bench) echo "bench $QWEN -p 4 -n 1 -r 1" ;;
    tts) echo "tts $SRC/configs/higgs-tiny.yaml --text hi --max-frames 8 --codes-out $TMP/codes.json -q" ;;
    tokenize) echo "tokenize $SRC/tests/fixtures/higgs-tiny/tokenizer.json --input $TMP/in.jsonl" ;;
    synth) echo "synth --config $FIX/qwen3-tiny/config.json --out $TMP/synth --force -q" ;;
    plan) echo "plan $QWEN" ;;
    trace) echo "trace $QWEN --request $REQ --out $TMP/trace.safetensors" ;;
    validate) echo "validate $QWEN" ;;
  esac
}

# The documented meanings: COMMAND OPTION VALUE, each a run that must succeed.
accepted=(
  "generate --temperature 0"  # greedy
  "generate --top-k 0"        # off
  "generate --top-p 0"        # only the most likely token (the crossing one is kept)
  "generate --min-p 0"        # off
  "generate --seed -1"        # a random seed, printed
  "generate --seed 0"
  "generate --eos 0"          # a token id
  "generate --frequency-penalty -1"  # within [-2, 2]: a negative penalty favours repeats
  "generate --frequency-penalty 0"   # off
  "generate --presence-penalty -1"
  "generate --presence-penalty 0"
  "tts --temperature 0"       # greedy (<= 1e-5)
  "tts --top-k 0"
  "tts --top-p 0"
  "tts --seed -1"
  "tts --seed 0"
  "synth --seed 0"
  "synth --std 0"             # every weight 0 (norms still 1)
)
is_accepted() {
  local a
  for a in "${accepted[@]}"; do [[ $a == "$1 $2 $3" ]] && return 0; done
  return 1
}

values=(nan inf -1 0 1e300 18446744073709551616)
for cmd in generate bench tts tokenize synth plan trace validate; do
  "$ZOO" "$cmd" --help >"$TMP/help" 2>&1 || { fail "$cmd --help: exit $?"; continue; }
  # "  -n,--max-new-tokens,--n-predict INT:an integer ..." -> the names of each numeric option
  mapfile -t lines < <(grep -E '^ +(-[a-zA-Z],)?--[a-z-]+(,--[a-z-]+)* (INT|UINT|FLOAT)\b' "$TMP/help" |
    sed -E 's/^ +//; s/ .*//')
  ((${#lines[@]} > 0)) || fail "$cmd: no numeric options found in --help"
  for names in "${lines[@]}"; do
    IFS=, read -r -a aliases <<<"$names"
    opt=
    for a in "${aliases[@]}"; do [[ $a == --* ]] && { opt=$a; break; }; done
    for v in "${values[@]}"; do
      read -r -a args <<<"$(base_args "$cmd")"
      run "$cmd $opt $v" "${args[@]}" "$opt" "$v"
      if is_accepted "$cmd" "$opt" "$v"; then
        ((RC == 0)) || fail "documented value refused: exit $RC: $(head -c 300 "$TMP/err")"
        continue
      fi
      ((RC == 2)) || { fail "exit $RC, expected 2: $(head -c 300 "$TMP/err")"; continue; }
      first=$(head -n 1 "$TMP/err")
      named=0
      for a in "${aliases[@]}"; do [[ $first == *"$a"* ]] && named=1; done
      ((named)) || fail "the error does not name $opt: $first"
      ((${#first} < 200)) || fail "the error is ${#first} characters long: ${first:0:200}..."
    done
  done
done

(( failures == 0 )) && echo "numeric_options: $cases cases passed" || { echo "$failures failure(s) of $cases"; exit 1; }
