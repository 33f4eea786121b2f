#!/usr/bin/env bash
# `zoo serve` over loopback with curl and Python's http.client (bounded: a tiny fixture, every
# request with a timeout): health, models, greedy completions equal to `zoo generate --input` for
# the same prompts alone and under 16 concurrent requests, streaming (deltas add up to the whole,
# usage, [DONE]), stop strings, seeds, n and lists of prompts, echo with prompt logprobs (checked
# against the distributions sampling reports), OpenAI-shaped errors with the param named, the API
# key, a client that leaves mid-stream, a request timeout, a load test at concurrency 1, 8 and 64,
# and SIGTERM draining to exit 0.
# Usage: serve.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-serve "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib/serve_helpers.sh"
command -v curl >/dev/null || { echo "SKIPPED: no curl"; exit 77; }
command -v python3 >/dev/null || { echo "SKIPPED: no python3"; exit 77; }
M=$FIX/qwen3-tiny-text
# The same model with a ChatML chat template, for /v1/chat/completions.
mkdir -p "$TMP/chat-model"
ln -s "$M"/* "$TMP/chat-model/"
cp "$FIX/chat/chatml/tokenizer_config.json" "$TMP/chat-model/"
M=$TMP/chat-model

# What `zoo generate --input` gives for the prompts the client test sends (greedy).
printf '%s\n' '"Hello world"' '"The cat sat on the mat"' '"A"' '"Once upon a time there was"' >"$TMP/prompts.jsonl"
run generate-reference generate "$M" --input "$TMP/prompts.jsonl" -n 12 --ignore-eos -q
rc 0
cp "$TMP/out" "$TMP/reference.jsonl"
run generate-chat-reference generate "$M" --input "$TMP/prompts.jsonl" --chat -n 12 --ignore-eos -q
rc 0
cp "$TMP/out" "$TMP/chat-reference.jsonl"
# Penalties (greedy): the engine applies them on the runner's device.
printf '%s\n' '{"prompt": "Hello world", "repetition_penalty": 1.8}' \
  '{"prompt": "A", "frequency_penalty": 1.5, "presence_penalty": 0.5}' >"$TMP/penalties.jsonl"
run generate-penalties-reference generate "$M" --input "$TMP/penalties.jsonl" -n 12 --ignore-eos -q
rc 0
cp "$TMP/out" "$TMP/penalties-reference.jsonl"

start_server "$M" --max-running 64 --max-queue 300 --served-model-name tiny --warmup 4
((cases++))
grep -q "warm-up: 4 text requests at once in" "$TMP/server.err" || fail "no warm-up line: $(cat "$TMP/server.err")"
((cases++))
curl -sf --max-time 5 "$BASE/health" | grep -q '"ok"' || fail "health: $(curl -s "$BASE/health")"
((cases++))
curl -sf --max-time 5 "$BASE/v1/models" | grep -q '"id":"tiny"' || fail "models: $(curl -s "$BASE/v1/models")"

((cases++))
python3 - "$BASE" "$TMP/reference.jsonl" <<'PY' || fail "client checks (above)"
import http.client, json, sys, threading, urllib.parse
base, reference = sys.argv[1], [json.loads(l) for l in open(sys.argv[2])]
host = urllib.parse.urlparse(base)
failures = []

def request(method, path, body=None, headers=None, raw=None):
    c = http.client.HTTPConnection(host.hostname, host.port, timeout=30)
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    c.request(method, path, body=data, headers=dict({"Content-Type": "application/json"}, **(headers or {})))
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, text, r

def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)

def complete(prompt, **kw):
    status, text, _ = request("POST", "/v1/completions", dict({"model": "tiny", "prompt": prompt, "max_tokens": 12, "temperature": 0, "ignore_eos": True}, **kw))
    check(status == 200, f"completion {prompt!r} {kw}: {status} {text[:300]}")
    return json.loads(text) if status == 200 else None

def stream(prompt, **kw):
    status, text, r = request("POST", "/v1/completions", dict({"model": "tiny", "prompt": prompt, "max_tokens": 12, "temperature": 0, "ignore_eos": True, "stream": True}, **kw))
    check(status == 200 and r.getheader("Content-Type") == "text/event-stream", f"stream status {status} {r.getheader('Content-Type')}")
    events = [e[len("data: "):] for e in text.split("\n\n") if e.startswith("data: ")]
    check(events and events[-1] == "[DONE]", f"stream ends with [DONE]: {text[-200:]!r}")
    return [json.loads(e) for e in events[:-1]]

prompts = [json.loads(l) for l in open(sys.argv[2].replace("reference.jsonl", "prompts.jsonl"))]
# Greedy alone equals zoo generate --input.
for p, ref in zip(prompts, reference):
    got = complete(p)
    if got:
        check(got["choices"][0]["text"] == ref["text"], f"text of {p!r}: {got['choices'][0]['text']!r} != {ref['text']!r}")
        check(got["usage"]["completion_tokens"] == 12 and got["choices"][0]["finish_reason"] == "length", f"usage/finish {got}")
        check(got["object"] == "text_completion" and got["model"] == "tiny" and got["id"].startswith("cmpl-"), f"shape {got}")
# 16 at once: each equals its run alone.
results = [None] * 16
def worker(i):
    results[i] = complete(prompts[i % 4])
threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
[t.start() for t in threads]; [t.join(60) for t in threads]
for i, r in enumerate(results):
    check(r is not None and r["choices"][0]["text"] == reference[i % 4]["text"], f"concurrent {i}: {r}")
# Streaming: the deltas add up to the whole; usage when asked; the finish reason last.
chunks = stream(prompts[3], stream_options={"include_usage": True})
text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
check(text == reference[3]["text"], f"streamed {text!r} != {reference[3]['text']!r}")
check(len([c for c in chunks if c["choices"]]) >= 2, f"more than one chunk: {chunks}")
check(chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 12, f"usage chunk {chunks[-1]}")
check([c for c in chunks if c["choices"]][-1]["choices"][0]["finish_reason"] == "length", "finish reason in the last chunk")
# Token ids as the prompt, and a list of prompts: one choice each, in order.
ids = json.loads(request("POST", "/tokenize", {"prompt": prompts[0]})[1])["tokens"]
check(complete(ids)["choices"][0]["text"] == reference[0]["text"], "ids prompt")
both = complete([prompts[0], prompts[1]])
check([c["index"] for c in both["choices"]] == [0, 1] and both["choices"][1]["text"] == reference[1]["text"], f"list {both}")
check(json.loads(request("POST", "/detokenize", {"tokens": ids})[1])["prompt"] == prompts[0], "detokenize")
# A stop string cuts the text before it (also when streamed).
whole = reference[3]["text"]
stop = next((whole[i:i + 2] for i in range(3, len(whole) - 1) if "\ufffd" not in whole[i:i + 2] and whole.find(whole[i:i + 2]) == i), None)
if stop:
    got = complete(prompts[3], stop=[stop])
    check(got["choices"][0]["text"] == whole[:whole.find(stop)] and got["choices"][0]["finish_reason"] == "stop", f"stop {stop!r}: {got}")
    chunks = stream(prompts[3], stop=stop)
    check("".join(c["choices"][0]["text"] for c in chunks) == whole[:whole.find(stop)], f"streamed stop {chunks}")
# Seeds: the same seed repeats; n choices differ by their seeds.
a = complete(prompts[0], temperature=1.0, seed=5, n=2)
b = complete(prompts[0], temperature=1.0, seed=5, n=2)
check(a["choices"] == b["choices"] and len(a["choices"]) == 2, f"seeded n=2: {a} {b}")
# n choices of a long prompt compute it once: the others fork its whole pages (cached_tokens).
long_ids = list(range(200, 240))  # 40 tokens: 2 whole pages (of no other test here)
got = complete(long_ids, temperature=1.0, seed=9, n=4, max_tokens=4)
check(len(got["choices"]) == 4 and got["usage"]["prompt_tokens"] == 40
      and got["usage"]["prompt_tokens_details"]["cached_tokens"] == 32, f"n=4 sharing: {got['usage']}")
# Logprobs: one entry per token, the top n.
got = complete(prompts[0], logprobs=3, max_tokens=4)
lp = got["choices"][0]["logprobs"]
# (top_logprobs maps token text to logprob as OpenAI does: tokens with the same text share a key)
check(len(lp["token_logprobs"]) == 4 and all(1 <= len(t) <= 3 for t in lp["top_logprobs"]) and all(x <= 0 for x in lp["token_logprobs"]), f"logprobs {lp}")
check(all(max(t.values()) >= x - 1e-6 for t, x in zip(lp["top_logprobs"], lp["token_logprobs"])), f"top >= chosen {lp}")
# Echo: the prompt's text and tokens first (its first token's logprob null), then the completion.
s, text, _ = request("POST", "/tokenize", {"prompt": prompts[3]})
pids = json.loads(text)["tokens"]
got = complete(prompts[3], echo=True)
check(got["choices"][0]["text"] == prompts[3] + reference[3]["text"], f"echo text {got['choices'][0]['text']!r}")
got = complete(prompts[3], echo=True, logprobs=2, max_tokens=3)
lp = got["choices"][0]["logprobs"]
check(len(lp["tokens"]) == len(pids) + 3 and lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
      and all(x is not None and x <= 0 for x in lp["token_logprobs"][1:]) and lp["text_offset"][0] == 0
      and lp["text_offset"] == sorted(lp["text_offset"]), f"echo logprobs {lp}")
# Scoring agrees with sampling: the distribution an echo scores prompt token k against is the one a
# request for prompt[:k] samples its first token from (top entries and the token's logprob).
scored = complete(pids, echo=True, logprobs=5, max_tokens=0)
check(scored["choices"][0]["text"] == prompts[3] and scored["usage"]["completion_tokens"] == 0
      and scored["choices"][0]["finish_reason"] == "length", f"echo of max_tokens 0: {scored}")
slp = scored["choices"][0]["logprobs"]
for k in range(1, len(pids)):
    head = complete(pids[:k], logprobs=5, max_tokens=1)["choices"][0]["logprobs"]["top_logprobs"][0]
    mine = slp["top_logprobs"][k]
    check(mine.keys() == head.keys() and all(abs(mine[t] - head[t]) < 1e-4 for t in head),
          f"scored position {k}: {mine} vs sampled {head}")
    if slp["tokens"][k] in head:
        check(abs(slp["token_logprobs"][k] - head[slp["tokens"][k]]) < 1e-4, f"scored token {k}: {slp['token_logprobs'][k]} vs {head}")
# ... and streamed: a first chunk of the prompt, then the completion's deltas.
events = stream(prompts[3], echo=True, logprobs=1)
check(events and events[0]["choices"][0]["text"] == prompts[3]
      and len(events[0]["choices"][0]["logprobs"]["tokens"]) == len(pids)
      and "".join(e["choices"][0]["text"] for e in events if e["choices"]) == prompts[3] + reference[3]["text"],
      f"streamed echo {events[:2]}")
# Penalties: the same ids as zoo generate --input with the same fields, and not those without them.
for line, ref in zip(open(sys.argv[2].replace("reference.jsonl", "penalties.jsonl")),
                     open(sys.argv[2].replace("reference.jsonl", "penalties-reference.jsonl"))):
    fields, ref = json.loads(line), json.loads(ref)
    got = complete(fields.pop("prompt"), **fields)
    if got:
        check(got["choices"][0]["text"] == ref["text"], f"penalties {fields}: {got['choices'][0]['text']!r} != {ref['text']!r}")
check(reference[0]["text"] != json.loads(open(sys.argv[2].replace("reference.jsonl", "penalties-reference.jsonl")).readline())["text"],
      "repetition_penalty 1.8 changed nothing")
# logit_bias: +100 on one token makes every greedy pick that token; -100 on the greedy pick moves it.
got = complete(prompts[0], logit_bias={"42": 100}, logprobs=0)
check(got and all(t == got["choices"][0]["logprobs"]["tokens"][0] for t in got["choices"][0]["logprobs"]["tokens"]), f"logit_bias +100: {got}")
s, text, _ = request("POST", "/detokenize", {"tokens": [42] * 12})
check(got and got["choices"][0]["text"] == json.loads(text)["prompt"], f"logit_bias +100 text: {got} vs {text}")
first = complete(prompts[0], max_tokens=1, logprobs=1)
s, text, _ = request("POST", "/tokenize", {"prompt": first["choices"][0]["text"]})
ids = json.loads(text)["tokens"]
if len(ids) == 1:
    moved = complete(prompts[0], max_tokens=1, logit_bias={str(ids[0]): -100})
    check(moved["choices"][0]["text"] != first["choices"][0]["text"], f"logit_bias -100 kept the pick {moved}")
# Errors: OpenAI's shape, the param named.
for body, status, param in [
    ({"prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
    ({"prompt": "x", "logit_bias": {"one": 5}}, 400, "logit_bias"),
    ({"prompt": "x", "logit_bias": {"1": 500}}, 400, "logit_bias"),
    ({"prompt": "x", "logit_bias": {"100000": 5}}, 400, "logit_bias"),
    ({"prompt": "x", "frequency_penalty": 2.5}, 400, "frequency_penalty"),
    ({"prompt": "x", "presence_penalty": "much"}, 400, "presence_penalty"),
    ({"prompt": "x", "repetition_penalty": 0}, 400, "repetition_penalty"),
    ({"prompt": "x", "bogus": 1}, 400, "bogus"),
    ({"prompt": "x", "temperature": "hot"}, 400, "temperature"),
    ({"prompt": "x", "model": "other"}, 404, "model"),
    ({"prompt": "x " * 3000, "max_tokens": 2000}, 400, "max_tokens"),
    ({"max_tokens": 3}, 400, "prompt"),
    ({"prompt": [1, 2, 10**9]}, 400, "prompt"),
]:
    s, text, _ = request("POST", "/v1/completions", body)
    try:
        err = json.loads(text)["error"]
        check(s == status and err["param"] == param and err["message"] and err["type"], f"{body}: {s} {text[:200]}")
    except Exception as e:
        check(False, f"{body}: {s} {text[:200]} ({e})")
s, text, _ = request("POST", "/v1/completions", raw="{not json")
check(s == 400 and "error" in json.loads(text), f"bad JSON: {s} {text}")
s, text, _ = request("GET", "/v1/completions")
check(s == 405, f"GET completions: {s}")
s, text, _ = request("GET", "/nope")
check(s == 404 and "error" in json.loads(text), f"unknown path: {s}")
# Chat: a user message through the template equals `zoo generate --chat` for the same prompt.
chat_reference = [json.loads(l) for l in open(sys.argv[2].replace("reference.jsonl", "chat-reference.jsonl"))]
def chat(messages, **kw):
    return request("POST", "/v1/chat/completions", dict({"model": "tiny", "messages": messages, "max_tokens": 12, "temperature": 0, "ignore_eos": True}, **kw))
for p, ref in zip(prompts, chat_reference):
    s, text, _ = chat([{"role": "user", "content": p}])
    got = json.loads(text) if s == 200 else {}
    check(s == 200 and got["object"] == "chat.completion" and got["choices"][0]["message"] == {"role": "assistant", "content": ref["text"]},
          f"chat {p!r}: {s} {text[:300]} want {ref['text']!r}")
s, text, _ = chat([{"role": "user", "content": prompts[3]}], stream=True, logprobs=True, top_logprobs=2)
events = [json.loads(e[6:]) for e in text.split("\n\n") if e.startswith("data: {")]
check(events[0]["choices"][0]["delta"].get("role") == "assistant" and events[0]["object"] == "chat.completion.chunk", f"chat stream opens with the role: {events[:1]}")
streamed = "".join(e["choices"][0]["delta"].get("content", "") for e in events)
check(streamed == chat_reference[3]["text"], f"chat stream {streamed!r}")
lps = [x for e in events if e["choices"][0]["logprobs"] for x in e["choices"][0]["logprobs"]["content"]]
check(len(lps) == 12 and all(len(x["top_logprobs"]) == 2 and isinstance(x["bytes"], list) for x in lps), f"chat logprobs {lps[:2]}")
for body, param in [({"messages": []}, "messages"), ({"messages": [{"content": "x"}]}, "messages"),
                    ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}, "tools"),
                    ({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}}, "response_format")]:
    s, text, _ = request("POST", "/v1/chat/completions", body)
    check(s == 400 and json.loads(text)["error"]["param"] == param, f"chat {body}: {s} {text[:200]}")
sys.exit(1 if failures else 0)
PY

# A body over the limit: 413 (curl waits for the answer before sending it: Expect: 100-continue).
((cases++))
head -c $((9 << 20)) /dev/zero | tr '\0' x >"$TMP/big"
code=$(curl -s -o "$TMP/big.out" -w '%{http_code}' --max-time 10 "$BASE/v1/completions" --data-binary @"$TMP/big")
[[ $code == 413 ]] && grep -q '"error"' "$TMP/big.out" || fail "a 9 MiB body: $code $(head -c 200 "$TMP/big.out")"

# A client that leaves mid-stream: the server goes on serving.
((cases++))
pages_before=$(curl -sf --max-time 5 "$BASE/metrics" | sed -n 's/^zoo_kv_pages_used //p')
python3 - "$PORT" <<'PY'
import socket, json, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
body = json.dumps({"prompt": "Hello", "max_tokens": 4000, "stream": True, "ignore_eos": True}).encode()
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
s.recv(4096)  # the headers (and maybe a chunk): then leave
s.close()
PY
curl -sf --max-time 10 "$BASE/v1/completions" -d '{"prompt":"Hi","max_tokens":2,"temperature":0}' | grep -q '"finish_reason"' ||
  fail "after a client left mid-stream: $(tail -3 "$TMP/server.err")"
# ... and its sequence left the engine (the metrics say so), pages and all.
((cases++))
metric() { curl -sf --max-time 5 "$BASE/metrics" | sed -n "s/^$1 //p"; }
for _ in $(seq 50); do [[ $(metric zoo_requests_running) == 0 ]] && break; sleep 0.1; done
[[ $(metric zoo_requests_running) == 0 && $(metric zoo_requests_cancelled_total) -ge 1 &&
  $(metric zoo_kv_pages_used) == "$pages_before" ]] ||
  fail "after the client left: $(curl -s "$BASE/metrics" | grep -E '^zoo_(requests|kv)')"
# The prefix cache: the same long prompt twice, the second reuses its whole pages (and answers the same).
((cases++))
python3 - "$BASE" <<'PY' || fail "prefix cache (above)"
import json, sys, urllib.request
def complete(prompt):
    req = urllib.request.Request(sys.argv[1] + "/v1/completions", json.dumps({"prompt": prompt, "max_tokens": 6, "temperature": 0}).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=30))
ids = list(range(3, 3 + 70))
a, b = complete(ids), complete(ids)
ok = a["choices"][0]["text"] == b["choices"][0]["text"] and a["usage"]["prompt_tokens_details"]["cached_tokens"] == 0 \
    and b["usage"]["prompt_tokens_details"]["cached_tokens"] == 64
print(a["usage"], b["usage"]) if not ok else None
sys.exit(0 if ok else 1)
PY
((cases++))
curl -sf --max-time 5 "$BASE/metrics" >"$TMP/metrics"
for name in zoo_generation_tokens_total zoo_time_to_first_token_seconds_count zoo_inter_token_latency_seconds_bucket \
  zoo_kv_pages_total zoo_requests_finished_total zoo_prefix_cache_hits_total zoo_engine_device_seconds_total; do
  grep -q "^$name" "$TMP/metrics" || fail "metrics lack $name"
done
[[ $(sed -n 's/^zoo_generation_tokens_total //p' "$TMP/metrics") -gt 100 ]] || fail "metrics: $(grep generation "$TMP/metrics")"

# 300 clients streaming at once (64 decode, the rest wait): every stream completes with its tokens.
((cases++))
python3 - "$BASE" <<'PY' || fail "300 concurrent streams (above)"
import http.client, json, sys, threading, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
ok = [False] * 300
def client(i):
    try:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        c.request("POST", "/v1/completions", json.dumps({"prompt": f"Story {i}:", "max_tokens": 16, "stream": True,
                                                          "ignore_eos": True, "seed": i}))
        r = c.getresponse()
        events = [e for e in r.read().decode("utf-8", "replace").split("\n\n") if e.startswith("data: ")]
        finals = [json.loads(e[6:]) for e in events[:-1] if json.loads(e[6:])["choices"][0]["finish_reason"]]
        ok[i] = r.status == 200 and events[-1] == "data: [DONE]" and len(finals) == 1
    except Exception as e:
        print("client", i, e)
threads = [threading.Thread(target=client, args=(i,)) for i in range(300)]
[t.start() for t in threads]; [t.join(150) for t in threads]
bad = [i for i, x in enumerate(ok) if not x]
print(f"{300 - len(bad)}/300 streams complete")
sys.exit(1 if bad else 0)
PY

# A load test at concurrency 1, 8 and 64 (the bench tool's own client): no errors, every token
# counted, each request's usage exact.
((cases++))
CASE=load
for c in 1 8 64; do
  timeout 60 python3 "$SRC/tools/bench/bench_serve.py" "$BASE" --model tiny --vocab 384 --requests $((2 * c)) \
    --concurrency $c --prompt-len 24 --max-tokens 16 --json >"$TMP/load$c" 2>&1 || fail "load at $c: $(tail -3 "$TMP/load$c")"
  python3 - "$TMP/load$c" $((2 * c)) <<'PY' || fail "load at $c: $(tail -3 "$TMP/load$c")"
import json, sys
out = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
n = int(sys.argv[2])
assert out["errors"] == 0 and out["output_tokens"] == 16 * n, out
PY
done

# SIGTERM: stops accepting, lets the request in flight finish, exits 0.
((cases++))
curl -s --max-time 20 "$BASE/v1/completions" -d '{"prompt":"Hello","max_tokens":200,"ignore_eos":true,"temperature":0}' >"$TMP/drained" &
curl_pid=$!
sleep 0.2
stop_server
wait $curl_pid
[[ $SERVER_RC == 0 ]] || fail "SIGTERM: exit $SERVER_RC: $(tail -3 "$TMP/server.err")"
grep -q '"finish_reason":"length"' "$TMP/drained" || fail "the request in flight at SIGTERM: $(head -c 300 "$TMP/drained")"

# --request-timeout: a request still running at its deadline is cancelled and answered 504; the
# server serves on.
start_server "$M" --request-timeout 0.001
((cases++))
code=$(curl -s -o "$TMP/late" -w '%{http_code}' --max-time 20 "$BASE/v1/completions" \
  -d '{"prompt":"Hello","max_tokens":200,"ignore_eos":true,"temperature":0}')
[[ $code == 504 ]] && grep -q "timed out after" "$TMP/late" || fail "timeout: $code $(head -c 300 "$TMP/late")"
curl -sf --max-time 5 "$BASE/health" | grep -q '"ok"' || fail "health after a timeout"
stop_server

# --api-key: /v1 needs the key, /health does not.
start_server "$M" --api-key sekret
((cases++))
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$BASE/v1/models")
[[ $code == 401 ]] || fail "no key: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "Authorization: Bearer sekret" "$BASE/v1/models")
[[ $code == 200 ]] || fail "the key: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$BASE/health")
[[ $code == 200 ]] || fail "health without the key: $code"
stop_server

# A full queue: with one sequence running and none waiting, a second request at once is 429 with
# Retry-After, while the first completes.
start_server "$M" --max-running 1 --max-queue 0
((cases++))
curl -s --max-time 30 "$BASE/v1/completions" -d '{"prompt":"Hello","max_tokens":3000,"ignore_eos":true}' >"$TMP/first" &
first_pid=$!
for _ in $(seq 50); do [[ $(curl -sf "$BASE/metrics" | sed -n 's/^zoo_requests_running //p') == 1 ]] && break; sleep 0.05; done
curl -s -D "$TMP/h429" -o "$TMP/b429" --max-time 10 "$BASE/v1/completions" -d '{"prompt":"Hi","max_tokens":2}'
grep -q "^HTTP/1.1 429" "$TMP/h429" && grep -qi "^retry-after: 1" "$TMP/h429" && grep -q '"queue_full"' "$TMP/b429" ||
  fail "queue full: $(head -1 "$TMP/h429") $(cat "$TMP/b429")"
wait $first_pid
grep -q '"finish_reason":"length"' "$TMP/first" || fail "the running request: $(head -c 200 "$TMP/first")"
stop_server

# --gpu-memory-utilization sizes a GPU's pool: on the CPU it is refused, naming the flag.
run memory-fraction-cpu serve "$M" --port 0 --gpu-memory-utilization 0.5
rc 2
has err "--gpu-memory-utilization"

# A port in use is an error naming it, before any model work.
start_server "$M"
run port-taken serve "$M" --port "$PORT"
rc 2
has err "127.0.0.1:$PORT"
stop_server

echo "$cases cases, $failures failures"
((failures == 0))
