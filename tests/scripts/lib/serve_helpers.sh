# Sourced by the `zoo serve` test scripts after common.sh: start_server ARGS... runs `zoo serve ARGS`
# on a free loopback port in the background and waits (at most 60 s) for its `listening on` line,
# leaving $PORT, $BASE and $SERVER_PID; stop_server sends SIGTERM and waits (at most 30 s), leaving
# $SERVER_RC. The EXIT trap kills a server still running.
start_server() {
  local out=$TMP/server.out
  : >"$out"
  "$ZOO" serve "$@" --host 127.0.0.1 --port 0 >"$out" 2>"$TMP/server.err" &
  SERVER_PID=$!
  trap 'kill -9 $SERVER_PID 2>/dev/null; rm -rf "$TMP"' EXIT
  for _ in $(seq 600); do
    grep -q "listening on" "$out" && break
    kill -0 $SERVER_PID 2>/dev/null || break
    sleep 0.1
  done
  PORT=$(sed -n 's/^listening on http:\/\/127\.0\.0\.1:\([0-9]*\)$/\1/p' "$out")
  [[ -n $PORT ]] || { echo "zoo serve did not start: $(cat "$TMP/server.err")"; exit 1; }
  BASE=http://127.0.0.1:$PORT
}
stop_server() {
  kill -TERM $SERVER_PID 2>/dev/null
  for _ in $(seq 300); do
    kill -0 $SERVER_PID 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 $SERVER_PID 2>/dev/null; then
    kill -9 $SERVER_PID
    SERVER_RC=killed
  else
    wait $SERVER_PID
    SERVER_RC=$?
  fi
}
