#!/usr/bin/env bash
# `zoo serve` with the real `openai` Python client over loopback (skipped, exit 77, where the
# package is missing: `pip install openai`): models, completions and chat, streamed and not, equal to
# `zoo generate` for the same prompts; errors arrive as the client's typed exceptions with the param.
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
    client.completions.create(model="tiny", prompt="x", max_tokens=5, logit_bias={"1": 3})
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
echo "$cases cases, $failures failures"
((failures == 0))
