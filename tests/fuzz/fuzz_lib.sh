# Shared by tests/scripts/fuzz_*.sh: builds a libFuzzer target with clang++ (the project itself
# builds with g++, which has no libFuzzer) and runs it for a bounded time over a seed corpus.
#
#   source tests/fuzz/fuzz_lib.sh SOURCE_DIR BUILD_DIR
#   fuzz_target NAME SECONDS SEEDS_DIR DICT
#
# Environment: ZOO_FUZZ=skip skips (exit 77, which ctest reports as skipped, not passed);
# FUZZ_SECONDS overrides every target's time (e.g. FUZZ_SECONDS=600 for a long run by hand);
# FUZZ_CXX picks the compiler (default clang++). Without the compiler the script FAILS: a fuzz test
# that silently passes when it cannot run would be a vacuous pass.
set -euo pipefail

FUZZ_SRC=$(cd "$1" && pwd)
FUZZ_BUILD=$(mkdir -p "$2" && cd "$2" && pwd)
FUZZ_OUT=$FUZZ_BUILD/fuzz
FUZZ_CXX=${FUZZ_CXX:-clang++}

if [[ ${ZOO_FUZZ:-} == skip ]]; then
  echo "fuzz: skipped (ZOO_FUZZ=skip)"
  exit 77
fi
if ! command -v "$FUZZ_CXX" >/dev/null 2>&1; then
  echo "fuzz: FAILED: $FUZZ_CXX not found. Install clang (scripts/install-deps) or set ZOO_FUZZ=skip to skip." >&2
  exit 1
fi

# Framework and plugin sources compiled into the targets (instrumented for coverage and the
# sanitizers). Each target links only the objects it needs from the archive.
FUZZ_LIB_SOURCES=(
  framework/sdk/input_file.cpp framework/sdk/error.cpp framework/sdk/safetensors.cpp framework/sdk/mapped_file.cpp
  framework/sdk/dtype.cpp framework/sdk/tensor.cpp framework/sdk/request.cpp framework/sdk/checkpoint.cpp
  framework/sdk/alias_weight_source.cpp framework/host/model_spec.cpp framework/host/yaml_checks.cpp
  framework/validation/compare.cpp framework/validation/gates.cpp framework/sdk/format.cpp
  framework/sdk/diagnostic_hook.cpp framework/sdk/output_file.cpp framework/text/chat_template.cpp
  framework/text/jinja/access.cpp framework/text/jinja/budget.cpp framework/text/jinja/filters.cpp framework/text/jinja/json.cpp
  framework/text/jinja/lexer.cpp framework/text/jinja/methods.cpp framework/text/jinja/operators.cpp
  framework/text/jinja/parse_expr.cpp framework/text/jinja/parser.cpp framework/text/jinja/render.cpp
  framework/text/jinja/value.cpp
  layers/src/hf_config.cpp layers/src/decoder_spec.cpp layers/src/rope.cpp kernels/src/rope_table.cpp plugins/higgs_audio/src/higgs_config.cpp
)
FUZZ_FLAGS=(-std=c++20 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
            -DBOOST_DLL_USE_STD_FS -I"$FUZZ_SRC/layers/include" -I"$FUZZ_SRC/kernels/include"
            -I"$FUZZ_SRC/plugins/higgs_audio/src" -I"$FUZZ_SRC/framework")
for part in sdk host text validation sound; do FUZZ_FLAGS+=(-I"$FUZZ_SRC/framework/$part/include"); done
FUZZ_LAUNCHER=()
# BASEDIR and NOHASHDIR, as scripts/configure sets them: hits from another checkout (CI clones anew).
if command -v ccache >/dev/null 2>&1; then FUZZ_LAUNCHER=(env CCACHE_BASEDIR="$FUZZ_SRC" CCACHE_NOHASHDIR=1 ccache); fi

# fuzz_stale TARGET FILES...: true when TARGET is missing or any file (or any framework header) is newer.
fuzz_stale() {
  local target=$1 f
  shift
  [[ -e $target ]] || return 0
  for f in "$@"; do [[ $f -nt $target ]] && return 0; done
  while IFS= read -r -d '' f; do [[ $f -nt $target ]] && return 0; done \
    < <(find "$FUZZ_SRC/framework" -name '*.hpp' -print0)
  return 1
}

# The library's sources are compiled in parallel, one per core: the first fuzz script compiles
# them all while the others wait on the lock, so a serial loop left a core idle for minutes.
fuzz_build_lib() {
  mkdir -p "$FUZZ_OUT/obj"
  local objs=() src obj failed=0 running=0 cores
  cores=$(nproc 2>/dev/null || echo 2)
  for src in "${FUZZ_LIB_SOURCES[@]}"; do
    obj=$FUZZ_OUT/obj/$(basename "${src%.cpp}").o
    objs+=("$obj")
    if fuzz_stale "$obj" "$FUZZ_SRC/$src"; then
      if ((running >= cores)); then
        wait -n || failed=1
        running=$((running - 1))
      fi
      echo "fuzz: compiling $src"
      ("${FUZZ_LAUNCHER[@]}" "$FUZZ_CXX" "${FUZZ_FLAGS[@]}" -fsanitize=fuzzer-no-link -c "$FUZZ_SRC/$src" -o "$obj.tmp" &&
        mv "$obj.tmp" "$obj") &
      running=$((running + 1))
    fi
  done
  while ((running > 0)); do
    wait -n || failed=1
    running=$((running - 1))
  done
  if ((failed)); then
    echo "fuzz: FAILED: compiling the fuzz library" >&2
    return 1
  fi
  if fuzz_stale "$FUZZ_OUT/libzoo_fuzz.a" "${objs[@]}"; then
    rm -f "$FUZZ_OUT/libzoo_fuzz.a"
    ar rcs "$FUZZ_OUT/libzoo_fuzz.a" "${objs[@]}"
  fi
}

# fuzz_target NAME SECONDS SEEDS_DIR DICT: builds tests/fuzz/NAME.cpp and fuzzes it.
fuzz_target() {
  local name=$1 seconds=${FUZZ_SECONDS:-$2} seeds=$3 dict=${4:-}
  local bin=$FUZZ_OUT/$name main=$FUZZ_SRC/tests/fuzz/$name.cpp
  mkdir -p "$FUZZ_OUT"
  # ctest may run several fuzz scripts at once; they share the objects, so one builds at a time.
  (
    flock 9
    fuzz_build_lib
    if fuzz_stale "$bin" "$main" "$FUZZ_OUT/libzoo_fuzz.a"; then
      echo "fuzz: building $bin with $("$FUZZ_CXX" --version | head -n1)"
      "${FUZZ_LAUNCHER[@]}" "$FUZZ_CXX" "${FUZZ_FLAGS[@]}" -fsanitize=fuzzer "$main" "$FUZZ_OUT/libzoo_fuzz.a" \
        -lyaml-cpp -lfmt -lutf8proc -ldl -lpthread -o "$bin.tmp"
      mv "$bin.tmp" "$bin"
    fi
  ) 9>"$FUZZ_OUT/build.lock"
  local corpus=$FUZZ_OUT/corpus-$name log=$FUZZ_OUT/$name.log
  mkdir -p "$corpus"
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1
              -artifact_prefix="$FUZZ_OUT/$name-")
  if [[ -n $dict ]]; then args+=(-dict="$dict"); fi
  echo "fuzz: $name for ${seconds}s"
  local rc=0
  "$bin" "${args[@]}" "$corpus" "$seeds" >"$log" 2>&1 || rc=$?
  tail -n 8 "$log"
  if ((rc != 0)); then
    echo "fuzz: $name FAILED (exit $rc); crashing input saved under $FUZZ_OUT/$name-*, full log $log"
    return 1
  fi
  local runs
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  echo "fuzz: $name ok, no crash in ${seconds}s (${runs:-?} executions, $(find "$corpus" -type f | wc -l) inputs in the corpus)"
}

# fuzz_dict FILE TOKENS...: a libFuzzer dictionary of the given tokens.
fuzz_dict() {
  local file=$1 token
  shift
  for token in "$@"; do printf '"%s"\n' "$(printf '%s' "$token" | sed 's/\\/\\\\/g; s/"/\\"/g')"; done >"$file"
}
