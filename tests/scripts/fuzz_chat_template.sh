#!/usr/bin/env bash
# Fuzzes the chat-template renderer (libFuzzer + ASan + UBSan) for 20 s (FUZZ_SECONDS sets it),
# seeded with the project's own templates. Usage: fuzz_chat_template.sh SOURCE_DIR BUILD_DIR.
# Fails without clang++ unless ZOO_FUZZ=skip (then exit 77: skipped). See tests/fuzz/fuzz_lib.sh.
src=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
source "$src/tests/fuzz/fuzz_lib.sh" "$src" "${2:-$src/build}"

seeds=$FUZZ_OUT/seeds-chat-template
rm -rf "$seeds" && mkdir -p "$seeds"
cp "$FUZZ_SRC"/tests/fixtures/chat/templates/*.jinja "$seeds/"
fuzz_dict "$FUZZ_OUT/chat-template.dict" '{{' '}}' '{%' '%}' '{#' '#}' '{%-' '-%}' '{{-' '-}}' if elif else endif for \
  endfor in recursive set endset macro endmacro namespace raw endraw filter endfilter break continue loop. \
  messages tools tojson trim length items list join selectattr rejectattr equalto defined none is not and or \
  "'" '"' '[' ']' '(' ')' '|' '~' '**' '//' raise_exception range strftime_now
fuzz_target fuzz_chat_template 20 "$seeds" "$FUZZ_OUT/chat-template.dict"
