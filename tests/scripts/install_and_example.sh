#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds examples/bigram_plugin out of tree against it
# (find_package(Zoo)), and checks that the installed zoo lists that plugin and finds its own
# installed plugins by default.
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
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log" >&2; fail "cmake --install"; }
zoo="$prefix/bin/zoo"
[[ -x "$zoo" ]] || fail "no $zoo after install"
[[ -f "$prefix/lib/cmake/Zoo/ZooConfig.cmake" || -n "$(find "$prefix" -name ZooConfig.cmake)" ]] ||
  fail "no ZooConfig.cmake installed"
# Test-only plugins must never reach an install.
if find "$prefix" -name 'libzoo_test_*' | grep -q .; then
  fail "test plugins were installed: $(find "$prefix" -name 'libzoo_test_*')"
fi

echo "== configure and build examples/bigram_plugin against the install"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$src/examples/bigram_plugin" -B "$example_build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log" >&2; fail "configure"; }
cmake --build "$example_build" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log" >&2; fail "build"; }
plugin="$example_build/libzoo_bigram.so"
[[ -f "$plugin" ]] || fail "no $plugin after the build"
# The descriptor must be exported although the plugin is built with hidden visibility.
if command -v nm >/dev/null; then
  nm -D --defined-only "$plugin" | grep -q ' zoo_plugin_descriptor$' || fail "zoo_plugin_descriptor not exported"
  nm -D --defined-only "$plugin" | grep -q ' zoo_plugin_create$' || fail "zoo_plugin_create not exported"
fi

echo "== the installed zoo lists the example"
out=$("$zoo" plugins --plugin-dir "$example_build") || fail "zoo plugins exited with $?"
echo "$out"
row=$(grep -E '^bigram[[:space:]]' <<<"$out") || fail "bigram not listed"
grep -q 'bigram_lm' <<<"$row" || fail "bigram row lacks its model type: $row"
grep -qF "$plugin" <<<"$row" || fail "bigram row lacks its path: $row"

json=$("$zoo" plugins --json --plugin-dir "$example_build") || fail "zoo plugins --json exited with $?"
grep -q '"bigram_lm"' <<<"$json" || fail "bigram_lm missing from --json output"

# ZOO_PLUGIN_PATH is another way to point at it.
ZOO_PLUGIN_PATH="$tmp/nowhere:$example_build" "$zoo" plugins | grep -qE '^bigram[[:space:]]' ||
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
done
grep -E '^qwen3[[:space:]]' <<<"$out" | grep -qF "zoo/plugins/libzoo_qwen3.so" || fail "qwen3 is installed but not listed"

echo "== installing the example into the prefix makes it a default plugin"
cmake --install "$example_build" --prefix "$prefix" >/dev/null || fail "installing the example"
out=$(cd "$tmp" && env -u ZOO_PLUGIN_PATH "$zoo" plugins) || fail "zoo plugins exited with $?"
grep -E '^bigram[[:space:]]' <<<"$out" | grep -qF "zoo/plugins/libzoo_bigram.so" ||
  fail "the installed example is not found in the default plugin dir: $out"

echo "PASS"
