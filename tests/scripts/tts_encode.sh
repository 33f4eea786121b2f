#!/usr/bin/env bash
# `zoo tts --encode` and voice cloning from a sound file (`--ref-audio`) on the tiny codec-encoder
# fixture: the codes equal transformers' (the fixture's codes.json, from its encode goldens);
# cloning in one command gives the same codes and bytes as encoding first and passing --ref-codes;
# other rates are resampled (and said), channels downmixed; bad audio (empty, NaN, too long,
# unreadable) is a one-line input error naming the file, exit 2. `zoo bench --encode` times it.
# A HuBERT of 2 heads of 16 encodes transformers' codes with its codec_config.json and is refused
# naming the head count without one.
# Usage: tts_encode.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-tts-encode "$@"
CFG=$SRC/configs/higgs-tiny-codec-enc.yaml
F=$FIX/higgs-tiny-codec-enc

run "encode" tts "$CFG" --encode "$F/voice.wav" --codes-out "$TMP/voice.json"
rc 0
has err "24000 Hz as is"
python3 - "$TMP/voice.json" "$F/codes.json" <<'PY' || fail "encoded codes differ from transformers'"
import json, sys
a, b = (json.load(open(p))["codes"] for p in sys.argv[1:])
assert a == b, (a, b)
PY

# Cloning in one command = encode, then --ref-codes (same seed): same codes, same sound file.
common=(--text "hello there" --ref-text "hi you" --seed 3 --max-frames 20 -q)
run "clone ref-audio" tts "$CFG" "${common[@]}" --ref-audio "$F/voice.wav" --out "$TMP/a.wav" --codes-out "$TMP/a.json"
rc 0
run "clone ref-codes" tts "$CFG" "${common[@]}" --ref-codes "$TMP/voice.json" --out "$TMP/b.wav" --codes-out "$TMP/b.json"
rc 0
cmp -s "$TMP/a.json" "$TMP/b.json" || fail "--ref-audio and --ref-codes gave different codes"
cmp -s "$TMP/a.wav" "$TMP/b.wav" || fail "--ref-audio and --ref-codes gave different sound files"

# Other rates and channel counts: 16 kHz stereo, 48 kHz FLAC-free WAV; said on stderr.
python3 - "$TMP" <<'PY'
import math, struct, sys, wave
d = sys.argv[1]
def write(name, rate, channels, seconds, value=None):
    n = int(rate * seconds)
    with wave.open(f"{d}/{name}", "wb") as w:
        w.setnchannels(channels); w.setsampwidth(2); w.setframerate(rate)
        frames = bytearray()
        for i in range(n):
            v = int(8000 * math.sin(2 * math.pi * 220 * i / rate)) if value is None else value
            frames += struct.pack("<h", v) * channels
        w.writeframes(bytes(frames))
write("stereo16k.wav", 16000, 2, 0.3)
write("48k.wav", 48000, 1, 0.3)
write("empty.wav", 24000, 1, 0)
write("long.wav", 8000, 1, 101, value=0)
# a float WAV holding a NaN (IEEE float format, tag 3)
n = 4800
data = struct.pack("<f", 0.1) * 100 + struct.pack("<I", 0x7FC00000) + struct.pack("<f", 0.1) * (n - 101)
fmt = struct.pack("<HHIIHH", 3, 1, 24000, 24000 * 4, 4, 32)
riff = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
open(f"{d}/nan.wav", "wb").write(b"RIFF" + struct.pack("<I", len(riff)) + riff)
open(f"{d}/text.wav", "w").write("not a sound file\n")
PY
run "16k stereo" tts "$CFG" --encode "$TMP/stereo16k.wav" --codes-out "$TMP/s.json"
rc 0
has err "2 channels downmixed to mono, resampled 16000 -> 24000 Hz by libsoxr"
run "48k" tts "$CFG" --encode "$TMP/48k.wav" --codes-out "$TMP/48.json"
rc 0
has err "resampled 48000 -> 24000 Hz by libsoxr"
python3 - "$TMP/s.json" "$TMP/48.json" <<'PY' || fail "resampled inputs: unexpected frame counts"
import json, sys
for p in sys.argv[1:]:
    c = json.load(open(p))["codes"]
    assert len(c) == 8 and all(len(r) == 4 and all(0 <= v < 32 for v in r) for r in c), (p, c)
PY

# Bad audio: exit 2, one line naming the file.
bad() {  # bad NAME FILE TEXT
  run "$1" tts "$CFG" --encode "$2" --codes-out "$TMP/bad.json"
  rc 2
  has err "$2"
  has err "$3"
  (($(wc -l <"$TMP/err") == 1)) || fail "more than one line: $(cat "$TMP/err")"
  [[ -e $TMP/bad.json ]] && fail "codes written for bad audio"
}
bad "empty" "$TMP/empty.wav" "no samples"
bad "nan" "$TMP/nan.wav" "not a finite number"
bad "too long" "$TMP/long.wav" "at most 100 s"
bad "unreadable" "$TMP/text.wav" "cannot read as a sound file"
# With --ref-audio the same checks run before the model loads.
run "clone nan" tts "$CFG" "${common[@]}" --ref-audio "$TMP/nan.wav" --out "$TMP/c.wav"
rc 2
has err "--ref-audio $TMP/nan.wav"

# Usage: --encode needs --codes-out, excludes --text; --ref-audio excludes --ref-codes.
run "encode without codes-out" tts "$CFG" --encode "$F/voice.wav"
rc 2
run "encode with text" tts "$CFG" --encode "$F/voice.wav" --text hi --codes-out "$TMP/x.json"
rc 2
has err "excludes"
run "ref-audio with ref-codes" tts "$CFG" --text hi --ref-audio "$F/voice.wav" --ref-codes "$TMP/voice.json" --codes-out "$TMP/x.json"
rc 2
has err "excludes"
# A checkpoint without an encoder says so.
run "no encoder" tts "$SRC/configs/higgs-tiny.yaml" --encode "$F/voice.wav" --codes-out "$TMP/x.json"
rc 2
has err "no waveform-to-codes encoder"

# HuBERT's head count is in no tensor shape: the codec of 2 heads of 16 (higgs-tiny-codec-heads)
# encodes transformers' codes with its codec_config.json, and without one it is refused naming
# the value (exit 2, one line).
H=$FIX/higgs-tiny-codec-heads
printf 'model:\n  plugin: higgs_audio\n  checkpoint: %s\n  device: cpu\n' "$H" >"$TMP/heads.yaml"
run "heads: encode" tts "$TMP/heads.yaml" --encode "$H/voice.wav" --codes-out "$TMP/heads.json"
rc 0
python3 - "$TMP/heads.json" "$H/codes.json" <<'PY' || fail "2 x 16 heads: encoded codes differ from transformers'"
import json, sys
a, b = (json.load(open(p))["codes"] for p in sys.argv[1:])
assert a == b, (a, b)
PY
mkdir -p "$TMP/noconfig"
cp "$H/config.json" "$H/model.safetensors" "$H/tokenizer.json" "$TMP/noconfig/"
printf 'model:\n  plugin: higgs_audio\n  checkpoint: %s\n  device: cpu\n' "$TMP/noconfig" >"$TMP/noconfig.yaml"
run "heads: no codec_config.json" tts "$TMP/noconfig.yaml" --encode "$H/voice.wav" --codes-out "$TMP/nc.json"
rc 2
has err "num_attention_heads is in no tensor shape"
has err "place codec_config.json"
(($(wc -l <"$TMP/err") == 1)) || fail "more than one line: $(cat "$TMP/err")"
[[ -e $TMP/nc.json ]] && fail "codes written without a codec config"

# `zoo bench --encode`: the same encoder timed; its frames and codebooks are the encode's, the
# repeats agreed, the input is described; the LM's phases are refused beside it; bad audio as above.
run "bench encode" bench "$CFG" --encode "$F/voice.wav" -r 2 --json -q
rc 0
python3 - "$TMP/out" "$F/codes.json" <<'PY' || fail "bench --encode JSON: $(head -c 600 "$TMP/out")"
import json, sys
r = json.load(open(sys.argv[1]))
codes = json.load(open(sys.argv[2]))["codes"]
e = r["encode"]
assert e["frames"] == len(codes) and e["codebooks"] == len(codes[0]), (e, len(codes), len(codes[0]))
assert e["codes_equal_across_repeats"] is True and r["repeat"] == 2
assert 0 < e["seconds_spread"]["min"] <= e["seconds"] <= e["seconds_spread"]["max"], e
assert abs(e["real_time_factor"] - r["input"]["seconds"] / e["seconds"]) < 1e-6 * e["real_time_factor"], e
assert r["input"]["samples"] > 0 and r["zoo"]["commit"] and r["threads"] >= 1
PY
run "bench encode table" bench "$CFG" --encode "$F/voice.wav" -r 1
rc 0
has out "x real time"
has out "codes equal across 1 repeats"
run "bench encode with prompt-len" bench "$CFG" --encode "$F/voice.wav" -p 16
rc 2
has err "excludes"
run "bench encode nan" bench "$CFG" --encode "$TMP/nan.wav"
rc 2
has err "--encode $TMP/nan.wav: sample"
run "bench encode no encoder" bench "$SRC/configs/higgs-tiny.yaml" --encode "$F/voice.wav"
rc 2
has err "no waveform-to-codes encoder"

echo "tts_encode: $cases cases, $failures failures"
((failures == 0))
