#!/usr/bin/env bash
# `zoo tts --text` on the tiny Higgs fixture (its tokenizer.json, random weights): codes written
# with --codes-out, same seed same file, another seed another file, JSON and safetensors agree,
# voice cloning from --ref-codes, and the input errors of the text path.
# Usage: tts_text_codes.sh SOURCE_DIR BUILD_DIR
set -u
SRC=$(cd "$1" && pwd)
BUILD=$(cd "$2" && pwd)
ZOO=$BUILD/bin/zoo
[[ -x $ZOO ]] || { echo "no zoo binary at $ZOO"; exit 1; }
CFG=$SRC/configs/higgs-tiny.yaml
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }

run() { "$ZOO" tts "$CFG" -q "$@"; }

# Usage errors (exit 2, one line naming the problem).
out=$(run --text hi --ref-text words --codes-out "$TMP/x.json" 2>&1)
[[ $? == 2 && $out == *"--ref-codes"* ]] || fail "--ref-text without --ref-codes: $out"
out=$(run --text hi --out "$TMP/x.wav" 2>&1)
[[ $? == 2 && $out == *"decoder"* ]] || fail "--out on a checkpoint without a codec: $out"

run --text "Hello there, tiny speech!" --max-frames 40 --seed 3 --codes-out "$TMP/a.json" || fail "tts a"
run --text "Hello there, tiny speech!" --max-frames 40 --seed 3 --codes-out "$TMP/b.json" || fail "tts b"
run --text "Hello there, tiny speech!" --max-frames 40 --seed 4 --codes-out "$TMP/c.json" || fail "tts c"
run --text "Hello there, tiny speech!" --max-frames 40 --seed 3 --codes-out "$TMP/a.safetensors" || fail "tts st"
cmp -s "$TMP/a.json" "$TMP/b.json" || fail "same seed, different codes"
cmp -s "$TMP/a.json" "$TMP/c.json" && fail "another seed, same codes"
python3 - "$TMP" <<'PY' || status=1
import json, struct, sys
d = sys.argv[1]
a = json.load(open(f"{d}/a.json"))["codes"]  # {"codes": [[...], ...]} (zoo/code_frames.hpp)
# 40 decode steps at most, K = 4 codebooks: at most 37 frames, at least 4 (EOC after the window).
assert 4 <= len(a) <= 37 and all(len(r) == 4 and all(0 <= c < 64 for c in r) for r in a), a
raw = open(f"{d}/a.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
assert head["codes"]["dtype"] == "I64" and head["codes"]["shape"] == [len(a), 4], head
vals = struct.unpack(f"<{len(a) * 4}q", raw[8 + n:8 + n + len(a) * 32])
assert [list(vals[i:i + 4]) for i in range(0, len(vals), 4)] == a
PY
# The frames just made decode to a sound file of samples-per-frame x frames (the codec fixture: 30
# samples per frame), the same file twice. The codec has 16 codes per codebook, this model 64: its
# frames as they are hold codes the codec does not have, an error (they were decoded as code 0);
# folded into 16 they decode.
CODEC=$SRC/configs/higgs-tiny-codec.yaml
"$ZOO" tts "$CODEC" -q --codes "$TMP/a.json" --out "$TMP/a.wav" 2>"$TMP/err" && fail "64-code frames decoded by a 16-code codec"
grep -q "a.json: codes\[[0-9]*\]\[[0-9]*\] = [0-9]* is outside \[0, 16) and not BOC (16) or EOC (17)" "$TMP/err" ||
  fail "64-code frames: $(cat "$TMP/err")"
for f in a b; do
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d["codes"] = [[c % 16 for c in r] for r in d["codes"]]; json.dump(d, open(sys.argv[1], "w"))' "$TMP/$f.json"
done
"$ZOO" tts "$CODEC" -q --codes "$TMP/a.json" --out "$TMP/a.wav" 2>/dev/null || fail "decode a.json"
"$ZOO" tts "$CODEC" -q --codes "$TMP/b.json" --out "$TMP/b.wav" 2>/dev/null || fail "decode b.json"
cmp -s "$TMP/a.wav" "$TMP/b.wav" || fail "same codes, different sound files"
python3 - "$TMP" <<'PY' || status=1
import json, sys, wave
d = sys.argv[1]
frames = len(json.load(open(f"{d}/a.json"))["codes"])
with wave.open(f"{d}/a.wav") as w:
    assert w.getframerate() == 24000 and w.getnchannels() == 1, (w.getframerate(), w.getnchannels())
    assert w.getnframes() == 30 * frames, (w.getnframes(), frames)
PY
# Voice cloning from the frames just made, with a transcript.
run --text "Again." --ref-codes "$TMP/a.json" --ref-text "Hello there." --max-frames 20 --codes-out "$TMP/d.json" \
  || fail "tts with --ref-codes"
[[ -s $TMP/d.json ]] || fail "no codes from the clone run"

# Errors: exit 2 with one line naming the problem.
expect_error() {
  local want=$1
  shift
  local out
  out=$(run "$@" 2>&1 >/dev/null)
  local rc=$?
  [[ $rc == 2 ]] || fail "exit $rc (want 2) for: $*"
  [[ $out == *"$want"* ]] || fail "message '$out' lacks '$want' for: $*"
}
echo '[[1, 2, 3]]' > "$TMP/short.json"
echo '[[1, 2, 3, 64]]' > "$TMP/big.json"
expect_error "short.json: frame 0 has 3 codes" --text hi --ref-codes "$TMP/short.json" --codes-out "$TMP/x.json"
expect_error "big.json: codes[0][3] = 64" --text hi --ref-codes "$TMP/big.json" --codes-out "$TMP/x.json"
expect_error "no.json: no such file" --text hi --ref-codes "$TMP/no.json" --codes-out "$TMP/x.json"
expect_error "raise --max-frames" --text hi --max-frames 2 --codes-out "$TMP/x.json"
expect_error "exceed the context" --text hi --max-frames 5000 --codes-out "$TMP/x.json"
# Text to a sound file in one command (language model + codec): a synthetic checkpoint with the
# codec fixture's shapes (30 samples per frame) and a text vocabulary the tiny tokenizer fits.
python3 - "$SRC/tests/fixtures/higgs-tiny-codec/config.json" "$TMP/tc-config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["text_config"]["vocab_size"] = 320
json.dump(c, open(sys.argv[2], "w"))
PY
"$ZOO" synth --config "$TMP/tc-config.json" --extra-tensors "$SRC/tests/fixtures/higgs-tiny-codec/codec-tensors.json" \
  --out "$TMP/tc" -q || fail "synth of the text+codec checkpoint"
cp "$SRC/tests/fixtures/higgs-tiny/tokenizer.json" "$TMP/tc/"
# The codec's sample rate is in no tensor shape: its config goes beside the checkpoint.
cp "$SRC/tests/fixtures/higgs-tiny-codec/codec_config.json" "$TMP/tc/"
"$ZOO" tts "$TMP/tc" --text "Hello there" --temperature 0 --max-frames 13 --out "$TMP/t.wav" 2>"$TMP/t.err" ||
  fail "text to sound: $(cat "$TMP/t.err")"
grep -q "text to sound in .* real time; loading not included" "$TMP/t.err" || fail "no end-to-end line: $(cat "$TMP/t.err")"
frames=$(grep -o "^tts: [0-9]* frames ->" "$TMP/t.err" | grep -o "[0-9]*")
python3 - "$TMP/t.wav" "${frames:-0}" <<'PY' || fail "text to sound: the sound file does not hold 30 samples per frame"
import sys, wave
with wave.open(sys.argv[1]) as w:
    assert int(sys.argv[2]) >= 1 and w.getnframes() == 30 * int(sys.argv[2]), (w.getnframes(), sys.argv[2])
PY
exit $status
