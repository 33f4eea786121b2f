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
exit $status
