#!/usr/bin/env bash
# On the GPU host (tools/gpu/prepare.sh makes the .gpu/ a device call carries): build with CUDA, make the
# transformers bf16 goldens of every fixture on the GPU, run every test (the [cuda] ones and the
# tools/ ones that need torch included), run the CUDA tests again as a GPU before sm_90 runs them
# (ZOO_CUDA_PRE_HOPPER=1: no clusters, no programmatic dependent launch), then the [cuda] tests
# under compute-sanitizer memcheck, and last the CUDA tests of a build for compute_80 PTX alone
# (the device code an A100 or L40S runs, JIT-compiled for the H200) with the pre-Hopper paths.
# Logs and the bf16 goldens go to OUTDIR.
# usage: tools/gpu/check_cuda.sh OUTDIR [PHASE...]
#   PHASE: build goldens ctest prehopper memcheck sm80 (default: all, in this order). A device call is
#   limited to 10 minutes: split the phases over two calls of one lease (build + goldens + ctest,
#   then prehopper + memcheck + sm80), the second finds the first's build tree.
set -uo pipefail
out=${1:?usage: check_cuda.sh OUTDIR [PHASE...]}
shift
phases=" ${*:-build goldens ctest prehopper memcheck sm80} "
want() { [[ $phases == *" $1 "* ]]; }
mkdir -p "$out"
# Every CUDA test of build tree $1 with the pre-Hopper paths forced: test_cuda whole, and the
# [cuda] cases of the test binaries that hold some.
pre_hopper_cuda_tests() {
  ZOO_CUDA_PRE_HOPPER=1 "$1"/bin/test_cuda && ZOO_CUDA_PRE_HOPPER=1 "$1"/bin/test_higgs "[cuda]" &&
    ZOO_CUDA_PRE_HOPPER=1 "$1"/bin/test_llama "[cuda]" && ZOO_CUDA_PRE_HOPPER=1 "$1"/bin/test_families "[cuda]"
}
log() { echo "[$(date +%T)] $*" | tee -a "$out/check.log"; }
prefix=/opt/zoo-deps
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The cuDNN torch bundles (>= 9.16, which the long-prefill attention needs) where the system one is older.
cudnn=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(nvidia.cudnn.__path__[0], "lib"))' 2>/dev/null || true)
[ -n "$cudnn" ] && [ -d "$cudnn" ] && export LD_LIBRARY_PATH=$cudnn:$LD_LIBRARY_PATH
# NCCL for tensor-parallel ranks on separate GPUs: the toolkit's where it has one, else the
# nvidia-nccl-cu13 wheel torch brings (its include/ and lib/).
nccl=$(python3 -c 'import nvidia.nccl; print(nvidia.nccl.__path__[0])' 2>/dev/null || true)
nccl_args=()
if [ -n "$nccl" ] && [ -f "$nccl/include/nccl.h" ] && [ ! -f /usr/local/cuda/include/nccl.h ]; then
  nccl_args=(-DZOO_NCCL_ROOT="$nccl")
  export LD_LIBRARY_PATH=$nccl/lib:$LD_LIBRARY_PATH
fi
# The GPU host has no clang: the fuzzers (CPU code) run in CI and are reported skipped here.
export ZOO_FUZZ=${ZOO_FUZZ:-skip}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$out/check.log"

if want build; then
log "build"
bash .gpu/build.sh .gpu/debs build-gpu -DCMAKE_BUILD_TYPE=Release ${nccl_args[@]+"${nccl_args[@]}"} > "$out/build.log" 2>&1 \
  || { log "build failed"; grep -m10 -B2 -A10 "error" "$out/build.log" | tee -a "$out/check.log"; exit 1; }
fi

if want goldens; then
log "bf16 goldens (transformers on the GPU)"
python3 tools/fixtures/make_qwen3_fixtures.py --device cuda --dtype bfloat16 > "$out/goldens.log" 2>&1 \
  && python3 tools/fixtures/make_higgs_fixtures.py --device cuda --dtype bfloat16 >> "$out/goldens.log" 2>&1 \
  && python3 tools/fixtures/make_llama_fixtures.py --device cuda --dtype bfloat16 >> "$out/goldens.log" 2>&1 \
  && python3 tools/fixtures/make_family_fixtures.py --device cuda --dtype bfloat16 >> "$out/goldens.log" 2>&1 \
  || log "golden generation failed (see goldens.log)"
tar czf "$out/goldens-bf16.tgz" tests/fixtures/*/golden*-bf16.safetensors 2>/dev/null
fi

if want ctest; then
log "ctest"
ctest --test-dir build-gpu --output-on-failure -j 8 > "$out/ctest.log" 2>&1
log "ctest rc=$?"
grep -E "tests passed|tests failed|\(Failed\)|Not Run|Skipped" "$out/ctest.log" | tee -a "$out/check.log"
fi

if want prehopper; then
log "CUDA tests with the pre-Hopper paths forced (ZOO_CUDA_PRE_HOPPER=1)"
pre_hopper_cuda_tests build-gpu > "$out/pre-hopper.log" 2>&1
log "pre-hopper rc=$?"
grep -E "^(All tests passed|test cases:)" "$out/pre-hopper.log" | tee -a "$out/check.log"
fi

if want memcheck; then
log "compute-sanitizer memcheck on the [cuda] tests"
timeout 240 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 build-gpu/bin/test_cuda "[cuda]" \
  > "$out/memcheck.log" 2>&1
log "memcheck rc=$?"
tail -4 "$out/memcheck.log" | tee -a "$out/check.log"
fi

if want sm80; then
log "CUDA tests of a compute_80 PTX build (build-sm80), pre-Hopper paths"
bash .gpu/build.sh .gpu/debs build-sm80 -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=80-virtual \
  > "$out/sm80-build.log" 2>&1 || { log "sm80 build failed"; exit 1; }
pre_hopper_cuda_tests build-sm80 > "$out/sm80.log" 2>&1
log "sm80 rc=$?"
grep -E "^(All tests passed|test cases:)" "$out/sm80.log" | tee -a "$out/check.log"
fi
