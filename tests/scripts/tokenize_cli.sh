#!/usr/bin/env bash
# `zoo tokenize`: ids equal HF tokenizers' (the committed goldens) for a model directory, a
# tokenizer.json and a model YAML; --decode round-trips; bad input exits 2 naming the file.
# Usage: tokenize_cli.sh SOURCE_DIR BUILD_DIR
set -u
SRC=$(cd "$1" && pwd)
BUILD=$(cd "$2" && pwd)
ZOO=$BUILD/bin/zoo
[[ -x $ZOO ]] || { echo "no zoo binary at $ZOO"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/zoo-tokenize.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

cd "$TMP" || exit 1
cmake -E tar xf "$SRC/tests/fixtures/tokenizer/fixtures.tar.xz" llama3/tokenizer.json corpus.jsonl expected/llama3.jsonl ||
  { echo "cannot unpack the fixtures"; exit 1; }
head -n 60 corpus.jsonl > in.jsonl
# HF's ids, in the compact form zoo prints.
head -n 60 expected/llama3.jsonl | sed -E 's/^\{"ids": \[([^]]*)\].*/[\1]/; s/, /,/g' > want.jsonl
mkdir -p model/ckpt && cp llama3/tokenizer.json model/ && cp llama3/tokenizer.json model/ckpt/
printf 'model:\n  plugin: qwen3\n  checkpoint: ckpt\n' > model/model.yaml

for m in model llama3/tokenizer.json model/model.yaml; do
  "$ZOO" tokenize "$m" --input in.jsonl > out.jsonl 2> err || fail "$m: exit $? $(cat err)"
  cmp -s out.jsonl want.jsonl || fail "$m: ids differ from HF's ($(diff out.jsonl want.jsonl | head -c 300))"
done

# decode(encode(x)) encodes back to the same ids (exact decode strings are checked in test_tokenizer).
"$ZOO" tokenize model --input want.jsonl --decode > text.jsonl 2> err || fail "--decode: exit $? $(cat err)"
[[ $(wc -l < text.jsonl) -eq 60 ]] || fail "--decode printed $(wc -l < text.jsonl) lines, want 60"
"$ZOO" tokenize model --input text.jsonl > again.jsonl 2> err || fail "re-encode: $(cat err)"
cmp -s again.jsonl want.jsonl || fail "encode(decode(ids)) != ids"
echo '"hi"' | "$ZOO" tokenize model --input - --stats > /dev/null 2> err || fail "stdin: $(cat err)"
grep -q "tokenize: 1 lines" err || fail "--stats printed: $(cat err)"

# Bad input: exit 2, one line naming the file.
expect_error() {  # expect_error WHAT-IN-MESSAGE ARGS...
  local want=$1
  shift
  "$ZOO" tokenize "$@" > /dev/null 2> err
  local rc=$?
  [[ $rc -eq 2 ]] || fail "tokenize $*: exit $rc, want 2"
  grep -qF -- "$want" err || fail "tokenize $*: stderr does not name '$want': $(cat err)"
}
mkdir empty
expect_error "empty" empty --input in.jsonl
echo '{"not": "a string"}' > bad.jsonl
expect_error "bad.jsonl:1" model --input bad.jsonl
echo 'not json' > bad2.jsonl
expect_error "bad2.jsonl:1" model --input bad2.jsonl
echo '["x"]' > bad3.jsonl
expect_error "bad3.jsonl:1" model --input bad3.jsonl --decode
expect_error "nope.jsonl" model --input nope.jsonl
printf '{"model": {"type": "Unigram", "vocab": []}}' > unigram.json
expect_error "Unigram" unigram.json --input in.jsonl
# A regex that backtracks past the text's budget: the error names the input line and the tokenizer.
printf '%s' '{"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(?:a+)+b|."}, "behavior": "Isolated",
  "invert": false}, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}}' > backtrack.json
printf '"ab"\n"%s"\n' "$(printf 'a%.0s' {1..40})" > backtrack.jsonl
expect_error "backtrack.jsonl:2: backtrack.json: pre_tokenizer Split: regex /(?:a+)+b|./" backtrack.json --input backtrack.jsonl

# Not a regular file: one line naming it, never a hang (before: a FIFO blocked forever, /dev/zero
# grew without bound, a directory exited 0 with no output). Standard input stays, capped.
mkfifo fifo.jsonl
mkdir dir.jsonl
for bad in fifo.jsonl dir.jsonl /dev/zero; do
  timeout -k 5 30 "$ZOO" tokenize model --input "$bad" > out 2> err < /dev/null
  rc=$?
  [[ $rc -eq 2 ]] || fail "--input $bad: exit $rc, expected 2 (124: hung)"
  [[ $(wc -l < err) -eq 1 ]] && grep -qF -- "$bad: " err && grep -qF -- "(--input)" err || fail "--input $bad: $(head -c 300 err)"
done
head -n 3 in.jsonl | "$ZOO" tokenize model --input - > out 2> err || fail "--input -: exit $? $(cat err)"
[[ $(wc -l < out) -eq 3 ]] || fail "--input -: $(wc -l < out) lines, expected 3"
yes '"a"' | timeout -k 5 60 "$ZOO" tokenize model --input - > /dev/null 2> err
rc=$?
[[ $rc -eq 2 ]] && grep -qF "<stdin>: more than the 256 MiB limit" err || fail "endless stdin: exit $rc: $(head -c 300 err)"

# A syntax error says where, never what was read: a secret pasted into the input stays unprinted.
printf '"ok"\n"password=hunter2-SECRET\n' > secret.jsonl
expect_error "secret.jsonl:2: not JSON (syntax error at byte 25 of the line)" model --input secret.jsonl
grep -q "SECRET\|hunter2\|password" err && fail "the syntax error echoes the input: $(cat err)"
[[ $(wc -l < err) -eq 1 ]] || fail "syntax error: not one line: $(cat err)"
# --repeat keeps one timing a pass: 2000000000 is refused by name (it allocated 16 GB; the address-space
# cap keeps a regression from eating this machine's memory). An ASan build cannot run under that cap
# (its shadow memory alone reserves terabytes of address space); its allocator refuses 16 GB itself.
cap=4000000
ldd "$ZOO" 2>/dev/null | grep -q libasan && cap=unlimited
(ulimit -v "$cap"; "$ZOO" tokenize model --input in.jsonl --repeat 2000000000 > /dev/null 2> err)
rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--repeat" err || fail "--repeat 2000000000: exit $rc: $(cat err)"

[[ $failures -eq 0 ]] && echo "tokenize_cli: all passed" || { echo "$failures failure(s)"; exit 1; }
