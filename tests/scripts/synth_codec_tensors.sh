#!/usr/bin/env bash
# `zoo synth --extra-tensors`: the tiny codec fixture's tensor list (written by
# tools/fixtures/make_codec_fixtures.py from transformers' module) added to a synthesized Higgs
# checkpoint gives a codec `zoo tts` decodes; a malformed list exits 2 naming the file.
# Usage: synth_codec_tensors.sh SOURCE_DIR BUILD_DIR
set -u
SRC=$(cd "$1" && pwd)
BUILD=$(cd "$2" && pwd)
ZOO=$BUILD/bin/zoo
FIX=$SRC/tests/fixtures/higgs-tiny-codec
[[ -x $ZOO ]] || { echo "no zoo binary at $ZOO"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/zoo-synth-codec.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }

"$ZOO" synth --config "$FIX/config.json" --extra-tensors "$FIX/codec-tensors.json" --dtype f32 --seed 3 \
  --out "$TMP/ck" -q || fail "synth: rc $?"
"$ZOO" inspect "$TMP/ck" >"$TMP/inspect" 2>&1 || fail "inspect: rc $?"
for name in acoustic_decoder.block.2.conv_t1.weight quantizer.quantizers.3.codebook.embed semantic_model.encoder.layers.1.attention.k_proj.weight; do
  grep -q "tied.embedding.modality_embeddings.0.model.$name" "$TMP/inspect" || fail "no $name in the synthesized checkpoint"
done
grep -q "body.layers.0.mlp.up_proj.weight" "$TMP/inspect" || fail "the plugin's own tensors are missing"
cp "$FIX/codec_config.json" "$TMP/ck/"  # the sample rate is in no tensor shape
printf 'model:\n  plugin: higgs_audio\n  checkpoint: %s\n  device: cpu\n' "$TMP/ck" >"$TMP/model.yaml"
"$ZOO" tts "$TMP/model.yaml" --codes "$FIX/codes.json" --out "$TMP/x.wav" -q || fail "tts on the synthesized codec: rc $?"
[[ $(stat -c %s "$TMP/x.wav" 2>/dev/null) -eq 464 ]] || fail "x.wav is not 7 x 30 samples"

echo '{"tensors": [{"name": "x", "shape": "oops"}]}' >"$TMP/bad.json"
"$ZOO" synth --config "$FIX/config.json" --extra-tensors "$TMP/bad.json" --out "$TMP/ck2" -q 2>"$TMP/err"
rc=$?
[[ $rc -eq 2 ]] || fail "bad list: rc $rc, expected 2"
grep -qF "$TMP/bad.json: tensors[0]" "$TMP/err" || fail "bad list: $(cat "$TMP/err")"
echo '{"tensors": [{"name": "body.norm.weight", "shape": [32]}]}' >"$TMP/dup.json"
"$ZOO" synth --config "$FIX/config.json" --extra-tensors "$TMP/dup.json" --out "$TMP/ck3" -q 2>"$TMP/err"
grep -qF "already required by the plugin" "$TMP/err" || fail "duplicate: $(cat "$TMP/err")"
# Hostile lists and sizes: exit 2, one line naming the file and entry (or the flag), before any
# directory is made. [2^32, 2^32] overflowed numel into a small buffer; a huge "std" turned into an
# infinite float; NaN passed --shard-gb's range.
bad_list() {  # NAME JSON PATTERN
  printf '%s\n' "$2" >"$TMP/$1.json"
  "$ZOO" synth --config "$FIX/config.json" --extra-tensors "$TMP/$1.json" --out "$TMP/$1" -q >/dev/null 2>"$TMP/err"
  local rc=$?
  [[ $rc -eq 2 ]] || fail "$1: rc $rc, expected 2: $(head -c 500 "$TMP/err")"
  [[ $(wc -l <"$TMP/err") -eq 1 ]] || fail "$1: not one line: $(head -c 500 "$TMP/err")"
  grep -qF -- "$3" "$TMP/err" || fail "$1: no '$3' in: $(cat "$TMP/err")"
  [[ -e $TMP/$1 ]] && fail "$1: the output directory was made"
}
bad_list overflow '{"tensors": [{"name": "x", "shape": [4294967296, 4294967296]}]}' "$TMP/overflow.json: tensors[0]: \"shape\" bytes"
bad_list big_dim '{"tensors": [{"name": "x", "shape": [18446744073709551615]}]}' "$TMP/big_dim.json: tensors[0]: \"shape\" must hold integers >= 0"
bad_list std_huge '{"tensors": [{"name": "x", "shape": [2], "std": 1e300}]}' "$TMP/std_huge.json: tensors[0]: \"std\" must be a finite number >= 0"
bad_list std_neg '{"tensors": [{"name": "x", "shape": [2], "std": -1}]}' "$TMP/std_neg.json: tensors[0]: \"std\" must be a finite number >= 0"
bad_list mean_huge '{"tensors": [{"name": "x", "shape": [2], "mean": -1e300}]}' "$TMP/mean_huge.json: tensors[0]: \"mean\" must be a finite number"
for v in nan inf -inf; do
  "$ZOO" synth --config "$FIX/config.json" --shard-gb $v --out "$TMP/shard-$v" -q >/dev/null 2>"$TMP/err"
  rc=$?
  [[ $rc -eq 2 ]] && grep -qF -- "--shard-gb" "$TMP/err" && [[ ! -e $TMP/shard-$v ]] ||
    fail "--shard-gb $v: rc $rc: $(head -c 500 "$TMP/err")"
done
exit $status
