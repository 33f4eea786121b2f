#!/usr/bin/env bash
# Fuzzes the JSON inputs (libFuzzer + ASan + UBSan): config.json through both plugins' config
# parsers (20 s), model.safetensors.index.json (10 s) and request JSON (10 s); FUZZ_SECONDS sets
# every target's time. Usage: fuzz_json.sh SOURCE_DIR BUILD_DIR. Fails without clang++ unless
# ZOO_FUZZ=skip (then exit 77: skipped). See tests/fuzz/fuzz_lib.sh.
src=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
source "$src/tests/fuzz/fuzz_lib.sh" "$src" "${2:-$src/build}"
FIX=$FUZZ_SRC/tests/fixtures

json_tokens=('{' '}' '[' ']' ':' ',' '"' 'null' 'true' 'false' '-1' '0' '1e400' '1e-300' '18446744073709551615'
             '9223372036854775808' '4611686018427387904' 'NaN' '\u0000')

seeds=$FUZZ_OUT/seeds-config
rm -rf "$seeds" && mkdir -p "$seeds"
for d in "$FIX"/*/; do if [[ -f $d/config.json ]]; then cp "$d/config.json" "$seeds/$(basename "$d").json"; fi; done
fuzz_dict "$FUZZ_OUT/config.dict" "${json_tokens[@]}" vocab_size hidden_size intermediate_size num_hidden_layers \
  num_attention_heads num_key_value_heads head_dim rms_norm_eps rope_theta rope_parameters rope_scaling rope_type \
  default tie_word_embeddings hidden_act silu text_config audio_encoder_config num_codebooks out_dim \
  use_delay_pattern audio_token_id max_position_embeddings
fuzz_target fuzz_config_json 20 "$seeds" "$FUZZ_OUT/config.dict"

seeds=$FUZZ_OUT/seeds-index
rm -rf "$seeds" && mkdir -p "$seeds"
cp "$FIX/qwen3-tiny-sharded/model.safetensors.index.json" "$seeds/sharded.json"
printf '{"metadata": {"total_size": 8}, "weight_map": {"a": "../x", "b": "/etc/passwd", "c": "sub/s.safetensors"}}' \
  >"$seeds/escapes.json"
fuzz_dict "$FUZZ_OUT/index.dict" "${json_tokens[@]}" weight_map metadata total_size .. / model.safetensors
fuzz_target fuzz_index_json 10 "$seeds" "$FUZZ_OUT/index.dict"

seeds=$FUZZ_OUT/seeds-request
rm -rf "$seeds" && mkdir -p "$seeds"
for d in "$FIX"/*/; do if [[ -f $d/request.json ]]; then cp "$d/request.json" "$seeds/$(basename "$d").json"; fi; done
fuzz_dict "$FUZZ_OUT/request.dict" "${json_tokens[@]}" input_ids audio_codes
fuzz_target fuzz_request_json 10 "$seeds" "$FUZZ_OUT/request.dict"
