#!/usr/bin/env bash
# The binaries run on any x86-64 CPU: AVX/AVX2/FMA/BMI instructions appear only in the avx2 build of
# the CPU ops (namespace zoo::kernels::cpu::avx2, picked at run time by cpu_dispatch.cpp), and that
# build defines no inline function the portable code could end up calling (a weak symbol outside
# its namespace: the linker keeps one copy of each, possibly the AVX2 one).
# Usage: portable_isa.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
build=$(cd "$2" && pwd)

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
case "$(uname -m)" in x86_64 | amd64) ;; *)
  echo "not an x86-64 host: nothing to check"
  exit 0
  ;;
esac
command -v objdump >/dev/null && command -v nm >/dev/null || fail "objdump and nm (binutils) are needed"
# A property of optimized (shipped) builds: at -O0 every object carries out-of-line weak copies of
# the library's inline functions (std::function's destructor, ...), the avx2 objects included, so a
# Debug build is not portable to CPUs without AVX2. Say so rather than pass or fail.
if grep -qE '^CMAKE_BUILD_TYPE:STRING=(Debug)?$' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "portable_isa: skipped: unoptimized build (Debug binaries are not portable; check a Release build)"
  exit 77
fi

objects=$(find "$build/kernels/CMakeFiles/zoo_kernels_avx2.dir" -name '*.o' | sort)
[[ -n "$objects" ]] || fail "no objects of the avx2 kernels under $build/kernels/CMakeFiles/zoo_kernels_avx2.dir"
echo "== avx2 objects define nothing outside zoo::kernels::cpu::avx2 except local symbols"
for o in $objects; do
  # Global and weak definitions (T, W, V, D, B, R, u ...); locals (lowercase t/d/b/r) are private to the object.
  # DW.ref.__gxx_personality_v0 is a pointer to the C++ runtime's personality routine, not code.
  leaks=$(nm -C --defined-only "$o" | awk '$2 ~ /^[A-Zuvw]$/ && $3 !~ /^DW\.ref\./' |
    grep -v 'zoo::kernels::cpu::avx2::' || true)
  [[ -z "$leaks" ]] || fail "$(basename "$o") defines symbols the portable code could bind to:
$leaks"
done

# Instructions a baseline x86-64 CPU lacks: every VEX/EVEX form (mnemonics starting with v, but not
# verr/verw), and BMI1/BMI2/LZCNT/MOVBE (tzcnt is left out: it runs as bsf on older CPUs and GCC
# emits it for __builtin_ctz in baseline code).
isa_re='^(v[a-z0-9]+|andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx|lzcnt|movbe)$'
binaries=("$build/bin/zoo" "$build"/lib/*.so "$build"/lib/zoo/plugins/*.so)
echo "== AVX2-era instructions only inside zoo::kernels::cpu::avx2 (${#binaries[@]} binaries)"
avx2_functions=0
for bin in "${binaries[@]}"; do
  [[ -f "$bin" ]] || continue
  report=$(objdump -d --no-show-raw-insn -C "$bin" | awk -v re="$isa_re" '
    /^[0-9a-f]+ <.*>:$/ { fn = $0; sub(/^[0-9a-f]+ </, "", fn); sub(/>:$/, "", fn); next }
    /^ +[0-9a-f]+:\t/ {
      split($0, parts, "\t"); split(parts[2], words, " "); op = words[1]
      if (op ~ re && op != "verr" && op != "verw") {
        if (fn ~ /zoo::kernels::cpu::avx2::/) ok[fn] = 1; else bad[fn] = bad[fn] " " op
      }
    }
    END { for (f in bad) print "BAD " f ":" bad[f]; n = 0; for (f in ok) n++; print "OK " n }')
  bad=$(grep '^BAD ' <<<"$report" | cut -c5- | head -n 20 || true)
  [[ -z "$bad" ]] || fail "$(basename "$bin") runs AVX2-era instructions outside the dispatched kernels:
$bad"
  avx2_functions=$((avx2_functions + $(grep '^OK ' <<<"$report" | cut -c4-)))
done
# The check above must have looked at real code: the dispatched AVX2 kernels are there.
((avx2_functions > 0)) || fail "found no AVX2 code at all in zoo::kernels::cpu::avx2 (is the avx2 build missing?)"
echo "$avx2_functions functions with AVX2 code, all in zoo::kernels::cpu::avx2"
echo PASS
