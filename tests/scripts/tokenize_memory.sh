#!/usr/bin/env bash
# `zoo tokenize` memory is bounded by what the input can produce: a line of N bytes gives at most
# about N ids, so its peak memory is a small multiple of N, whatever the line holds; a tokenizer.json's
# added tokens cost memory in proportion to their bytes. Peak RSS from GNU time (the bounds are
# 1.3 to 3 x what this build takes; main went past each: 1.1 to 2.8 x the bound).
# Usage: tokenize_memory.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-tokenize-memory "$@"
M=$FIX/qwen3-tiny-text
command -v python3 >/dev/null || { echo "skipped: no python3 to write the inputs"; exit 77; }
# An ASan build's shadow memory makes RSS meaningless here; its run still checks the ids.
measure=1
[[ -x /usr/bin/time ]] || measure=0
ldd "$ZOO" 2>/dev/null | grep -q libasan && measure=0

# peak NAME LIMIT_MB ARGS...: runs zoo ARGS (at most 120 s), leaves RC, $TMP/out, $TMP/err and
# checks the peak RSS against LIMIT_MB.
peak() {
  local name=$1 limit=$2
  shift 2
  CASE=$name
  ((cases++))
  if ((measure)); then
    /usr/bin/time -f '%M' -o "$TMP/rss" timeout -k 5 120 "$ZOO" "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    local kb
    kb=$(tail -n 1 "$TMP/rss")
    echo "$name: peak RSS $((kb / 1024)) MB (bound $limit MB)"
    ((kb <= limit * 1024)) || fail "peak RSS $((kb / 1024)) MB, over $limit MB"
  else
    timeout -k 5 120 "$ZOO" "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
  fi
  ((RC == 0)) || fail "exit $RC (124: timed out): $(head -c 300 "$TMP/err")"
}

# The id of one character, alone.
id_of() { printf '"%s"\n' "$1" >"$TMP/one.jsonl" && "$ZOO" tokenize "$2" --input "$TMP/one.jsonl" | tr -d '[]'; }

# 20 MB of digits: Qwen's pre-tokenizer makes a piece of each (20 M pieces, 20 M ids). Main held
# every piece of every step at once, then the ids as a JSON value: 1.7 GB.
python3 -c "import sys; open(sys.argv[1], 'w').write('\"' + '7' * 20_000_000 + '\"\n')" "$TMP/digits.jsonl"
seven=$(id_of 7 "$M")
peak digits 600 tokenize "$M" --input "$TMP/digits.jsonl"
python3 - "$TMP/out" "$seven" <<'PY' || fail "digits: the ids are not 20 M of the id of '7'"
import sys
line = open(sys.argv[1]).read()
assert line == "[" + ",".join([sys.argv[2]] * 20_000_000) + "]\n"
PY

# The same line where "7" is an added token: a match at every byte. Main held every match and every
# segment of the text at once (48 bytes a byte, and more as the vectors grew).
mkdir "$TMP/seven"
python3 - "$M/tokenizer.json" "$TMP/seven/tokenizer.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["added_tokens"].append({"id": max(d["model"]["vocab"].values()) + len(d["added_tokens"]) + 1, "content": "7",
                          "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True})
json.dump(d, open(sys.argv[2], "w"))
PY
added_seven=$(id_of 7 "$TMP/seven")
[[ $added_seven != "$seven" ]] || fail "seven: '7' is not the added token"
peak seven 600 tokenize "$TMP/seven" --input "$TMP/digits.jsonl"
python3 - "$TMP/out" "$added_seven" <<'PY' || fail "seven: the ids are not 20 M of the added token's"
import sys
assert open(sys.argv[1]).read() == "[" + ",".join([sys.argv[2]] * 20_000_000) + "]\n"
PY

# 20 MB of letters: one piece for BPE (20 M symbols, their merge heap, the ids), 1.3 GB on main.
python3 -c "import sys; open(sys.argv[1], 'w').write('\"' + 'here' * 5_000_000 + '\"\n')" "$TMP/letters.jsonl"
peak letters 700 tokenize "$M" --input "$TMP/letters.jsonl"
cp "$TMP/out" "$TMP/letters.ids"
"$ZOO" tokenize "$M" --input "$TMP/letters.ids" --decode >"$TMP/letters.text" 2>"$TMP/err" || fail "letters --decode: $(cat "$TMP/err")"
cmp -s "$TMP/letters.text" "$TMP/letters.jsonl" || fail "letters: the ids do not decode to the text"
python3 -c "import json, sys; n = len(json.load(open(sys.argv[1]))); assert 1 <= n <= 20_000_000, n" "$TMP/letters.ids" ||
  fail "letters: not 1 to 20 M ids (one a byte at most)"

# 2,000 added tokens of 5,000 random letters (10 MB): main's trie took 1.1 GB and 23 s to build.
python3 - "$M/tokenizer.json" "$TMP/added" <<'PY'
import json, os, random, sys
d = json.load(open(sys.argv[1]))
first = max(d["model"]["vocab"].values()) + len(d["added_tokens"]) + 10
rnd = random.Random(49)
for i in range(2000):
    s = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5000))
    d["added_tokens"].append({"id": first + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True})
os.makedirs(sys.argv[2])
json.dump(d, open(os.path.join(sys.argv[2], "tokenizer.json"), "w"))
t = d["added_tokens"][-7]
# The token in a text, with letters before and after that are not an added token's.
open(os.path.join(sys.argv[2], "in.jsonl"), "w").write(json.dumps("x " + t["content"] + " y") + "\n")
open(os.path.join(sys.argv[2], "want_id"), "w").write(str(t["id"]))
PY
peak added_tokens 450 tokenize "$TMP/added" --input "$TMP/added/in.jsonl"
printf '"x "\n" y"\n' >"$TMP/around.jsonl"
"$ZOO" tokenize "$M" --input "$TMP/around.jsonl" >"$TMP/around.out" 2>&1 || fail "around: $(cat "$TMP/around.out")"
want="[$(head -n 1 "$TMP/around.out" | tr -d '[]'),$(cat "$TMP/added/want_id"),$(tail -n 1 "$TMP/around.out" | tr -d '[]')]"
[[ $(cat "$TMP/out") == "$want" ]] || fail "added_tokens: $(head -c 200 "$TMP/out"), expected $want"

((failures == 0)) && echo "tokenize_memory: $cases cases passed" || { echo "$failures failure(s)"; exit 1; }
