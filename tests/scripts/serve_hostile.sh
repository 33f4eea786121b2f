#!/usr/bin/env bash
# `zoo serve` against hostile clients and shutdowns (issue 49, round 3), bounded in time: a chunked
# request with a trailer field past 64 KiB (with and without the API key) is answered and the
# server serves on; HEAD is answered without a body; --api-key "" and a key with blanks at its ends
# are refused at start; SIGTERM/SIGINT with streamed and whole requests in flight (--drain-timeout
# 0 and 1, a second signal) ends every request with its answer or an error, and exits 0.
# Usage: serve_hostile.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-serve-hostile "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib/serve_helpers.sh"
command -v python3 >/dev/null || { echo "SKIPPED: no python3"; exit 77; }
M=$FIX/qwen3-tiny-text

# ---- the API key at start ----
# `run` with a bound: a server that took such a key would serve on.
run_bounded() {
  CASE=$1
  shift
  cases=$((cases + 1))
  timeout 20 "$ZOO" "$@" >"$TMP/out" 2>"$TMP/err"
  RC=$?
}
run_bounded empty-api-key serve "$M" --port 0 --api-key ""
rc 2
has err "--api-key is empty"
run_bounded blank-api-key serve "$M" --port 0 --api-key " sekret"
rc 2
has err "--api-key begins or ends with a blank"
run_bounded blank-end-api-key serve "$M" --port 0 --api-key "sekret	"
rc 2
has err "--api-key"

# ---- trailers, HEAD, the key checked before the body ----
start_server "$M" --api-key sekret
((cases++))
python3 - "$PORT" <<'PY' || fail "raw HTTP checks (above)"
import socket, sys
port = int(sys.argv[1])
failures = []
def check(cond, what):
    if not cond:
        failures.append(what); print("FAIL:", what)

def exchange(data, timeout=10):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError:
        return b""
    try:
        s.sendall(data)
    except OSError:
        pass
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b: break
            out += b
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    return out

# HEAD: headers only; the next response on the same connection is read as the next response.
r = exchange(b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
first, _, rest = r.partition(b"\r\n\r\n")
check(first.startswith(b"HTTP/1.1 "), f"HEAD: {r[:200]!r}")
check(rest.startswith(b"HTTP/1.1 200"), f"HEAD answered with a body: {rest[:120]!r}")
for path in (b"/v1/models", b"/nowhere"):
    r = exchange(b"HEAD " + path + b" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekret\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    first, _, rest = r.partition(b"\r\n\r\n")
    check(rest.startswith(b"HTTP/1.1 200"), f"HEAD {path!r} answered with a body: {rest[:120]!r}")
body = b'{"prompt":"Hi","max_tokens":2}'
def chunked(auth, trailer_bytes):
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nTrailer: X-Big\r\n"
    if auth: head += b"Authorization: Bearer sekret\r\n"
    return head + b"\r\n" + b"%x\r\n" % len(body) + body + b"\r\n0\r\nX-Big: " + b"a" * trailer_bytes + b"\r\n\r\n"

def alive():
    r = exchange(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    return r.startswith(b"HTTP/1.1 200")

r = exchange(chunked(False, 70 * 1024))
check(r.startswith(b"HTTP/1.1 401"), f"a big trailer without the key: {r[:200]!r}")
check(alive(), "the server died after a big trailer without the key")
r = exchange(chunked(True, 70 * 1024))
check(r.startswith(b"HTTP/1.1 431"), f"a big trailer with the key: {r[:200]!r}")
check(alive(), "the server died after a big trailer with the key")
r = exchange(chunked(True, 16))
check(r.startswith(b"HTTP/1.1 200"), f"a small trailer with the key: {r[:300]!r}")
# A 1 MB body without the key is refused from its headers.
big = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n" + b"x" * 1000000
r = exchange(big)
check(r.startswith(b"HTTP/1.1 401") and b"invalid_api_key" in r, f"no key, big body: {r[:200]!r}")
# A wrong key of the right length and of another length.
for key in (b"sekreT", b"sekret2", b""):
    r = exchange(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key + b"\r\n\r\n")
    check(r.startswith(b"HTTP/1.1 401"), f"key {key!r}: {r[:100]!r}")
r = exchange(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer sekret\r\n\r\n")
check(r.startswith(b"HTTP/1.1 200"), f"the key: {r[:100]!r}")

sys.exit(1 if failures else 0)
PY
stop_server
[[ $SERVER_RC == 0 ]] || fail "exit $SERVER_RC after the raw checks: $(tail -3 "$TMP/server.err")"

# ---- draining: every request in flight ends with its answer or an error ----
# drain_case NAME SIGNALS SERVE_ARGS...: 4 streams and 2 whole requests of many tokens, then the
# signals (TERM, INT, or TERM+TERM), 0.1 s apart.
drain_case() {
  local name=$1 signals=$2
  shift 2
  CASE=$name
  ((cases++))
  start_server "$M" --max-running 16 "$@"
  python3 - "$PORT" >"$TMP/clients.out" 2>&1 <<'PY' &
import http.client, json, sys, threading
port = int(sys.argv[1])
results = {}
def go(i, stream):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
        body = {"prompt": "Hello", "max_tokens": 4000, "ignore_eos": True, "temperature": 0, "stream": stream, "n": 2}
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        if stream:
            events = [e[6:] for e in text.split("\n\n") if e.startswith("data: ")]
            ok = r.status == 200 and events and (events[-1] == "[DONE]" or '"error"' in events[-1])
        else:
            ok = (r.status == 200 and '"finish_reason"' in text) or (r.status == 503 and '"error"' in text)
        results[i] = (ok, r.status, text[-200:])
    except Exception as e:  # a connection closed without an answer
        results[i] = (False, None, repr(e))
threads = [threading.Thread(target=go, args=(i, i < 4)) for i in range(6)]
for t in threads: t.start()
for t in threads: t.join()
bad = {i: r for i, r in results.items() if not r[0]}
for i, r in sorted(bad.items()): print(f"request {i} ({'stream' if i < 4 else 'whole'}) ended badly: {r[1]} {r[2]!r}")
sys.exit(1 if bad or len(results) != 6 else 0)
PY
  local clients=$!
  # Signal once every request is running.
  for _ in $(seq 100); do
    [[ $(curl -sf --max-time 2 "$BASE/metrics" | sed -n 's/^zoo_requests_running //p') == 12 ]] && break
    sleep 0.05
  done
  for s in $signals; do
    kill -"$s" $SERVER_PID
    sleep 0.1
  done
  for _ in $(seq 150); do kill -0 $SERVER_PID 2>/dev/null || break; sleep 0.1; done
  if kill -0 $SERVER_PID 2>/dev/null; then
    kill -9 $SERVER_PID
    SERVER_RC=killed
  else
    wait $SERVER_PID
    SERVER_RC=$?
  fi
  wait $clients || fail "clients: $(cat "$TMP/clients.out") server: $(tail -5 "$TMP/server.err")"
  [[ $SERVER_RC == 0 ]] || fail "exit $SERVER_RC: $(tail -5 "$TMP/server.err")"
}
command -v curl >/dev/null || { echo "SKIPPED: no curl"; exit 77; }
drain_case drain-timeout-0 TERM --drain-timeout 0
drain_case drain-timeout-1 INT --drain-timeout 1
drain_case second-signal "TERM TERM" --drain-timeout 30
drain_case second-sigint "INT INT" --drain-timeout 30

echo "$cases cases, $failures failures"
((failures == 0))
