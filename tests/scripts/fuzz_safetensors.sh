#!/usr/bin/env bash
# Fuzzes zoo::parse_safetensors_header with libFuzzer + ASan + UBSan for FUZZ_SECONDS (default 60).
# Usage: fuzz_safetensors.sh SOURCE_DIR BUILD_DIR
# The project normally builds with g++, which has no libFuzzer, so this compiles the target with
# clang++ itself; without clang++ on PATH the test is skipped (exit 0).
set -euo pipefail

src=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
build=${2:-$src/build}
seconds=${FUZZ_SECONDS:-60}

if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz_safetensors: skipped: clang not found (install clang to run the fuzzer)"
  exit 0
fi

out=$build/fuzz
mkdir -p "$out"
bin=$out/fuzz_safetensors_header
fw=$src/framework/src
sources=("$src/tests/fuzz/fuzz_safetensors_header.cpp" "$fw/safetensors.cpp" "$fw/mapped_file.cpp" "$fw/dtype.cpp"
         "$fw/tensor.cpp")
# The exception classes' key functions, when they are defined out of line.
[[ -f $fw/error.cpp ]] && sources+=("$fw/error.cpp")

# Rebuild only when a source or header changed since the last build.
stale=0
[[ -x $bin ]] || stale=1
if ((!stale)); then
  while IFS= read -r -d '' f; do
    if [[ $f -nt $bin ]]; then stale=1; break; fi
  done < <(find "${sources[@]}" "$src/framework/include/zoo" -type f -print0)
fi
if ((stale)); then
  echo "fuzz_safetensors: building $bin with $(clang++ --version | head -n1)"
  clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -fno-omit-frame-pointer -I"$src/framework/include" "${sources[@]}" -lfmt -o "$bin.tmp"
  mv "$bin.tmp" "$bin"
fi

# Seed corpus: a few valid files and near misses, plus the file written by Python safetensors.
seeds=$out/seeds
rm -rf "$seeds"
mkdir -p "$seeds" "$out/corpus"
le64() {
  local n=$1 i
  for i in 0 1 2 3 4 5 6 7; do printf "\\$(printf '%03o' $(((n >> (8 * i)) & 255)))"; done
}
seed() {  # NAME HEADER [DATA as a printf format]
  { le64 "${#2}"; printf '%s' "$2"; printf "${3:-}"; } >"$seeds/$1"
}
seed empty '{}'
seed padded '{}      '
seed one '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' '\0\0\200?\0\0\0@'
seed two '{"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[3],"data_offsets":[4,7]}}' '\200?\0@abc'
seed scalar '{"s":{"dtype":"I64","shape":[],"data_offsets":[0,8]},"e":{"dtype":"F16","shape":[0,5],"data_offsets":[8,8]}}' '\1\0\0\0\0\0\0\0'
seed overlap '{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}' 'abc'
seed badshape '{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}' '12345678'
seed dup '{"a":{"dtype":"I8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"I8","shape":[1],"data_offsets":[1,2]}}' 'ab'
cp "$src/tests/fixtures/safetensors_python/sample.safetensors" "$seeds/python_sample"

dict=$out/safetensors.dict
{
  for token in '{' '}' '[' ']' ':' ',' '"' '__metadata__' 'dtype' 'shape' 'data_offsets' \
    F32 F16 BF16 F64 I64 I32 I16 I8 U8 BOOL F8_E4M3 U32 18446744073709551615 9223372036854775808 -1 1e3 '\\u0000'; do
    printf '"%s"\n' "${token//\"/\\\"}"
  done
} >"$dict"

echo "fuzz_safetensors: fuzzing for ${seconds}s"
set +e
"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 \
  -dict="$dict" -artifact_prefix="$out/" "$out/corpus" "$seeds" >"$out/fuzz.log" 2>&1
rc=$?
set -e
tail -n 25 "$out/fuzz.log"
if ((rc != 0)); then
  echo "fuzz_safetensors: FAILED (exit $rc); crashing input saved under $out/, full log $out/fuzz.log"
  exit 1
fi
echo "fuzz_safetensors: ok, no crash in ${seconds}s ($(find "$out/corpus" -type f | wc -l) inputs in the corpus)"
