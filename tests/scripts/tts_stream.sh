#!/usr/bin/env bash
# `zoo tts --stream`: the waveform as raw 16-bit PCM on stdout, decoded in chunks while the model
# generates (zoo/code_stream.hpp). On the tiny Higgs fixture with a codec: the stream is the WAV's
# samples, the first chunk goes out before the last frame exists, the same frames streamed from a
# codes file give the same bytes, and the usage errors.
# Usage: tts_stream.sh SOURCE_DIR BUILD_DIR
set -u
SRC=$(cd "$1" && pwd)
BUILD=$(cd "$2" && pwd)
ZOO=$BUILD/bin/zoo
[[ -x $ZOO ]] || { echo "no zoo binary at $ZOO"; exit 1; }
M=$SRC/tests/fixtures/higgs-tiny-codec
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }
TEXT="Hello there, this is a streamed sentence."

"$ZOO" tts "$M" --text "$TEXT" --seed 2 --max-frames 300 --stream > "$TMP/a.pcm" 2> "$TMP/a.err" || fail "stream: $(cat "$TMP/a.err")"
"$ZOO" tts "$M" --text "$TEXT" --seed 2 --max-frames 300 -q --out "$TMP/a.wav" --codes-out "$TMP/a.json" || fail "wav"
"$ZOO" tts "$M" --codes "$TMP/a.json" --stream -q > "$TMP/b.pcm" || fail "stream from --codes"
# The chunks follow one schedule whatever the frames' arrival: the same bytes.
cmp -s "$TMP/a.pcm" "$TMP/b.pcm" || fail "streamed while generating != streamed from the same frames"
# Streaming really overlaps generation: the first chunk went out when fewer frames existed than in the end.
line=$(grep "tts: streamed" "$TMP/a.err")
[[ $line =~ streamed\ ([0-9]+)\ frames.*when\ ([0-9]+)\ frames\ existed ]] || fail "no stream report: $line"
(( ${BASH_REMATCH[2]} < ${BASH_REMATCH[1]} )) || fail "the first chunk waited for every frame: $line"
python3 - "$TMP" <<'PY' || status=1
import struct, sys, wave
d = sys.argv[1]
w = wave.open(f"{d}/a.wav")
assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 24000)
want = struct.unpack(f"<{w.getnframes()}h", w.readframes(w.getnframes()))
raw = open(f"{d}/a.pcm", "rb").read()
got = struct.unpack(f"<{len(raw) // 2}h", raw)
assert len(got) == len(want) > 0, (len(got), len(want))
diff = [abs(a - b) for a, b in zip(got, want)]
# The WAV decodes in other windows (pieces of 500 frames). This random codec's output is far past
# full scale (~99% of the samples clip), so the float32 noise of another window, amplified with it,
# reaches 2 LSB on some of the rest; the clipped samples must be equal. (The 1-LSB, 1e-5 relative L2
# bound is test_higgs's "streamed decode equals the whole decode", on float samples.)
assert max(diff) <= 2, max(diff)
assert all(a == b for a, b in zip(got, want) if abs(b) >= 32767), "a clipped sample differs"
PY
# Usage errors: exit 2, one line.
out=$("$ZOO" tts "$M" --text "$TEXT" --stream --out "$TMP/x.wav" 2>&1 > /dev/null)
[[ $? == 2 && $out == *"--stream"* && $out == *"--out"* ]] || fail "--stream with --out: $out"
out=$("$ZOO" tts "$M" --codes "$TMP/a.json" 2>&1 > /dev/null)
[[ $? == 2 && $out == *"--stream"* ]] || fail "--codes without an output: $out"
[[ $status == 0 ]] && echo "tts_stream: all checks passed"
exit $status
