#!/usr/bin/env bash
# `zoo serve`'s errors for hostile input (issue 49, round 3): numbers past a double's range and
# malformed bodies are 400s in our words (not the JSON library's, not quoting the client's bytes);
# integers past 64 bits are shown as sent; megabyte names are cut in what is echoed; request text
# with newlines and escape sequences reaches the log escaped; --kv-cache-gb past the memory names
# the option; a voices transcript past its limit gives the limit in bytes.
# Usage: serve_hostile_messages.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-serve-hostile-messages "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib/serve_helpers.sh"
command -v python3 >/dev/null || { echo "SKIPPED: no python3"; exit 77; }
M=$FIX/qwen3-tiny-text

run kv-cache-too-big serve "$M" --port 0 --kv-cache-gb 1e6
rc 2
has err "--kv-cache-gb"

# A transcript past the voices' 64 KiB limit (the speech fixture has a codec encoder).
F=$FIX/higgs-tiny-codec-enc
if [[ -f $SRC/configs/higgs-tiny-codec-enc.yaml && -f $F/voice.wav ]]; then
  mkdir -p "$TMP/voices"
  cp "$F/voice.wav" "$TMP/voices/big.wav"
  head -c 70000 /dev/zero | tr '\0' 'a' >"$TMP/voices/big.txt"
  run voices-limit serve "$SRC/configs/higgs-tiny-codec-enc.yaml" --port 0 --voices "$TMP/voices"
  rc 2
  has err "65536 bytes limit"
  lacks err "0 MiB"
fi

# The model with a ChatML chat template, for chat requests.
mkdir -p "$TMP/chat-model"
ln -s "$M"/* "$TMP/chat-model/"
cp "$FIX/chat/chatml/tokenizer_config.json" "$TMP/chat-model/"
start_server "$TMP/chat-model" --served-model-name tiny
((cases++))
python3 - "$PORT" <<'PY' || fail "error messages (above)"
import http.client, json, sys
port = int(sys.argv[1])
failures = []
def check(cond, what):
    if not cond:
        failures.append(what); print("FAIL:", what[:600])
def post(raw, path="/v1/completions"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", path, raw, {"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    c.close()
    try:
        error = json.loads(text)["error"]
    except Exception:
        error = None
    return r.status, text, error
def shaped(error):
    return error is not None and set(error) == {"message", "type", "param", "code"}

status, text, e = post('{"prompt": "Hi", "temperature": 1e400}')
check(status == 400 and shaped(e) and "range of a double" in e["message"] and "json.exception" not in text,
      f"1e400: {status} {text}")
status, text, e = post('{"prompt": "SECRET-BYTES, "max_tokens": 2}')
check(status == 400 and shaped(e) and e["code"] == "invalid_json" and "SECRET" not in text and "json.exception" not in text,
      f"malformed: {status} {text}")
status, text, e = post(b'{"prompt": "\xff\xfe"}')
check(status == 400 and shaped(e) and "json.exception" not in text, f"invalid UTF-8: {status} {text}")
for n, shown in (("18446744073709551615", "18446744073709551615"), ("-9223372036854775809", None),
                 ("100000000000000000000000", None)):
    status, text, e = post('{"prompt": "Hi", "n": %s}' % n)
    check(status == 400 and shaped(e) and e["param"] == "n" and "is 65" not in text and "must be in [1, 64]" in e["message"]
          and (shown is None or shown in e["message"]), f"n={n}: {status} {text}")
status, text, e = post('{"prompt": [1, 18446744073709551615]}')
check(status == 400 and "18446744073709551615" in text, f"a token id past 64 bits: {status} {text}")
huge = "m" * 1000000
status, text, e = post(json.dumps({"prompt": "Hi", "model": huge}))
check(status == 404 and shaped(e) and len(text) < 1000, f"a 1 MB model name: {status} {len(text)} bytes")
status, text, e = post(json.dumps({"prompt": "Hi", huge: 1}))
check(status == 400 and shaped(e) and len(text) < 1000, f"a 1 MB field name: {status} {len(text)} bytes")
status, text, e = post(json.dumps({"prompt": "Hi", "stream_options": {huge: 1}}))
check(status == 400 and len(text) < 1000, f"a 1 MB stream_options field: {status} {len(text)} bytes")
status, text, e = post(json.dumps({"messages": [{"role": "user", "content": "x"}],
                                   "tools": [{"type": "function", "function": {"name": "a"}}],
                                   "tool_choice": {"type": "function", "function": {"name": huge}}}), "/v1/chat/completions")
check(status == 400 and shaped(e) and e["param"] == "tool_choice" and len(text) < 1000,
      f"a 1 MB tool name: {status} {len(text)} bytes {text[:200]}")
# Forged log lines and terminal escapes, in a model name, a field name and the path.
forged = "x\nzoo serve: FORGED LINE\x1b[2J\r"
post(json.dumps({"prompt": "Hi", "model": forged}))
post(json.dumps({"prompt": "Hi", forged: 1}))
post(json.dumps({"prompt": "Hi"}), "/v1/nowhere%0aFORGED")
sys.exit(1 if failures else 0)
PY
((cases++))
grep -q "^zoo serve: FORGED" "$TMP/server.err" && fail "a forged log line: $(grep -m2 FORGED "$TMP/server.err")"
grep -q $'\x1b' "$TMP/server.err" && fail "an escape sequence reached the log"
grep -qF 'x\nzoo serve: FORGED LINE\e[2J\r' "$TMP/server.err" || fail "the escaped name is not in the log: $(tail -4 "$TMP/server.err")"
stop_server

echo "$cases cases, $failures failures"
((failures == 0))
