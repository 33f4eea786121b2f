#!/usr/bin/env bash
# `zoo tts MODEL --codes FILE --out F`: decodes code frames (JSON object, plain JSON array,
# safetensors I32) to WAV (16-bit PCM) or FLAC of exactly samples_per_frame x frames samples, the
# same bytes every run; bad inputs exit 2 with one line naming the file.
# Usage: tts_codes.sh SOURCE_DIR BUILD_DIR
set -u
SRC=$(cd "$1" && pwd)
BUILD=$(cd "$2" && pwd)
ZOO=$BUILD/bin/zoo
FIX=$SRC/tests/fixtures/higgs-tiny-codec
CFG=$SRC/configs/higgs-tiny-codec.yaml
[[ -x $ZOO ]] || { echo "no zoo binary at $ZOO"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/zoo-tts.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }

# 7 frames x 30 samples, mono 16-bit: a 44-byte RIFF header + 420 data bytes.
"$ZOO" tts "$CFG" --codes "$FIX/codes.json" --out "$TMP/a.wav" 2>"$TMP/err" || fail "json object: rc $? $(cat "$TMP/err")"
grep -q "7 frames -> 210 samples" "$TMP/err" || fail "progress line: $(cat "$TMP/err")"
[[ $(head -c 4 "$TMP/a.wav") == RIFF ]] || fail "a.wav is not RIFF"
size=$(stat -c %s "$TMP/a.wav")
[[ $size -eq 464 ]] || fail "a.wav has $size bytes, expected 464 (44 + 210 x 2)"
ls -A "$TMP" | grep -q '\.tmp$' && fail "temporary file left behind"
# The tiny codec's random weights overshoot full scale: the saturated samples are counted, on
# one line, with --quiet too (a fault of the output, not progress).
grep -qE '^tts: warning: [1-9][0-9]* of 210 samples were past full scale \[-1, 1\] and clipped -> ' "$TMP/err" ||
  fail "no clipping count: $(cat "$TMP/err")"
"$ZOO" tts "$CFG" --codes "$FIX/codes.json" --out "$TMP/q.wav" -q 2>"$TMP/err" || fail "-q: rc $?"
[[ $(wc -l <"$TMP/err") -eq 1 ]] && grep -q 'samples were past full scale' "$TMP/err" ||
  fail "-q: not just the clipping line: $(cat "$TMP/err")"

# Same codes as a plain array: same file, byte for byte (decoding is deterministic).
python_free_array=$(sed -e 's/^{"codes": //' -e 's/}$//' "$FIX/codes.json")
echo "$python_free_array" >"$TMP/plain.json"
"$ZOO" tts "$CFG" --codes "$TMP/plain.json" --out "$TMP/b.wav" -q || fail "plain array: rc $?"
cmp -s "$TMP/a.wav" "$TMP/b.wav" || fail "plain array decodes differently"

# Longer than one decode piece (500 frames): decoded in pieces with context, still exactly
# 30 samples a frame, and the same bytes every run.
awk 'BEGIN { printf "{\"codes\": ["; for (t = 0; t < 1237; t++) printf "%s[%d, %d, %d, %d]", (t ? ", " : ""), t % 16, (t * 7) % 16, (t * 5 + 3) % 18, (t / 3) % 16; print "]}" }' >"$TMP/long.json"
"$ZOO" tts "$CFG" --codes "$TMP/long.json" --out "$TMP/long.wav" 2>"$TMP/err" || fail "long codes: rc $? $(cat "$TMP/err")"
grep -q "1237 frames -> 37110 samples" "$TMP/err" || fail "long codes: $(cat "$TMP/err")"
[[ $(stat -c %s "$TMP/long.wav") -eq $((44 + 37110 * 2)) ]] || fail "long.wav has $(stat -c %s "$TMP/long.wav") bytes"
"$ZOO" tts "$CFG" --codes "$TMP/long.json" --out "$TMP/long2.wav" -q || fail "long codes again: rc $?"
cmp -s "$TMP/long.wav" "$TMP/long2.wav" || fail "long codes decode differently run to run"

# safetensors, I32 [2, 4]: header padded to 8 bytes, then 8 little-endian int32.
header='{"codes":{"dtype":"I32","shape":[2,4],"data_offsets":[0,32]}}'
while (( ${#header} % 8 )); do header+=" "; done
{
  printf "\\x$(printf %02x ${#header})\\x00\\x00\\x00\\x00\\x00\\x00\\x00"
  printf '%s' "$header"
  for v in 1 2 3 4 16 17 0 15; do printf "\\x$(printf %02x "$v")\\x00\\x00\\x00"; done
} >"$TMP/codes.safetensors"
"$ZOO" tts "$CFG" --codes "$TMP/codes.safetensors" --out "$TMP/c.flac" -q || fail "safetensors -> flac: rc $?"
[[ $(head -c 4 "$TMP/c.flac") == fLaC ]] || fail "c.flac is not FLAC"

# expect2 PATTERN ARGS...: exit 2, one line on stderr holding PATTERN.
expect2() {
  local pattern=$1
  shift
  "$ZOO" tts "$@" >/dev/null 2>"$TMP/err"
  local rc=$?
  [[ $rc -eq 2 ]] || fail "tts $*: rc $rc, expected 2"
  [[ $(wc -l <"$TMP/err") -eq 1 ]] || fail "tts $*: not one line: $(cat "$TMP/err")"
  grep -qF -- "$pattern" "$TMP/err" || fail "tts $*: no '$pattern' in: $(cat "$TMP/err")"
}
expect2 "$TMP/missing.json: no such file" "$CFG" --codes "$TMP/missing.json" --out "$TMP/x.wav"
echo '{"codes": [[1, 2, 3]]}' >"$TMP/three.json"
expect2 "$TMP/three.json: frames have 3 codes, expected 4" "$CFG" --codes "$TMP/three.json" --out "$TMP/x.wav"
echo '{"codes": [[1, 2, 3, -4]]}' >"$TMP/neg.json"
expect2 "$TMP/neg.json: codes[0][3] = -4 is negative" "$CFG" --codes "$TMP/neg.json" --out "$TMP/x.wav"
# BOC (16) and EOC (17) decode as code 0; anything past them is no code, never silently 0.
echo '{"codes": [[1, 2, 16, 18]]}' >"$TMP/past.json"
expect2 "$TMP/past.json: codes[0][3] = 18 is outside [0, 16) and not BOC (16) or EOC (17)" "$CFG" --codes "$TMP/past.json" --out "$TMP/x.wav"
echo '{"codes": []}' >"$TMP/empty.json"
expect2 "$TMP/empty.json: no code frames" "$CFG" --codes "$TMP/empty.json" --out "$TMP/x.wav"
expect2 "holds no codec decoder" "$SRC/configs/higgs-tiny.yaml" --codes "$FIX/codes.json" --out "$TMP/x.wav"
expect2 "no-such-dir/x.wav" "$CFG" --codes "$FIX/codes.json" --out "$TMP/no-such-dir/x.wav"
[[ -e $TMP/x.wav ]] && fail "a failed run left x.wav"
# Outputs onto the run's own inputs are refused, and the input is left as it was. Before: exit 0
# and the input replaced by a WAV file (--codes, and every file of the checkpoint).
cp -r "$FIX" "$TMP/ck"
sed "s#^\(  checkpoint:\).*#\1 ck#" "$CFG" >"$TMP/ck.yaml"
cp "$FIX/codes.json" "$TMP/in.json"
for target in "$TMP/in.json" "$TMP/ck/model.safetensors" "$TMP/ck/config.json" "$TMP/ck/tokenizer.json" "$TMP/ck.yaml"; do
  cp "$target" "$TMP/saved"
  expect2 "is the same file as the" "$TMP/ck.yaml" --codes "$TMP/in.json" --out "$target"
  cmp -s "$target" "$TMP/saved" || { fail "--out $target: the input was modified"; cp "$TMP/saved" "$target"; }
  if [[ $target != "$TMP/in.json" ]]; then
    expect2 "is the same file as the" "$TMP/ck.yaml" --text hi --max-frames 8 --codes-out "$target"
    cmp -s "$target" "$TMP/saved" || { fail "--codes-out $target: the input was modified"; cp "$TMP/saved" "$target"; }
  fi
done
cp "$FIX/codes.json" "$TMP/ref.json"
cp "$TMP/ref.json" "$TMP/saved"
expect2 "is the same file as the code frames (--ref-codes)" "$TMP/ck.yaml" --text hi --ref-codes "$TMP/ref.json" --max-frames 8 --out "$TMP/ref.json"
expect2 "is the same file as the code frames (--ref-codes)" "$TMP/ck.yaml" --text hi --ref-codes "$TMP/ref.json" --max-frames 8 --codes-out "$TMP/ref.json"
cmp -s "$TMP/ref.json" "$TMP/saved" || fail "--ref-codes: the input was modified"
# Both outputs onto one file (before: exit 0, the codes overwritten by the sound).
expect2 "one file cannot hold both" "$TMP/ck.yaml" --text hi --max-frames 8 --codes-out "$TMP/o.wav" --out "$TMP/o.wav"
[[ -e $TMP/o.wav ]] && fail "refused run left o.wav"

# The format the extension names (before: x.mp3 and x.ogg held RIFF bytes); an unknown one is an
# error naming the file, and writes nothing.
"$ZOO" tts "$CFG" --codes "$FIX/codes.json" --out "$TMP/a.mp3" -q || fail "mp3: rc $?"
[[ $(head -c 4 "$TMP/a.mp3") == RIFF ]] && fail "a.mp3 holds WAV bytes"
"$ZOO" tts "$CFG" --codes "$FIX/codes.json" --out "$TMP/a.ogg" -q || fail "ogg: rc $?"
[[ $(head -c 4 "$TMP/a.ogg") == OggS ]] || fail "a.ogg is not an Ogg file"
"$ZOO" tts "$CFG" --codes "$FIX/codes.json" --out "$TMP/a.opus" -q || fail "opus: rc $?"
[[ $(head -c 4 "$TMP/a.opus") == OggS ]] || fail "a.opus is not an Ogg file"
expect2 "--out $TMP/a.aiff: unknown sound file extension '.aiff'" "$CFG" --codes "$FIX/codes.json" --out "$TMP/a.aiff"
[[ -e $TMP/a.aiff ]] && fail "an unknown extension left a.aiff"

# A replaced file keeps its mode (before: 0600 became 0644). A symlink planted at a temporary
# name is covered by tests/framework/sound/test_sound_file.cpp, which knows the writer's pid.
"$ZOO" tts "$CFG" --codes "$FIX/codes.json" --out "$TMP/m.wav" -q
chmod 600 "$TMP/m.wav"
"$ZOO" tts "$CFG" --codes "$FIX/codes.json" --out "$TMP/m.wav" -q || fail "rewrite m.wav: rc $?"
[[ $(stat -c %a "$TMP/m.wav") == 600 ]] || fail "m.wav mode $(stat -c %a "$TMP/m.wav"), expected 600"
# A FIFO (and so /dev/null or /dev/stdout) is written into, never replaced.
mkfifo "$TMP/pipe"
timeout 30 cat "$TMP/pipe" >"$TMP/piped" &
"$ZOO" tts "$CFG" --codes "$FIX/codes.json" --out "$TMP/pipe" -q || fail "FIFO out: rc $?"
wait
[[ -p $TMP/pipe ]] || fail "the FIFO was replaced"
[[ $(stat -c %s "$TMP/piped") -eq 464 ]] || fail "the FIFO got $(stat -c %s "$TMP/piped") bytes, expected 464"
# A device: a private node like /dev/null (as root a broken writer would replace the real one,
# as the old one did), or /dev/null itself where mknod is not allowed, which a broken writer
# cannot replace without root.
if mknod "$TMP/null" c 1 3 2>/dev/null; then dev=$TMP/null; else dev=/dev/null; fi
"$ZOO" tts "$CFG" --codes "$FIX/codes.json" --out "$dev" -q || fail "--out $dev: rc $?"
[[ -c $dev ]] || fail "$dev is no longer a device"
# Standard output as a pipe (/dev/stdout resolves to "pipe:[N]"; /proc/self/fd/1 is the same
# link and cannot be renamed over, so a broken writer cannot damage /dev).
[[ $("$ZOO" tts "$CFG" --codes "$FIX/codes.json" --out /proc/self/fd/1 -q | head -c 4) == RIFF ]] || fail "--out /proc/self/fd/1 (a pipe)"
exit $status
