#!/usr/bin/env bash
# `zoo serve` with the real `openai` Python client over loopback (skipped, exit 77, where the
# package is missing: `pip install openai`): models, completions and chat, streamed and not, equal to
# `zoo generate` for the same prompts; errors arrive as the client's typed exceptions with the param;
# tool calls and reasoning from a scripted model (whole, streamed, a second turn, tool_choice).
# Usage: serve_openai.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-serve-openai "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib/serve_helpers.sh"
python3 -c "import openai" 2>/dev/null || { echo "SKIPPED: the openai package is not installed (pip install openai)"; exit 77; }
mkdir -p "$TMP/model"
ln -s "$FIX/qwen3-tiny-text"/* "$TMP/model/"
cp "$FIX/chat/chatml/tokenizer_config.json" "$TMP/model/"
M=$TMP/model
printf '%s\n' '"Hello world"' '"The cat sat on the mat"' >"$TMP/prompts.jsonl"
run reference generate "$M" --input "$TMP/prompts.jsonl" -n 10 --ignore-eos -q
rc 0
cp "$TMP/out" "$TMP/text.jsonl"
run chat-reference generate "$M" --input "$TMP/prompts.jsonl" --chat -n 10 --ignore-eos -q
rc 0
cp "$TMP/out" "$TMP/chat.jsonl"
start_server "$M" --served-model-name tiny --api-key k1
((cases++))
python3 - "$BASE" "$TMP" <<'PY' || fail "openai client checks (above)"
import json, sys, openai
base, tmp = sys.argv[1], sys.argv[2]
prompts = [json.loads(l) for l in open(f"{tmp}/prompts.jsonl")]
text_ref = [json.loads(l)["text"] for l in open(f"{tmp}/text.jsonl")]
chat_ref = [json.loads(l)["text"] for l in open(f"{tmp}/chat.jsonl")]
client = openai.OpenAI(base_url=base + "/v1", api_key="k1", timeout=30, max_retries=0)
failures = []
def check(cond, what):
    if not cond:
        failures.append(what); print("FAIL:", what)
check([m.id for m in client.models.list().data] == ["tiny"], "models.list")
extra = {"ignore_eos": True}
for p, want in zip(prompts, text_ref):
    r = client.completions.create(model="tiny", prompt=p, max_tokens=10, temperature=0, extra_body=extra)
    check(r.choices[0].text == want and r.usage.completion_tokens == 10, f"completion {p!r}: {r}")
    s = client.completions.create(model="tiny", prompt=p, max_tokens=10, temperature=0, stream=True, extra_body=extra)
    check("".join(c.choices[0].text for c in s if c.choices) == want, f"streamed completion {p!r}")
for p, want in zip(prompts, chat_ref):
    r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": p}], max_tokens=10,
                                       temperature=0, extra_body=extra)
    check(r.choices[0].message.content == want and r.choices[0].message.role == "assistant", f"chat {p!r}: {r}")
    s = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": p}], max_tokens=10,
                                       temperature=0, stream=True, stream_options={"include_usage": True}, extra_body=extra)
    chunks = list(s)
    check("".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == want, f"streamed chat {p!r}")
    check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 10, f"usage chunk {chunks[-1]}")
try:
    client.completions.create(model="tiny", prompt="x", max_tokens=5, logit_bias={"1": 300})
    check(False, "logit_bias accepted")
except openai.BadRequestError as e:
    check(e.status_code == 400 and e.body["param"] == "logit_bias", f"logit_bias error {e.body}")
try:
    client.completions.create(model="other", prompt="x", max_tokens=5)
    check(False, "unknown model accepted")
except openai.NotFoundError as e:
    check(e.body["code"] == "model_not_found", f"model error {e.body}")
try:
    openai.OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0).models.list()
    check(False, "wrong key accepted")
except openai.AuthenticationError:
    pass
sys.exit(1 if failures else 0)
PY
stop_server
[[ $SERVER_RC == 0 ]] || fail "SIGTERM: exit $SERVER_RC"

# Tools and reasoning: a model whose answers are a script (tools/fixtures/make_scripted_chat_fixture.py:
# reasoning, then a get_weather call; with thinking off, an answer), through its own Qwen3-shaped
# template. The client sees reasoning_content, tool_calls (whole and as streamed deltas), a second
# turn after the tool's result, tool_choice none and a named function.
start_server "$FIX/chat-scripted" --served-model-name scripted
grep -q "reasoning think, tool calls hermes" "$TMP/server.err" || fail "syntax not reported: $(cat "$TMP/server.err")"
((cases++))
python3 - "$BASE" <<'PY' || fail "openai client tool checks (above)"
import json, sys, openai
client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="none", timeout=30, max_retries=0)
failures = []
def check(cond, what):
    if not cond:
        failures.append(what); print("FAIL:", what)
tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather now",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
         {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]
messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is the weather in Paris?"}]
want_args = {"city": "Paris", "unit": "celsius"}
reasoning = "\nThe user wants the weather in Paris.\n"
r = client.chat.completions.create(model="scripted", messages=messages, tools=tools, max_tokens=32)
m, c = r.choices[0].message, r.choices[0]
check(c.finish_reason == "tool_calls", f"finish {c.finish_reason}")
check(m.content is None, f"content {m.content!r}")
check(getattr(m, "reasoning_content", None) == reasoning, f"reasoning {m!r}")
check(m.tool_calls and len(m.tool_calls) == 1 and m.tool_calls[0].type == "function"
      and m.tool_calls[0].function.name == "get_weather" and json.loads(m.tool_calls[0].function.arguments) == want_args
      and m.tool_calls[0].id.startswith("call_"), f"tool_calls {m.tool_calls}")
# Streamed: reasoning pieces (the closing tag was split over tokens), then the call as a delta.
s = client.chat.completions.create(model="scripted", messages=messages, tools=tools, max_tokens=32, stream=True)
pieces, calls, finish = [], {}, None
for chunk in s:
    if not chunk.choices:
        continue
    d = chunk.choices[0].delta
    if getattr(d, "reasoning_content", None):
        pieces.append(d.reasoning_content)
    check(not d.content, f"streamed content {d.content!r}")
    for tc in d.tool_calls or []:
        slot = calls.setdefault(tc.index, {"id": tc.id, "name": "", "arguments": ""})
        slot["name"] += tc.function.name or ""
        slot["arguments"] += tc.function.arguments or ""
    finish = chunk.choices[0].finish_reason or finish
check("".join(pieces) == reasoning and all("</think" not in p and "<think" not in p for p in pieces), f"streamed reasoning {pieces}")
check(len(calls) == 1 and calls[0]["name"] == "get_weather" and json.loads(calls[0]["arguments"]) == want_args
      and calls[0]["id"].startswith("call_"), f"streamed calls {calls}")
check(finish == "tool_calls", f"streamed finish {finish}")
# The second turn: the call and its result go back; thinking off (chat_template_kwargs): the answer.
messages += [{"role": "assistant", "content": None, "tool_calls": [m.tool_calls[0].model_dump()]},
             {"role": "tool", "tool_call_id": m.tool_calls[0].id, "content": json.dumps({"celsius": 18})}]
r = client.chat.completions.create(model="scripted", messages=messages, tools=tools, max_tokens=32,
                                   extra_body={"chat_template_kwargs": {"enable_thinking": False}})
m = r.choices[0].message
check(m.content == "It is 18 degrees in Paris." and not m.tool_calls and r.choices[0].finish_reason == "stop"
      and getattr(m, "reasoning_content", None) is None, f"second turn {m} {r.choices[0].finish_reason}")
s = client.chat.completions.create(model="scripted", messages=messages, tools=tools, max_tokens=32, stream=True,
                                   extra_body={"chat_template_kwargs": {"enable_thinking": False}})
check("".join(ch.choices[0].delta.content or "" for ch in s if ch.choices) == "It is 18 degrees in Paris.", "streamed second turn")
# tool_choice none: the call stays text.
r = client.chat.completions.create(model="scripted", messages=messages[:2], tools=tools, tool_choice="none", max_tokens=32)
m = r.choices[0].message
check(not m.tool_calls and "<tool_call>" in (m.content or "") and r.choices[0].finish_reason == "stop", f"tool_choice none {m}")
# A named function: its opening is put in the prompt, so the answer is that call.
r = client.chat.completions.create(model="scripted", messages=messages[:2], tools=tools, max_tokens=32,
                                   tool_choice={"type": "function", "function": {"name": "get_time"}})
m = r.choices[0].message
check(m.tool_calls and m.tool_calls[0].function.name == "get_time" and json.loads(m.tool_calls[0].function.arguments) == {"zone": "CET"},
      f"named tool_choice {m}")
# Refused: required, a name not among the tools, a malformed tool.
for kw, param in [({"tool_choice": "required"}, "tool_choice"),
                  ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
                  ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools")]:
    try:
        args = dict({"model": "scripted", "messages": messages[:2], "tools": tools, "max_tokens": 8}, **kw)
        client.chat.completions.create(**args)
        check(False, f"{kw} accepted")
    except openai.BadRequestError as e:
        check(e.body["param"] == param, f"{kw}: {e.body}")
sys.exit(1 if failures else 0)
PY
stop_server
[[ $SERVER_RC == 0 ]] || fail "SIGTERM (scripted): exit $SERVER_RC"
echo "$cases cases, $failures failures"
((failures == 0))
