#!/usr/bin/env bash
# By class, the file side of numeric_options.sh: every numeric field Zoo reads from a model YAML,
# a gates YAML and generation_config.json is tried with nan, inf, -1, 0, 1e300 and 2^64 (in each
# format's spelling). Each value is an error, exit 2, one line naming the file and the field, or
# one of the documented meanings below, which runs (exit 0). (config.json fields: each plugin's
# parser, fuzzed and range-checked by the config tests.)
# Usage: numeric_fields.sh SOURCE_DIR BUILD_DIR
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-numeric-fields "$@"
Q=$FIX/qwen3-tiny
G=$Q/golden.safetensors

# check FILE FIELD ACCEPTED ARGS...: ACCEPTED is 1 when the value has a documented meaning.
check() {
  local file=$1 field=$2 accepted=$3
  shift 3
  run "$(basename "$file") $field" "$@"
  if ((accepted)); then
    ((RC == 0)) || fail "documented value refused: exit $RC: $(head -c 300 "$TMP/err")"
    return
  fi
  ((RC == 2)) || { fail "exit $RC, expected 2: $(head -c 300 "$TMP/err")"; return; }
  [[ $(wc -l <"$TMP/err") -eq 1 ]] || fail "not one line: $(head -c 500 "$TMP/err")"
  grep -qF -- "$file" "$TMP/err" || fail "does not name $file: $(cat "$TMP/err")"
  grep -qF -- "${field##*.}" "$TMP/err" || fail "does not name $field: $(cat "$TMP/err")"
}

yaml_values=(.nan .inf -1 0 1.0e300 18446744073709551616)
json_values=(NaN Infinity -1 0 1e300 18446744073709551616)

# Model YAML: model.max_context (0 and negatives were once ignored).
for v in "${yaml_values[@]}"; do
  printf 'model:\n  plugin: qwen3\n  checkpoint: %s\n  max_context: %s\n' "$Q" "$v" >"$TMP/model.yaml"
  check "$TMP/model.yaml" model.max_context 0 plan "$TMP/model.yaml"
done

# Gates: every numeric bound, on the golden's logits against themselves. Documented: 0 for cosine
# and the error bounds (a real check, which identical tensors pass), and any finite error bound,
# however large (a NaN or infinity in the data still fails it; docs/validation.md).
for field in cosine max_abs mean_abs rmse nmse regret; do
  for v in "${yaml_values[@]}"; do
    printf -- '- {tensor: logits, %s: %s}\n' "$field" "$v" >"$TMP/gates.yaml"
    accepted=0
    [[ $v == 0 ]] && accepted=1
    [[ $field != cosine && ($v == 1.0e300 || $v == 18446744073709551616) ]] && accepted=1
    check "$TMP/gates.yaml" "$field" "$accepted" compare "$G" "$G" --gates "$TMP/gates.yaml"
  done
done
for field in k min_overlap; do
  for v in "${yaml_values[@]}"; do
    if [[ $field == k ]]; then topk="{k: $v, min_overlap: 1}"; else topk="{k: 4, min_overlap: $v}"; fi
    printf -- '- {tensor: logits, topk: %s}\n' "$topk" >"$TMP/gates.yaml"
    check "$TMP/gates.yaml" "topk.$field" 0 compare "$G" "$G" --gates "$TMP/gates.yaml"
  done
done

# generation_config.json: temperature, top_k, top_p, eos_token_id. Documented: temperature 0
# (greedy), top_k 0 (off), top_p 0 (the most likely token), eos_token_id 0 (a token id).
mkdir -p "$TMP/m"
for f in config.json model.safetensors; do ln -s "$Q/$f" "$TMP/m/$f"; done
for field in temperature top_k top_p eos_token_id; do
  for v in "${json_values[@]}"; do
    printf '{"do_sample": true, "%s": %s}\n' "$field" "$v" >"$TMP/m/generation_config.json"
    accepted=0
    [[ $v == 0 ]] && accepted=1
    # NaN and Infinity are not JSON: an error naming the file (and where), which is all it can name.
    if [[ $v == NaN || $v == Infinity ]]; then
      run "generation_config.json $field $v" generate "$TMP/m" --request "$Q/request.json" -n 1 -q
      ((RC == 2)) && grep -qF "$TMP/m/generation_config.json: not valid JSON" "$TMP/err" ||
        fail "exit $RC: $(head -c 300 "$TMP/err")"
      continue
    fi
    check "$TMP/m/generation_config.json" "$field" "$accepted" generate "$TMP/m" --request "$Q/request.json" -n 1 -q
  done
done

(( failures == 0 )) && echo "numeric_fields: $cases cases passed" || { echo "$failures failure(s) of $cases"; exit 1; }
