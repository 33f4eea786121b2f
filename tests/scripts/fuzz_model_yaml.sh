#!/usr/bin/env bash
# Fuzzes the model YAML reader, gates included (libFuzzer + ASan + UBSan), for 30 s; FUZZ_SECONDS
# to change. Usage: fuzz_model_yaml.sh SOURCE_DIR BUILD_DIR. Fails without clang++ unless
# ZOO_FUZZ=skip (then exit 77: skipped). See tests/fuzz/fuzz_lib.sh.
src=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
source "$src/tests/fuzz/fuzz_lib.sh" "$src" "${2:-$src/build}"

seeds=$FUZZ_OUT/seeds-yaml
rm -rf "$seeds" && mkdir -p "$seeds"
for f in "$FUZZ_SRC"/configs/*.yaml "$FUZZ_SRC"/tests/data/*.yaml; do cp "$f" "$seeds/"; done
# The gates files as a model YAML's validation section, so the gate parser is reached too.
for f in "$FUZZ_SRC"/tests/data/*gates*.yaml; do
  { printf 'model:\n  checkpoint: /\nvalidation:\n  request: /\n  golden: /\n  gates:\n'; sed 's/^/    /' "$f"; } \
    >"$seeds/validation-$(basename "$f")"
done
printf 'a: &x [1, 2]\nb: [*x, *x]\nmodel: {checkpoint: /, max_context: 9223372036854775807}\n' >"$seeds/aliases.yaml"
fuzz_dict "$FUZZ_OUT/yaml.dict" ':' '- ' '[' ']' '{' '}' '&a ' '*a' '!!str ' '---' '...' '|' '>' '#' "'" '"' \
  model plugin checkpoint device dtype max_context plugins paths weights aliases prefix name stored drop drop_prefix \
  validation request golden points gates cosine max_abs argmax top_k regret cpu cuda:0 bfloat16 float32
fuzz_target fuzz_model_yaml 30 "$seeds" "$FUZZ_OUT/yaml.dict"
