#!/usr/bin/env bash
# Fuzzes zoo::parse_safetensors_header (libFuzzer + ASan + UBSan) for 30 s, FUZZ_SECONDS to change.
# Usage: fuzz_safetensors.sh SOURCE_DIR BUILD_DIR. Fails without clang++ unless ZOO_FUZZ=skip (then
# exit 77: skipped). See tests/fuzz/fuzz_lib.sh.
src=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
source "$src/tests/fuzz/fuzz_lib.sh" "$src" "${2:-$src/build}"

# Seed corpus: a few valid files and near misses, plus the file written by Python safetensors.
seeds=$FUZZ_OUT/seeds-safetensors
rm -rf "$seeds"
mkdir -p "$seeds"
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
cp "$FUZZ_SRC/tests/fixtures/safetensors_python/sample.safetensors" "$seeds/python_sample"

fuzz_dict "$FUZZ_OUT/safetensors.dict" '{' '}' '[' ']' ':' ',' '"' '__metadata__' 'dtype' 'shape' 'data_offsets' \
  F32 F16 BF16 F64 I64 I32 I16 I8 U8 BOOL F8_E4M3 U32 18446744073709551615 9223372036854775808 -1 1e3 '\u0000'

fuzz_target fuzz_safetensors_header 30 "$seeds" "$FUZZ_OUT/safetensors.dict"
