#!/usr/bin/env bash
# On the GPU host, after a CUDA build in build-gpu: trace the CUDA-served fixtures on cuda (bf16)
# and compare them with their transformers bf16 goldens; greedy generation against transformers'
# bf16 generation. Prints the compare tables (what docs/performance.md quotes).
set -uo pipefail
zoo=${ZOO:-build-gpu/bin/zoo}
dir=$(mktemp -d)
for f in qwen3-tiny-hd64 higgs-tiny-hd128; do
  fx=$PWD/tests/fixtures/$f
  printf 'model:\n  checkpoint: %s\n  device: cuda\n' "$fx" > "$dir/$f.yaml"
  echo "== $f on cuda vs transformers bf16 (GPU)"
  $zoo trace "$dir/$f.yaml" --request "$fx/request.json" --out "$dir/$f.safetensors" -q
  $zoo compare "$fx/golden-bf16.safetensors" "$dir/$f.safetensors" --gates "tests/data/cuda-bf16-gates-${f%%-*}.yaml"
done
fx=$PWD/tests/fixtures/qwen3-tiny-hd64
echo "== greedy generation on cuda (zoo, then transformers bf16)"
$zoo generate "$dir/qwen3-tiny-hd64.yaml" --request "$fx/request.json" --max-new-tokens 12 -q
python3 -c "from safetensors.numpy import load_file; print(*load_file('$fx/golden_generate-bf16.safetensors')['generated_ids'])"
