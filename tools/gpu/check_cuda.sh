#!/usr/bin/env bash
# On the GPU host (see ../shared/gpu-host/README.md for carrying .gpu/): build with CUDA, make the
# transformers bf16 goldens of every fixture on the GPU, run every test (the [cuda] ones included),
# then the [cuda] tests under compute-sanitizer memcheck. Logs and the bf16 goldens go to OUTDIR.
# usage: tools/gpu/check_cuda.sh OUTDIR
set -uo pipefail
out=${1:?usage: check_cuda.sh OUTDIR}
mkdir -p "$out"
log() { echo "[$(date +%T)] $*" | tee -a "$out/check.log"; }
prefix=/opt/zoo-deps
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$out/check.log"

log "build"
bash .gpu/build.sh .gpu/debs build-gpu -DCMAKE_BUILD_TYPE=Release > "$out/build.log" 2>&1 \
  || { log "build failed"; grep -m10 -B2 -A10 "error" "$out/build.log" | tee -a "$out/check.log"; exit 1; }

log "bf16 goldens (transformers on the GPU)"
python3 tools/fixtures/make_qwen3_fixtures.py --device cuda --dtype bfloat16 > "$out/goldens.log" 2>&1 \
  && python3 tools/fixtures/make_higgs_fixtures.py --device cuda --dtype bfloat16 >> "$out/goldens.log" 2>&1 \
  && python3 tools/fixtures/make_llama_fixtures.py --device cuda --dtype bfloat16 >> "$out/goldens.log" 2>&1 \
  || log "golden generation failed (see goldens.log)"
tar czf "$out/goldens-bf16.tgz" tests/fixtures/*/golden*-bf16.safetensors 2>/dev/null

log "ctest"
ctest --test-dir build-gpu --output-on-failure -j 8 > "$out/ctest.log" 2>&1
log "ctest rc=$?"
grep -E "tests passed|tests failed|\(Failed\)|Not Run" "$out/ctest.log" | tee -a "$out/check.log"

log "compute-sanitizer memcheck on the [cuda] tests"
timeout 240 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 build-gpu/bin/test_cuda "[cuda]" \
  > "$out/memcheck.log" 2>&1
log "memcheck rc=$?"
tail -4 "$out/memcheck.log" | tee -a "$out/check.log"
