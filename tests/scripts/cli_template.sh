#!/usr/bin/env bash
# `zoo template MODEL --messages F.json`: prints exactly what transformers renders (the texts
# compared are goldens made by transformers, tests/fixtures/chat/goldens.json), no newline added;
# a template's raise_exception exits 1 with its message naming the file; bad or missing inputs
# exit 2 with one line naming the file.
# Usage: cli_template.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-cli-template "$@"
GOLD=$FIX/chat/goldens.json

# golden TEMPLATE CONVERSATION GENERATION_PROMPT VARIABLES_JSON: writes $TMP/m (the template as
# chat_template.jinja), $TMP/messages.json, $TMP/tools.json (when it has tools) and $TMP/want.
golden() {
  python3 - "$GOLD" "$FIX/chat/templates" "$TMP" "$@" <<'PY'
import json, pathlib, shutil, sys
gold, templates, tmp, name, conv, agp, variables = sys.argv[1:]
doc = json.load(open(gold, encoding="utf-8"))
tmp = pathlib.Path(tmp)
(tmp / "m").mkdir(exist_ok=True)
shutil.copy(pathlib.Path(templates) / name, tmp / "m/chat_template.jinja")
(tmp / "m/tokenizer_config.json").write_text("{}")
c = doc["conversations"][conv]
(tmp / "messages.json").write_text(json.dumps(c["messages"], ensure_ascii=False), encoding="utf-8")
if c["tools"] is not None:
    (tmp / "tools.json").write_text(json.dumps(c["tools"], ensure_ascii=False), encoding="utf-8")
for case in doc["cases"]:
    if case["template"] == name and case["conversation"] == conv and case["add_generation_prompt"] == (agp == "true") \
            and case["variables"] == json.loads(variables):
        (tmp / "want").write_bytes(case["text"].encode() if "text" in case else b"")
        (tmp / "want_error").write_text(case.get("error", {}).get("message", ""))
        break
else:
    sys.exit(f"no golden for {name} {conv} {agp} {variables}")
PY
}

golden thinking.jinja reasoning true '{}' || fail "golden"
run "prints the render exactly" template "$TMP/m" --messages "$TMP/messages.json"
rc 0
cmp -s "$TMP/out" "$TMP/want" || fail "stdout differs from transformers: $(head -c 300 "$TMP/out")"

golden thinking.jinja reasoning false '{"enable_thinking": false}' || fail "golden"
run "--no-generation-prompt and --set" template "$TMP/m" --messages "$TMP/messages.json" --no-generation-prompt --set enable_thinking=false
rc 0
cmp -s "$TMP/out" "$TMP/want" || fail "stdout differs from transformers: $(head -c 300 "$TMP/out")"
golden thinking.jinja reasoning true '{"enable_thinking": false}' || fail "golden"
run "--set enable_thinking=false" template "$TMP/m" --messages "$TMP/messages.json" --set enable_thinking=false
rc 0
cmp -s "$TMP/out" "$TMP/want" || fail "stdout differs from transformers: $(head -c 300 "$TMP/out")"

golden tools.jinja tool_call_and_result true '{}' || fail "golden"
run "--tools" template "$TMP/m" --messages "$TMP/messages.json" --tools "$TMP/tools.json"
rc 0
cmp -s "$TMP/out" "$TMP/want" || fail "--tools: stdout differs from transformers: $(head -c 300 "$TMP/out")"
# The same conversation as one request-shaped object, from stdin.
python3 -c 'import json,sys; print(json.dumps({"messages": json.load(open(sys.argv[1])), "tools": json.load(open(sys.argv[2]))}))' \
  "$TMP/messages.json" "$TMP/tools.json" >"$TMP/request.json"
CASE="--messages - (an object with messages and tools)"
"$ZOO" template "$TMP/m" --messages - <"$TMP/request.json" >"$TMP/out" 2>"$TMP/err" || fail "rc $?: $(cat "$TMP/err")"
cmp -s "$TMP/out" "$TMP/want" || fail "stdin request: stdout differs"

golden expressions.jinja non_ascii true '{"custom_flag": "on", "custom_list": ["a", 1, 2.5]}' || fail "golden"
run "--date and --set lists" template "$TMP/m" --messages "$TMP/messages.json" --date 2025-03-07 --set custom_flag='"on"' \
  --set 'custom_list=["a", 1, 2.5]'
rc 0
cmp -s "$TMP/out" "$TMP/want" || fail "stdout differs from transformers: $(diff <(cat "$TMP/out") <(cat "$TMP/want") | head -5)"

# The template's own refusal: exit 1, its message, the file named, one line.
golden features.jinja two_users true '{"bos_token": "<s>", "eos_token": "</s>"}' || fail "golden"
run "raise_exception" template "$TMP/m" --messages "$TMP/messages.json"
rc 1
has err "$TMP/m/chat_template.jinja: $(cat "$TMP/want_error")"
(($(wc -l <"$TMP/err") == 1)) || fail "raise: more than one line: $(cat "$TMP/err")"
[[ -s $TMP/out ]] && fail "raise: printed a partial render"

# Bad inputs: exit 2, one line naming the file or the flag.
printf '[{"role": "user", "content": "x"' >"$TMP/bad.json"
run "messages not JSON" template "$TMP/m" --messages "$TMP/bad.json"
rc 2
has err "$TMP/bad.json: not valid JSON"
printf '{"role": "user"}' >"$TMP/obj.json"
run "messages not a list" template "$TMP/m" --messages "$TMP/obj.json"
rc 2
has err "$TMP/obj.json: expected a JSON list of messages"
printf '[1]' >"$TMP/num.json"
run "a message not an object" template "$TMP/m" --messages "$TMP/num.json"
rc 2
has err "$TMP/num.json: message 0 is not a JSON object"
run "missing messages file" template "$TMP/m" --messages "$TMP/none.json"
rc 2
has err "$TMP/none.json"
printf '{"a": 1}' >"$TMP/tools-obj.json"
run "tools not a list" template "$TMP/m" --messages "$TMP/messages.json" --tools "$TMP/tools-obj.json"
rc 2
has err "$TMP/tools-obj.json: expected a JSON list of tools"
run "--set bad JSON" template "$TMP/m" --messages "$TMP/messages.json" --set enable_thinking=nope
rc 2
has err "--set enable_thinking: not valid JSON"
run "--set without =" template "$TMP/m" --messages "$TMP/messages.json" --set enable_thinking
rc 2
has err "--set enable_thinking: expected KEY=JSON"
run "--date malformed" template "$TMP/m" --messages "$TMP/messages.json" --date 2025-13-01
rc 2
has err "--date 2025-13-01: expected YYYY-MM-DD"
run "--template unknown" template "$TMP/m" --messages "$TMP/messages.json" --template nope
rc 2
has err "$TMP/m/tokenizer_config.json: no chat template named \"nope\""
printf '{%% for m in messages %%}\n{{ m.content }\n' >"$TMP/m/chat_template.jinja"
run "template syntax error" template "$TMP/m" --messages "$TMP/messages.json"
rc 2
has err "$TMP/m/chat_template.jinja:2: syntax error"
# A runaway template is stopped, named, not a hang.
printf '{%% macro f(n) %%}{{ f(n + 1) }}{%% endmacro %%}{{ f(0) }}' >"$TMP/m/chat_template.jinja"
CASE="runaway recursion"
timeout 30 "$ZOO" template "$TMP/m" --messages "$TMP/messages.json" >"$TMP/out" 2>"$TMP/err"
RC=$?
rc 2
has err "$TMP/m/chat_template.jinja:1:"
# Named templates of a tokenizer_config.json list: tool_use with --tools, else default, or --template.
rm "$TMP/m/chat_template.jinja"
printf '{"bos_token": {"content": "<B>"}, "chat_template": [{"name": "default", "template": "D{{ bos_token }}"}, {"name": "tool_use", "template": "T{{ tools|length if tools else 0 }}"}]}' >"$TMP/m/tokenizer_config.json"
run "default of a list" template "$TMP/m" --messages "$TMP/messages.json"
rc 0
[[ $(cat "$TMP/out") == "D<B>" ]] || fail "default template: $(cat "$TMP/out")"
run "tool_use with --tools" template "$TMP/m" --messages "$TMP/messages.json" --tools "$TMP/tools.json"
rc 0
[[ $(cat "$TMP/out") == "T2" ]] || fail "tool_use template: $(cat "$TMP/out")"
run "--template NAME" template "$TMP/m" --messages "$TMP/messages.json" --template tool_use
rc 0
[[ $(cat "$TMP/out") == "T0" ]] || fail "--template tool_use: $(cat "$TMP/out")"

echo "$cases cases, $failures failures"
((failures == 0))
