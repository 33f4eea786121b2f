#!/usr/bin/env bash
# Files are opened in two places only: framework/sdk/input_file.cpp (zoo::InputFile: regular files,
# never a blocking open, size caps) and framework/sdk/output_file.cpp (zoo::AtomicFileWriter:
# temporary + rename, devices and FIFOs written directly). Anything else that opens a file by name
# (open, openat, creat, fopen, freopen, std::ifstream/ofstream/fstream, libsndfile's sf_open)
# bypasses the rules of docs/safety.md and fails here. libsndfile is used through sf_open_fd (on
# an InputFile's descriptor) and sf_open_virtual (into memory, then an AtomicFileWriter), which
# open nothing. Comments are not searched. Tests are not searched: they build hostile files.
# Usage: no_raw_file_io.sh SOURCE_DIR BUILD_DIR
set -u
SRC=$(cd "$1" && pwd)
cd "$SRC" || exit 1
allowed=(framework/sdk/input_file.cpp framework/sdk/output_file.cpp)
pattern='(^|[^A-Za-z0-9_.>:])(::)?(open|openat|creat|fopen|freopen)[[:space:]]*\(|\b(std::)?(i|o)?fstream\b|\bsf_open[[:space:]]*\('
# Named things that are not raw opens: SafetensorsFile::open's declaration (it maps through
# InputFile).
not_raw='SafetensorsFile> open\('
status=0
checked=0
while IFS= read -r -d '' file; do
  skip=0
  for a in "${allowed[@]}"; do [[ $file == "$a" ]] && skip=1; done
  ((skip)) && continue
  checked=$((checked + 1))
  # Line comments removed (block comments are not used for code in this tree).
  hits=$(sed 's://.*$::' "$file" | grep -nE "$pattern" | grep -vE "$not_raw")
  if [[ -n $hits ]]; then
    while IFS= read -r hit; do echo "FAIL: $file:$hit  (open files through zoo::InputFile / AtomicFileWriter)"; done <<<"$hits"
    status=1
  fi
done < <(find framework apps plugins kernels layers -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0 | sort -z)
# The search must have found the code (a moved tree would otherwise pass vacuously).
((checked > 50)) || { echo "FAIL: only $checked source files searched"; status=1; }
# And the pattern must still catch what it is for.
for probe in 'std::ifstream in(path);' 'int fd = ::open(p, O_RDONLY);' 'FILE* f = fopen("x", "r");' \
  'SNDFILE* s = sf_open(name, SFM_READ, &info);' 'std::ofstream out;'; do
  grep -qE "$pattern" <<<"$probe" || { echo "FAIL: the pattern misses: $probe"; status=1; }
done
for fine in 'auto st = SafetensorsFile::open(file);' 'sf_open_fd(fd, SFM_READ, &info, 0);' 'dlopen(path, RTLD_NOW);'; do
  grep -qE "$pattern" <<<"$fine" && { echo "FAIL: the pattern flags: $fine"; status=1; }
done
((status == 0)) && echo "no raw file opens in $checked files"
exit $status
