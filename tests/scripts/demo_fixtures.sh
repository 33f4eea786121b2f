#!/usr/bin/env bash
# The shipped fixtures scripts/demo runs, end to end on the CPU:
# - text to WAV: `zoo tts tests/fixtures/higgs-tiny-codec --text ... --out x.wav` (its tokenizer.json
#   and codec, random weights) writes a 16-bit mono WAV at the codec's rate with the codec's samples
#   per frame (from the fixture's tensor shapes) x frames > 0; the same seed gives the same bytes,
#   another seed other codes;
# - text in, text out: `zoo generate tests/fixtures/qwen3-tiny-text --prompt ...` prints text and
#   runs the prompt's ids, which equal qwen3-tiny's (the same weights) on the same ids;
# - both tokenizer.json files fit their model's vocabulary, and (when python3 has `tokenizers`)
#   zoo encodes like HF tokenizers on them.
# Usage: demo_fixtures.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-demo-fixtures "$@"
TTS=$FIX/higgs-tiny-codec
TEXT=$FIX/qwen3-tiny-text

# --- text to WAV ------------------------------------------------------------------------------
tts() { "$ZOO" tts "$TTS" --text "Hello there" --max-frames 40 "$@"; }
tts --seed 1 --out "$TMP/a.wav" 2>"$TMP/a.err" || fail "tts a: $(cat "$TMP/a.err")"
tts --seed 1 --out "$TMP/b.wav" -q 2>"$TMP/b.err" || fail "tts b: $(cat "$TMP/b.err")"
tts --seed 2 --out "$TMP/c.wav" -q 2>"$TMP/c.err" || fail "tts c: $(cat "$TMP/c.err")"
cmp -s "$TMP/a.wav" "$TMP/b.wav" || fail "same seed, different WAV bytes"
cmp -s "$TMP/a.wav" "$TMP/c.wav" && fail "another seed, the same WAV"
grep -q "text to sound in .* real time; loading not included" "$TMP/a.err" || fail "no end-to-end line: $(cat "$TMP/a.err")"
# "tts: N frames -> S samples (X s at R Hz) in ..."
read -r frames samples rate < <(sed -n 's/^tts: \([0-9]*\) frames -> \([0-9]*\) samples ([0-9.]* s at \([0-9]*\) Hz).*/\1 \2 \3/p' "$TMP/a.err")
[[ -n ${frames:-} ]] || fail "no frames line: $(cat "$TMP/a.err")"
# The progress line counts seconds of this codec's speech (30 samples a frame at 24 kHz), not of the
# released codec's 25 frames a second (it once said 40.84 s for 1.28 s).
progress=$(tr '\r' '\n' <"$TMP/a.err" | sed -n 's/^tts: \([0-9]*\) frames, \([0-9.]*\) s of speech.*/\1 \2/p' | tail -n1)
read -r pframes pseconds <<<"$progress"
[[ -n ${pseconds:-} ]] || fail "no progress line: $(cat "$TMP/a.err")"
awk -v f="${pframes:-0}" -v s="${pseconds:-0}" 'BEGIN { exit !(f > 0 && (s - f * 30 / 24000) ^ 2 < 1e-4) }' ||
  fail "progress says ${pframes:-?} frames are ${pseconds:-?} s of speech; at 30 samples a frame and 24 kHz they are not"
python3 - "$TMP/a.wav" "$TTS/codec-tensors.json" "${frames:-0}" "${samples:-0}" "${rate:-0}" <<'PY' || fail "a.wav"
import json, sys, wave
path, tensors, frames, samples, rate = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
# Samples per frame: the product of the decoder's upsampling strides (conv_t1 kernel = 2 x stride).
shapes = {t["name"]: t["shape"] for t in json.load(open(tensors))["tensors"]}
per_frame, b = 1, 0
while (name := f"tied.embedding.modality_embeddings.0.model.acoustic_decoder.block.{b}.conv_t1.weight") in shapes:
    per_frame *= shapes[name][2] // 2
    b += 1
assert b > 0 and per_frame == 30, (b, per_frame)
with wave.open(path) as w:
    got = (w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes())
want = (1, 2, 24000, per_frame * frames)  # the codec's 24 kHz (Higgs Audio v2 tokenizer), 16-bit mono
assert frames >= 1 and got == want and samples == got[3] and rate == got[2], (got, want, frames, samples, rate)
PY

# --- text in, text out ------------------------------------------------------------------------
"$ZOO" generate "$TEXT" --prompt "Once upon a time" --max-new-tokens 8 --temperature 0 >"$TMP/g.txt" 2>"$TMP/g.err" ||
  fail "generate --prompt: $(cat "$TMP/g.err")"
[[ -s $TMP/g.txt ]] || fail "generate --prompt printed no text"
python3 -c 'import sys; open(sys.argv[1], "rb").read().decode("utf-8")' "$TMP/g.txt" || fail "generated text is not UTF-8"
echo '"Once upon a time"' >"$TMP/prompt.jsonl"
read -r -a prompt_ids <<<"$("$ZOO" tokenize "$TEXT" --input "$TMP/prompt.jsonl" | tr '[],' '   ')"
((${#prompt_ids[@]} > 0)) || fail "no prompt ids"
printf '{"input_ids": [%s]}\n' "$(IFS=,; echo "${prompt_ids[*]}")" >"$TMP/req.json"
text_ids=$("$ZOO" generate -q "$TEXT" --prompt "Once upon a time" --max-new-tokens 8 --temperature 0 --ids 2>&1) ||
  fail "generate --ids: $text_ids"
req_ids=$("$ZOO" generate -q "$FIX/qwen3-tiny" --request "$TMP/req.json" --max-new-tokens 8 --temperature 0 2>&1) ||
  fail "generate qwen3-tiny --request: $req_ids"
[[ $text_ids == "$req_ids" ]] || fail "qwen3-tiny-text from text ($text_ids) != qwen3-tiny from ids ($req_ids)"
cmp -s "$TEXT/model.safetensors" "$FIX/qwen3-tiny/model.safetensors" || fail "qwen3-tiny-text's weights are not qwen3-tiny's"

# --- the tokenizers fit their models ------------------------------------------------------------
python3 - "$TTS" "$TEXT" <<'PY' || fail "tokenizer vocabularies"
import json, sys
for d in sys.argv[1:]:
    cfg = json.load(open(f"{d}/config.json"))
    V = cfg.get("text_config", cfg)["vocab_size"]
    tok = json.load(open(f"{d}/tokenizer.json"))
    ids = list(tok["model"]["vocab"].values()) + [a["id"] for a in tok["added_tokens"]]
    assert max(ids) < V, (d, max(ids), V)
    specials = {a["content"] for a in tok["added_tokens"]}
    if "higgs" in d:
        assert {"<|tts|>", "<|text|>", "<|audio|>", "<|ref_audio|>", "<|ref_text|>"} <= specials, specials
PY
if python3 -c 'import tokenizers' 2>/dev/null; then
  printf '%s\n' '"Hello there"' '"Hello there, tiny speech! 123 Ünïcode"' '"<|tts|>Hi<|text|> again<|audio|>"' \
    '"Once upon a time"' >"$TMP/lines.jsonl"
  for d in "$TTS" "$TEXT"; do
    "$ZOO" tokenize "$d" --input "$TMP/lines.jsonl" >"$TMP/zoo.ids" 2>"$TMP/tok.err" || fail "tokenize $d: $(cat "$TMP/tok.err")"
    python3 - "$d/tokenizer.json" "$TMP/lines.jsonl" "$TMP/zoo.ids" <<'PY' || fail "$d: zoo's ids differ from HF tokenizers'"
import json, sys
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
want = [tok.encode(json.loads(l), add_special_tokens=False).ids for l in open(sys.argv[2])]
got = [json.loads(l) for l in open(sys.argv[3])]
assert got == want, (got, want)
PY
  done
else
  echo "note: python3 tokenizers is not installed; the HF comparison is skipped"
fi

((failures == 0)) && echo "PASS demo fixtures" || exit 1
