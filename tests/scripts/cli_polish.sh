#!/usr/bin/env bash
# What a new user meets in the first minutes: --version, --help with defaults, suggestions for a
# misspelt command or flag, JSON errors under --json, `zoo bench` rows, spread and records, synth's
# hint command (which runs as printed), and wrong inputs named as what they are.
# Usage: cli_polish.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-cli-polish "$@"
QCFG=$SRC/configs/qwen3-tiny.yaml
# z CODE ARGS...: runs zoo, expects exit CODE; stdout in $TMP/out, stderr in $TMP/err.
z() {
  local code=$1
  shift
  "$ZOO" "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  ((rc == code)) || fail "zoo $* exited $rc, expected $code: $(head -c 1500 "$TMP/err")"
}
has() { grep -qF -- "$2" "$TMP/$1" || fail "$1 of the last command lacks '$2':"$'\n'"$(head -c 1500 "$TMP/$1")"; }

z 0 --version
grep -qE '^zoo [0-9]+\.[0-9]+\.[0-9]+ \(([0-9a-f]{12}(\+dirty)?|unknown)\)$' "$TMP/out" || fail "--version: $(cat "$TMP/out")"

z 0 generate --help
has out "--max-new-tokens"
grep -qE -- '--max-new-tokens.*=16' "$TMP/out" || fail "--help does not show the default of --max-new-tokens"
grep -q -- '--max-context INT=0' "$TMP/out" && fail "--help shows a model-dependent default as 0"
z 0 bench --help
grep -qE -- '--repeat.*=3' "$TMP/out" || fail "--help does not show the default of --repeat"

z 2 genrate
has err "unknown command 'genrate'; did you mean 'generate'?"
z 2 generate "$QCFG" --request "$SRC/tests/fixtures/qwen3-tiny/request.json" --max-new-tokns 3
has err "unknown option '--max-new-tokns'; did you mean '--max-new-tokens'?"
# A misspelt flag is named even when it leaves a required one missing.
z 2 trace "$QCFG" --reqest "$SRC/tests/fixtures/qwen3-tiny/request.json" --out "$TMP/t.safetensors"
has err "did you mean '--request'?"
z 2 --verison
has err "did you mean '--version'?"
z 2 frobnicate
grep -q "did you mean" "$TMP/err" && fail "a suggestion for a word near nothing: $(cat "$TMP/err")"

# Under --json an error is one JSON object on stdout, with the exit code.
z 2 plan "$TMP/missing.yaml" --json
python3 - "$TMP/out" "$TMP/missing.yaml" <<'PY' || fail "--json error: $(cat "$TMP/out")"
import json, sys
e = json.load(open(sys.argv[1]))["error"]
assert e["kind"] == "input" and e["exit_code"] == 2 and e["message"].startswith(sys.argv[2] + ": "), e
PY
z 2 inspect --json --frobnicate "$SRC/tests/fixtures/qwen3-tiny"
python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert e["kind"]=="usage" and "--frobnicate" in e["message"], e' \
  "$TMP/out" || fail "--json usage error: $(cat "$TMP/out")"

# bench: a row per phase, spread, records; a tiny model's sizes in MB, not 0.00 GB.
z 0 bench "$QCFG" --prompt-len 4,8 --new-tokens 2 --repeat 3 -q
has out "prefill"
has out "decode"
has out "min..max"
grep -q "0\.00 GB" "$TMP/out" && fail "bench prints 0.00 GB for a tiny model: $(cat "$TMP/out")"
grep -qE "weights +[0-9.]+ (KB|MB)" "$TMP/out" || fail "bench weights not in KB/MB: $(cat "$TMP/out")"
z 0 bench "$QCFG" --prompt-len 4 --new-tokens 2 --repeat 3 --json
python3 - "$TMP/out" <<'PY' || fail "bench --json records: $(head -c 3000 "$TMP/out")"
import json, sys, os
b = json.load(open(sys.argv[1]))
assert b["zoo"]["commit"] and b["zoo"]["version"], b["zoo"]
assert b["host"] and b["threads"] >= 1 and b["device"] == "cpu", b
for p in b["prefill"]:
    s = p["seconds_spread"]
    assert s["min"] <= s["median"] <= s["max"] and s["median"] == p["seconds"], p
for d in b["decode"]:
    s = d["ms_per_token_spread"]
    assert s["min"] <= s["median"] <= s["max"], d
# The float32 run reads the bf16 checkpoint widened to 4 bytes: twice the stored bytes.
read = b["weight_bytes_read_per_token"]["bytes"]
assert read == 2 * b["weight_bytes"], (read, b["weight_bytes"])
d = b["decode"][0]
assert abs(d["weight_gb_per_s"] - read / (d["ms_per_token"] / 1e3) / 1e9) < 1e-6 * d["weight_gb_per_s"], d
PY

# An untied float32 model: a decode step reads one row of the embedding table, not all of it.
U=$SRC/tests/fixtures/qwen3-tiny-f32-untied
z 0 bench "$U" --prompt-len 4 --new-tokens 2 --repeat 1 --json
python3 - "$TMP/out" "$U" <<'PY' || fail "untied bench bytes: $(head -c 3000 "$TMP/out")"
import json, struct, sys
b = json.load(open(sys.argv[1]))
with open(sys.argv[2] + "/model.safetensors", "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
sizes = {k: v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items() if k != "__metadata__"}
embed = header["model.embed_tokens.weight"]
want = sum(sizes.values()) - sizes["model.embed_tokens.weight"] + embed["shape"][1] * 4
got = b["weight_bytes_read_per_token"]
assert got["bytes"] == want and got["source"] == "plugin", (got, want)
PY

# synth says how to use what it wrote, and the command works as printed.
z 0 synth --config "$SRC/tests/fixtures/qwen3-tiny/config.json" --out "$TMP/syn dir" -q
cmd=$(head -n1 "$TMP/out")
[[ $cmd == "zoo bench '$TMP/syn dir'" ]] || fail "synth printed '$cmd'"
eval "\"\$ZOO\" ${cmd#zoo } --prompt-len 2 --new-tokens 1 --repeat 1 -q" >"$TMP/out" 2>"$TMP/err" ||
  fail "the command synth printed failed: $(cat "$TMP/err")"
# A model without a text head: a command that runs it (not `zoo generate`, which refuses it), with
# the --plugin-dir the synth was given.
mkdir -p "$TMP/plugins"
z 0 synth --config "$SRC/tests/fixtures/higgs-tiny/config.json" --out "$TMP/higgs" --dtype f32 -q \
  --plugin-dir "$TMP/plugins"
cmd=$(head -n1 "$TMP/out")
[[ $cmd == "zoo bench $TMP/higgs --plugin-dir $TMP/plugins" ]] || fail "synth of a speech model printed '$cmd'"
has out "not \`zoo generate\`"
has out "zoo tts"
grep -q "zoo generate $TMP" "$TMP/out" && fail "synth suggests zoo generate for a speech model: $(cat "$TMP/out")"
eval "\"\$ZOO\" ${cmd#zoo }" >"$TMP/out" 2>"$TMP/err" ||
  fail "the command synth printed failed: $(cat "$TMP/err")"
z 0 synth --config "$SRC/tests/fixtures/qwen3-tiny/config.json" --out "$TMP/syn2" -q --plugin-dir "$TMP/plugins"
[[ $(head -n1 "$TMP/out") == "zoo bench $TMP/syn2 --plugin-dir $TMP/plugins" ]] || fail "synth printed '$(cat "$TMP/out")'"
has out "zoo generate $TMP/syn2 --plugin-dir $TMP/plugins --prompt 'Hello'"

# Wrong inputs said as what they are: a config.json is not a checkpoint, an empty prompt is empty.
z 2 inspect "$SRC/tests/fixtures/qwen3-tiny/config.json"
has err "tests/fixtures/qwen3-tiny/config.json: is a model config (it has \"model_type\"), not a checkpoint"
has err "give the checkpoint directory, a .safetensors file or a .safetensors.index.json"
grep -q "weight_map" "$TMP/err" && fail "inspect config.json still talks of weight_map: $(cat "$TMP/err")"
z 2 generate "$SRC/tests/fixtures/qwen3-tiny" --prompt ""
[[ $(cat "$TMP/err") == "zoo: error: --prompt: the prompt is empty" ]] || fail "--prompt '': $(cat "$TMP/err")"
z 2 generate "$SRC/tests/fixtures/qwen3-tiny" --request ""
has err "--request: the file name is empty"
z 2 generate "$SRC/tests/fixtures/qwen3-tiny" --prompt-file ""
has err "--prompt-file: the file name is empty"

echo "$failures failures"
((failures == 0))
