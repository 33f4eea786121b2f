#!/usr/bin/env bash
# On the GPU host: build the zoo of an older revision (tools/gpu/prepare.sh --rev REV made its
# tarball) beside this checkout's, without tests, for an A/B in the same call.
#   tools/gpu/build_rev.sh .gpu/rev-REV.tar DIR   ->   DIR/build/bin/zoo
set -euo pipefail
tar_file=${1:?usage: build_rev.sh REV_TAR DIR}
dir=${2:?usage: build_rev.sh REV_TAR DIR}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[[ -f $tar_file ]] || { echo "build_rev.sh: no $tar_file" >&2; exit 2; }
tar_file=$(cd "$(dirname "$tar_file")" && pwd)/$(basename "$tar_file")
mkdir -p "$dir"
tar -xf "$tar_file" -C "$dir"
cd "$dir"
bash "$root/.gpu/build.sh" "$root/.gpu/debs" build -DCMAKE_BUILD_TYPE=Release -DZOO_BUILD_TESTS=OFF
echo "build_rev.sh: $dir/build/bin/zoo"
