#!/usr/bin/env bash
# Higgs text to speech end to end (issue 11's last number), Zoo and transformers side by side in one
# run: `zoo tts --text ... --out x.wav` (prompt, decode loop with the audio head and row embeddings
# on the device, codec) on a synthetic checkpoint at a real shape, and bench_higgs_transformers.py
# (the same loop from transformers parts, compiled) at the same prompt length and audio length.
#
#   tools/bench/tts_e2e.sh OUTDIR
#
# Zoo's time is what `zoo tts` reports as "text to sound in S s" (prompt, decode loop and codec;
# the codec's own share from its "tts: N frames -> ... in S s" line): the model load is not in it,
# as it is not in the transformers number. Both decode greedily (random weights rarely emit the end-of-codes
# code, so both run the full length). The synthetic checkpoint has no tokenizer.json: the tiny
# fixture's is copied beside it (the prompt's special tokens are looked up by string); TEXT is 54
# of its tokens (~50 text tokens, as in the issue).
#
# Environment (defaults in brackets):
#   ZOO [build-gpu/bin/zoo]  PYTHON [python3]  DEVICE [cuda]  REPEAT [3]
#   SHAPE [configs/shapes/higgs-v3-4b.json]  CODEC [configs/shapes/higgs-v3-4b-codec-tensors.json]
#   SYNTH_DIR [/tmp/zoo-synth/tts-e2e]  SECONDS_OF_AUDIO [10]  TRANSFORMERS [1: also run the baseline]
#   BASELINE_ARGS [] extra bench_higgs_transformers.py arguments (--tiny --no-compile: CPU dry runs)
set -uo pipefail
out=${1:?usage: tts_e2e.sh OUTDIR}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ZOO=${ZOO:-build-gpu/bin/zoo}
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
REPEAT=${REPEAT:-3}
SHAPE=${SHAPE:-$src/configs/shapes/higgs-v3-4b.json}
CODEC=${CODEC:-$src/configs/shapes/higgs-v3-4b-codec-tensors.json}
SYNTH_DIR=${SYNTH_DIR:-/tmp/zoo-synth/tts-e2e}
SECONDS_OF_AUDIO=${SECONDS_OF_AUDIO:-10}
TRANSFORMERS=${TRANSFORMERS:-1}
TEXT=${TEXT:-"Hello there, this is a tiny text to speech test. The quick brown fox jumps over the dog."}
mkdir -p "$out"
log=$out/tts_e2e.log
: >"$log"

if [[ ! -f $SYNTH_DIR/config.json ]]; then
  echo "synth $SHAPE -> $SYNTH_DIR" | tee -a "$log"
  "$ZOO" synth --config "$SHAPE" --extra-tensors "$CODEC" --out "$SYNTH_DIR" -q >>"$log" 2>&1 ||
    { echo "zoo synth failed (see $log)"; exit 1; }
fi
cp "$src/tests/fixtures/higgs-tiny/tokenizer.json" "$SYNTH_DIR/tokenizer.json"

# Decode steps for the wanted frames: frames + (codebooks - 1), 25 frames per second of audio.
K=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["audio_encoder_config"]["num_codebooks"])' "$SHAPE")
frames=$("$PYTHON" -c "print(round($SECONDS_OF_AUDIO * 25))")
steps=$((frames + K - 1))

for r in $(seq 0 "$REPEAT"); do  # run 0 warms the page cache and is not reported
  "$ZOO" tts "$SYNTH_DIR" --device "$DEVICE" --text "$TEXT" --temperature 0 --max-frames "$steps" \
    --out "$out/zoo.wav" >"$out/zoo_tts_$r.txt" 2>&1 || { echo "zoo tts failed:"; tail -5 "$out/zoo_tts_$r.txt"; exit 1; }
  tr '\r' '\n' <"$out/zoo_tts_$r.txt" >>"$log"
done

"$PYTHON" - "$out" "$REPEAT" >"$out/zoo.json" <<'PY' || { echo "could not read zoo tts output"; exit 1; }
import json, re, statistics, sys
out, repeat = sys.argv[1], int(sys.argv[2])
runs = []
for r in range(1, repeat + 1):
    text = open(f"{out}/zoo_tts_{r}.txt").read().replace("\r", "\n")
    codec = re.search(r"tts: (\d+) frames -> (\d+) samples \(([\d.]+) s at \d+ Hz\) in ([\d.]+) s", text)
    total = re.search(r"tts: text to sound in ([\d.]+) s", text)
    prompt = re.search(r"tts: prompt (\d+) tokens, (\d+) decode steps", text)
    frames, audio_s, codec_s = int(codec.group(1)), float(codec.group(3)), float(codec.group(4))
    synth_s = float(total.group(1)) - codec_s
    runs.append({"frames": frames, "audio_s": audio_s, "synthesis_s": synth_s, "codec_s": codec_s,
                 "prompt_tokens": int(prompt.group(1)), "steps": int(prompt.group(2)),
                 "end_to_end_x_realtime": audio_s / (synth_s + codec_s)})
med = lambda k: statistics.median(x[k] for x in runs)
print(json.dumps({"runs": runs, "median": {k: med(k) for k in
                  ("synthesis_s", "codec_s", "end_to_end_x_realtime")},
                  "frames": runs[0]["frames"], "prompt_tokens": runs[0]["prompt_tokens"]}, indent=1))
PY

if [[ $TRANSFORMERS == 1 ]]; then
  text_tokens=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["prompt_tokens"])' "$out/zoo.json")
  # shellcheck disable=SC2086
  "$PYTHON" "$src/tools/bench/bench_higgs_transformers.py" --shape "$SHAPE" --device "$DEVICE" \
    --text-tokens "$text_tokens" --frames "$frames" --repeat "$REPEAT" --json ${BASELINE_ARGS:-} \
    >"$out/transformers.json" 2>>"$log" || { echo "transformers baseline failed (see $log)"; rm -f "$out/transformers.json"; }
fi

"$PYTHON" - "$out" <<'PY' | tee "$out/tts_e2e.md"
import json, os, sys
out = sys.argv[1]
z = json.load(open(f"{out}/zoo.json"))
t = json.load(open(f"{out}/transformers.json")) if os.path.exists(f"{out}/transformers.json") else None
m = z["median"]
audio = z["runs"][0]["audio_s"]
print(f"Higgs TTS end to end: prompt {z['prompt_tokens']} tokens, {z['frames']} frames = {audio:.2f} s of audio "
      f"(median of {len(z['runs'])})\n")
print("| | Zoo | transformers parts (compiled) |")
print("|---|---:|---:|")
tv = lambda key, fmt: (fmt.format(t[key]) if t and key in t else "-")
loop_t = f"{t['prefill_ms'] + 1e3 * t['decode_loop_s']:.0f} ms" if t else "-"
print(f"| prompt + decode loop | {m['synthesis_s'] * 1e3:.0f} ms | {loop_t} |")
print(f"| codec | {m['codec_s'] * 1e3:.1f} ms = {audio / m['codec_s']:.0f}x real time | "
      f"{tv('codec_x_realtime', '{:.0f}')}x real time |")
print(f"| end to end | {m['end_to_end_x_realtime']:.1f}x real time | {tv('end_to_end_x_realtime', '{:.1f}')}x real time |")
PY
