#!/usr/bin/env bash
# On the development machine, once per checkout: the git-ignored .gpu/ folder that a device call
# carries to the GPU host (../shared/gpu-host/README.md): Zoo's Debian dependencies as .deb files,
# the shared build script, and the folder excluded from git. Zoo needs more than the shared list
# names: libsoxr (resampling) and its runtime; the host's own libgomp serves it (a Debian libgomp
# unpacked into the prefix would shadow the host's newer one).
#   tools/gpu/prepare.sh [--rev REV]... [SHARED_GPU_HOST_DIR]   (default ../shared/gpu-host)
# --rev REV also puts REV's sources (no tests or docs) in .gpu/rev-REV.tar, for an A/B against it
# in the same call: tools/gpu/build_rev.sh .gpu/rev-REV.tar DIR builds its zoo there, and
# tools/bench/ab_bench.sh DIR/build/bin/zoo build-gpu/bin/zoo OUTFILE SHAPE... interleaves the two.
# Then, in a device call with carry [".gpu"]: bash tools/gpu/check_cuda.sh "$OUT" build ctest
set -euo pipefail
cd "$(dirname "$0")/../.."
revs=()
while [[ ${1:-} == --rev ]]; do
  [[ $# -ge 2 ]] || { echo "prepare.sh: --rev needs a revision" >&2; exit 2; }
  revs+=("$2")
  shift 2
done
shared=${1:-../shared/gpu-host}
[[ -x $shared/fetch-deps.sh ]] || { echo "prepare.sh: no $shared/fetch-deps.sh" >&2; exit 2; }
mkdir -p .git/info .gpu
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
"$shared/fetch-deps.sh" .gpu/debs libsoxr-dev libsoxr0 > /dev/null
rm -f .gpu/debs/libgomp1_*.deb
cp "$shared/build.sh" .gpu/
for rev in ${revs[@]+"${revs[@]}"}; do
  short=$(git rev-parse --short "$rev^{commit}") || { echo "prepare.sh: no revision $rev" >&2; exit 2; }
  git archive "$short" -- . ':(exclude)tests' ':(exclude)docs' > ".gpu/rev-$short.tar"
  echo "prepare.sh: .gpu/rev-$short.tar ($rev)"
done
echo "prepare.sh: .gpu/ holds $(ls .gpu/debs | wc -l) packages and build.sh; carry it with [\".gpu\"]"
