#!/usr/bin/env bash
# The CPU evidence for a refactor that must not change behaviour: every tap of every shipped
# fixture with a request (float32, fixed thread count) and greedy ids, written under OUTDIR.
# Run it with the build before and after, then `diff -r` the two directories: equal files mean
# bitwise-equal traces and equal ids. Traces name their config's path in their metadata: give two
# trees the same FIXTURES directory (default: this tree's tests/fixtures).
#   tools/refactor/cpu_traces.sh ZOO_BINARY OUTDIR [FIXTURES]
set -euo pipefail
zoo=${1:?usage: cpu_traces.sh ZOO_BINARY OUTDIR}
out=${2:?usage: cpu_traces.sh ZOO_BINARY OUTDIR}
fixtures=$(cd "${3:-$(dirname "$0")/../../tests/fixtures}" && pwd)
mkdir -p "$out"
for dir in "$fixtures"/*/; do
  name=$(basename "$dir")
  [[ -f $dir/request.json && -f $dir/config.json ]] || continue
  "$zoo" trace "$dir" --request "$dir/request.json" --points '*' --threads 2 --quiet --out "$out/$name.safetensors"
  "$zoo" generate "$dir" --request "$dir/request.json" -n 8 --temp 0 --threads 2 >"$out/$name.ids" 2>/dev/null || echo "exit $?" >>"$out/$name.ids"
done
# The text fixture: a prompt through the tokenizer.
"$zoo" generate "$fixtures/qwen3-tiny-text" --prompt "The zoo opens at" -n 8 --temp 0 --threads 2 \
  >"$out/qwen3-tiny-text.txt" 2>/dev/null
ls "$out" | wc -l
