#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds examples/bigram_plugin, examples/dense_plugin
# (validated against a transformers golden) and the plugin snippets
# of docs/plugins.md out of tree against it (find_package(Zoo)), and checks that the installed zoo
# lists those plugins and finds its own installed plugins by default. Also checks the SDK boundary:
# a plugin compiles with yaml-cpp and Boost headers that #error and configures with neither package
# findable, links the SDK and not the host library, and a plugin with an undefined symbol fails to
# link; the package states its CUDA dependency as the build has it.
# Usage: install_and_example.sh SOURCE_DIR BUILD_DIR
set -euo pipefail

src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zoo-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
example_build="$tmp/example-build"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

echo "== install $build into $prefix"
# Plugins built out of tree must see the dependencies the build saw (README: the same nlohmann json
# release), so they search the build's own CMAKE_PREFIX_PATH after the install.
deps=$(sed -n 's/^CMAKE_PREFIX_PATH:[A-Z]*=//p' "$build/CMakeCache.txt")
search="$prefix${deps:+;$deps}"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log" >&2; fail "cmake --install"; }
zoo="$prefix/bin/zoo"
[[ -x "$zoo" ]] || fail "no $zoo after install"
[[ -f "$prefix/lib/cmake/Zoo/ZooConfig.cmake" || -n "$(find "$prefix" -name ZooConfig.cmake)" ]] ||
  fail "no ZooConfig.cmake installed"
# Test-only plugins must never reach an install.
if [[ -n $(find "$prefix" -name 'libzoo_test_*') ]]; then
  fail "test plugins were installed: $(find "$prefix" -name 'libzoo_test_*')"
fi

# Headers a plugin must never include (they belong to the host): found first, they stop the build.
poison="$tmp/poison"
for header in boost/config.hpp boost/dll/alias.hpp boost/dll/shared_library.hpp yaml-cpp/yaml.h; do
  mkdir -p "$poison/$(dirname "$header")"
  printf '#error "a plugin included <%s>: the Zoo SDK must not need it"\n' "$header" >"$poison/$header"
done
sdk_flags=(-DCMAKE_CXX_FLAGS="-I$poison" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
           -DCMAKE_DISABLE_FIND_PACKAGE_yaml-cpp=ON -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON)

# A plugin's libraries: the SDK (directly or through layers), never the host library or its dependencies.
# (Outputs are captured before grep -q reads them: under pipefail, `ldd | grep -q` fails at random
# when grep exits before ldd has written everything.)
check_plugin_links() {
  local so=$1 needed loaded
  needed=$(readelf -d "$so") || fail "readelf -d $so"
  needed=$(grep NEEDED <<<"$needed")
  loaded=$(ldd "$so") || fail "ldd $so"
  grep -q 'libzoo_sdk\.so' <<<"$loaded" || fail "$so does not load libzoo_sdk: $loaded"
  if grep -qE 'libzoo_framework|yaml-cpp|boost' <<<"$needed"; then fail "$so links host libraries: $needed"; fi
  # ... nor through the Zoo libraries it links (ldd resolves them through the RPATH).
  if grep -qE 'libzoo_framework|yaml-cpp' <<<"$loaded"; then fail "$so loads host libraries: $loaded"; fi
}

echo "== configure and build examples/bigram_plugin against the install"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$src/examples/bigram_plugin" -B "$example_build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$search" "${sdk_flags[@]}" >"$tmp/configure.log" 2>&1 ||
  { cat "$tmp/configure.log" >&2; fail "configure"; }
cmake --build "$example_build" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log" >&2; fail "build"; }
plugin="$example_build/libzoo_bigram.so"
[[ -f "$plugin" ]] || fail "no $plugin after the build"
# The descriptor must be exported although the plugin is built with hidden visibility.
if command -v nm >/dev/null; then
  symbols=$(nm -D --defined-only "$plugin")
  grep -q ' zoo_plugin_descriptor$' <<<"$symbols" || fail "zoo_plugin_descriptor not exported"
  grep -q ' zoo_plugin_create$' <<<"$symbols" || fail "zoo_plugin_create not exported"
fi
check_plugin_links "$plugin"
if grep -qiE 'yaml|boost' "$example_build/compile_commands.json"; then
  fail "the plugin's compile commands name yaml-cpp or Boost: $(cat "$example_build/compile_commands.json")"
fi

echo "== the snippets of docs/plugins.md build as written, and -z defs catches an undefined symbol"
# Each snippet is the fenced block after a '<!-- test: FILE -->' line.
snippet_dir="$tmp/snippet"
snippet_build="$tmp/snippet-build"
mkdir -p "$snippet_dir"
for file in my_plugin.cpp CMakeLists.txt; do
  awk -v marker="<!-- test: $file -->" '
    $0 == marker { armed = 1; next }
    armed && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' "$src/docs/plugins.md" >"$snippet_dir/$file"
  [[ -s "$snippet_dir/$file" ]] || fail "docs/plugins.md has no '<!-- test: $file -->' snippet"
done
# Appended, not part of the snippet: a plugin calling a function nobody defines, and what the
# package says about CUDA.
cat >"$snippet_dir/undefined.cpp" <<'CPP'
int zoo_test_nowhere_defined();
extern "C" __attribute__((visibility("default"))) int zoo_test_calls_nowhere() { return zoo_test_nowhere_defined(); }
CPP
cat >>"$snippet_dir/CMakeLists.txt" <<'CMAKE'
zoo_add_plugin(zoo_undefined SOURCES undefined.cpp)
set_target_properties(zoo_undefined PROPERTIES EXCLUDE_FROM_ALL ON)
message(STATUS "Zoo_WITH_CUDA=${Zoo_WITH_CUDA}")
CMAKE
cmake -S "$snippet_dir" -B "$snippet_build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$search" "${sdk_flags[@]}" >"$tmp/snippet-configure.log" 2>&1 ||
  { cat "$tmp/snippet-configure.log" >&2; fail "configure the docs/plugins.md snippet"; }
cmake --build "$snippet_build" >"$tmp/snippet-build.log" 2>&1 ||
  { cat "$tmp/snippet-build.log" >&2; fail "build the docs/plugins.md snippet"; }
check_plugin_links "$snippet_build/libzoo_mymodel.so"
out=$("$zoo" plugins --plugin-dir "$snippet_build") || fail "zoo plugins exited with $?"
grep -E '^mymodel[[:space:]]' <<<"$out" | grep -q 'my_lm' || fail "the snippet plugin is not listed: $out"
if cmake --build "$snippet_build" --target zoo_undefined >"$tmp/undefined.log" 2>&1; then
  fail "a plugin with an undefined symbol linked (no -z defs?)"
fi
grep -q 'zoo_test_nowhere_defined' "$tmp/undefined.log" || fail "the link error does not name the symbol: $(cat "$tmp/undefined.log")"
# Zoo_WITH_CUDA is true exactly when the installed kernels link the CUDA runtime.
kernels_so=$(find "$prefix" -name 'libzoo_kernels.so*' | head -n1)
if grep -q 'libcudart' <<<"$(readelf -d "$kernels_so")"; then want_cuda=ON; else want_cuda=OFF; fi
grep -q -- "-- Zoo_WITH_CUDA=$want_cuda\$" "$tmp/snippet-configure.log" ||
  fail "Zoo_WITH_CUDA is not $want_cuda: $(grep Zoo_WITH_CUDA "$tmp/snippet-configure.log")"

echo "== find_package(Zoo COMPONENTS framework) imports the host library"
mkdir -p "$tmp/host-project"
cat >"$tmp/host-project/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.24)
project(ZooHost LANGUAGES CXX)
find_package(Zoo REQUIRED COMPONENTS framework)
if(NOT TARGET Zoo::framework OR NOT TARGET Zoo::sdk)
  message(FATAL_ERROR "no Zoo::framework")
endif()
CMAKE
cmake -S "$tmp/host-project" -B "$tmp/host-build" "${generator[@]}" -DCMAKE_PREFIX_PATH="$search" \
  >"$tmp/host-configure.log" 2>&1 || { cat "$tmp/host-configure.log" >&2; fail "find_package(Zoo COMPONENTS framework)"; }

echo "== the installed zoo lists the example"
out=$("$zoo" plugins --plugin-dir "$example_build") || fail "zoo plugins exited with $?"
echo "$out"
row=$(grep -E '^bigram[[:space:]]' <<<"$out") || fail "bigram not listed"
grep -q 'bigram_lm' <<<"$row" || fail "bigram row lacks its model type: $row"
grep -qF "$plugin" <<<"$row" || fail "bigram row lacks its path: $row"

json=$("$zoo" plugins --json --plugin-dir "$example_build") || fail "zoo plugins --json exited with $?"
grep -q '"bigram_lm"' <<<"$json" || fail "bigram_lm missing from --json output"

# ZOO_PLUGIN_PATH is another way to point at it.
grep -qE '^bigram[[:space:]]' <<<"$(ZOO_PLUGIN_PATH="$tmp/nowhere:$example_build" "$zoo" plugins)" ||
  fail "bigram not found through ZOO_PLUGIN_PATH"

echo "== the installed zoo loads its own plugins from its plugin dir by default"
plugin_dir=$(find "$prefix" -type d -path '*/zoo/plugins' | head -n1)
[[ -n "$plugin_dir" ]] || fail "no */zoo/plugins directory under $prefix"
[[ -f "$plugin_dir/libzoo_qwen3.so" ]] || fail "the qwen3 plugin was not installed into $plugin_dir"
out=$(cd "$tmp" && env -u ZOO_PLUGIN_PATH "$zoo" plugins) || fail "zoo plugins exited with $?"
echo "$out"
# Every installed plugin must load: a row of the table (problems are indented lines below it).
if grep -qE '^[0-9]+ problems?:' <<<"$out"; then fail "the installed zoo cannot load an installed plugin"; fi
for so in "$plugin_dir"/*.so; do
  grep -E '^[^[:space:]]' <<<"$out" | grep -qF "zoo/plugins/$(basename "$so")" ||
    fail "the installed zoo does not load $so"
  check_plugin_links "$so"  # the shipped plugins too (and what they link, e.g. layers): SDK, not host
done
grep -E '^qwen3[[:space:]]' <<<"$out" | grep -qF "zoo/plugins/libzoo_qwen3.so" || fail "qwen3 is installed but not listed"

echo "== examples/dense_plugin: a new decoder family over the installed runtime, validated against transformers"
dense_build="$tmp/dense-build"
cmake -S "$src/examples/dense_plugin" -B "$dense_build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$search" "${sdk_flags[@]}" >"$tmp/dense-configure.log" 2>&1 ||
  { cat "$tmp/dense-configure.log" >&2; fail "configure examples/dense_plugin"; }
cmake --build "$dense_build" >"$tmp/dense-build.log" 2>&1 ||
  { cat "$tmp/dense-build.log" >&2; fail "build examples/dense_plugin"; }
check_plugin_links "$dense_build/libzoo_my_dense.so"
# The family is Qwen3's math under another name: a qwen3-tiny checkpoint relabelled as my_dense must
# pass transformers' Qwen3 golden under configs/qwen3-tiny.yaml's gates, served by the example.
ckpt="$tmp/my-dense-ckpt"
cp -r "$src/tests/fixtures/qwen3-tiny" "$ckpt"
sed -i -e 's/"model_type": "qwen3"/"model_type": "my_dense"/' -e 's/"Qwen3ForCausalLM"/"MyDenseForCausalLM"/' "$ckpt/config.json"
grep -q '"my_dense"' "$ckpt/config.json" || fail "could not relabel the checkpoint"
sed -e '/^ *plugin: qwen3/d' -e "s|checkpoint: .*|checkpoint: $ckpt|" \
  -e "s|\.\./tests/fixtures/qwen3-tiny/|$src/tests/fixtures/qwen3-tiny/|g" "$src/configs/qwen3-tiny.yaml" >"$tmp/my-dense.yaml"
printf 'plugins:\n  paths: [%s]\n' "$dense_build" >>"$tmp/my-dense.yaml"
out=$("$zoo" validate "$tmp/my-dense.yaml" 2>&1) || fail "zoo validate with the example plugin failed: $out"
grep -q "result: PASS" <<<"$out" || fail "zoo validate did not pass: $out"
grep -qE "my_dense" <<<"$("$zoo" plan "$tmp/my-dense.yaml" 2>&1)" || fail "zoo plan does not name the my_dense plugin"

echo "== installing the example into the prefix makes it a default plugin"
cmake --install "$example_build" --prefix "$prefix" >/dev/null || fail "installing the example"
out=$(cd "$tmp" && env -u ZOO_PLUGIN_PATH "$zoo" plugins) || fail "zoo plugins exited with $?"
grep -E '^bigram[[:space:]]' <<<"$out" | grep -qF "zoo/plugins/libzoo_bigram.so" ||
  fail "the installed example is not found in the default plugin dir: $out"

echo "PASS"
