#!/usr/bin/env bash
# Text in, text out on a checkpoint with a real Qwen vocabulary: `zoo synth` at a tiny shape with
# vocab 151936, the Qwen tokenizer.json of the tokenizer fixtures and a ChatML chat template. Checks
# that `zoo generate DIR --prompt` (and --chat, --prompt-file -, --request -) streams text equal to
# what HF `tokenizers` decodes from the same ids, valid UTF-8, and really stops at the eos id.
# Usage: cli_generate_text.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-cli-generate-text "$@"
python3 -c 'import tokenizers' 2>/dev/null || { echo "SKIP: python3 tokenizers is not installed"; exit 77; }

# A tiny Qwen3 shape with the real vocabulary size.
sed 's/"vocab_size": 384/"vocab_size": 151936/' "$SRC/tests/fixtures/qwen3-tiny/config.json" >"$TMP/config.json"
grep -q '"vocab_size": 151936' "$TMP/config.json" || { echo "cannot set vocab_size"; exit 1; }
(cd "$TMP" && cmake -E tar xf "$SRC/tests/fixtures/tokenizer/fixtures.tar.xz" qwen/tokenizer.json) ||
  { echo "cannot unpack the Qwen tokenizer.json"; exit 1; }
M=$TMP/model
# A seed whose greedy continuation of "Hello" is not one token repeated (so an eos can be placed).
for seed in 1 2 3 4 5; do
  rm -rf "$M"
  "$ZOO" synth -q --config "$TMP/config.json" --out "$M" --seed $seed --std 0.5 >/dev/null || { echo "synth failed"; exit 1; }
  cp "$TMP/qwen/tokenizer.json" "$M/"
  cp "$SRC/tests/fixtures/chat/chatml/tokenizer_config.json" "$M/"
  read -r -a ids <<<"$("$ZOO" generate -q "$M" --prompt Hello --max-new-tokens 10 --ids)"
  k=1
  while ((k < ${#ids[@]})); do
    new=1
    for ((j = 0; j < k; j++)); do [[ ${ids[j]} == "${ids[k]}" ]] && new=0; done
    ((new)) && break
    k=$((k + 1))
  done
  ((k < ${#ids[@]})) && break
done
((${#ids[@]} == 10 && k < 10)) || { echo "no usable greedy continuation: ${ids[*]}"; exit 1; }
eos=${ids[k]}

# hf_decode IDS...: the text HF tokenizers decodes (skip_special_tokens), as the stream must print it.
hf_decode() {
  python3 - "$TMP/qwen/tokenizer.json" "$@" <<'PY'
import sys
from tokenizers import Tokenizer
t = Tokenizer.from_file(sys.argv[1])
sys.stdout.write(t.decode([int(x) for x in sys.argv[2:]], skip_special_tokens=True) + "\n")
PY
}
# check_text FILE: valid UTF-8.
check_utf8() { python3 -c 'import sys; open(sys.argv[1], "rb").read().decode("utf-8")' "$1" || fail "$2: output is not valid UTF-8"; }

# The model's own eos (generation_config.json): text out, stopped there, equal to HF's decode.
printf '{"eos_token_id": [151645, %s]}\n' "$eos" >"$M/generation_config.json"
"$ZOO" generate "$M" --prompt Hello --max-new-tokens 10 >"$TMP/out" 2>"$TMP/err" || fail "generate --prompt: $(cat "$TMP/err")"
check_utf8 "$TMP/out" "--prompt"
hf_decode "${ids[@]:0:k+1}" >"$TMP/want"
cmp -s "$TMP/out" "$TMP/want" || fail "--prompt text differs from HF decode:"$'\n'"got  $(od -c "$TMP/out" | head -3)"$'\n'"want $(od -c "$TMP/want" | head -3)"
grep -qF "stopped at eos $eos" "$TMP/err" || fail "no stop at eos $eos: $(cat "$TMP/err")"
grep -qE "decode $k tokens" "$TMP/err" || fail "expected $k decoded tokens after the first: $(cat "$TMP/err")"
grep -qE "prefill 1 tokens in .* tokens/s\); decode .* tokens/s\)" "$TMP/err" || fail "no tokens/s report: $(cat "$TMP/err")"

# The same prompt from stdin, and the same ids as a request on stdin.
printf 'Hello' | "$ZOO" generate -q "$M" --prompt-file - --max-new-tokens 10 >"$TMP/out2" 2>"$TMP/err" ||
  fail "--prompt-file -: $(cat "$TMP/err")"
cmp -s "$TMP/out2" "$TMP/want" || fail "--prompt-file - differs from --prompt"
hello=$(python3 -c 'import sys; from tokenizers import Tokenizer; print(Tokenizer.from_file(sys.argv[1]).encode("Hello", add_special_tokens=False).ids[0])' "$TMP/qwen/tokenizer.json")
printf '{"input_ids": [%s]}' "$hello" | "$ZOO" generate -q "$M" --request - --max-new-tokens 10 >"$TMP/out3" 2>"$TMP/err" ||
  fail "--request -: $(cat "$TMP/err")"
cmp -s "$TMP/out3" "$TMP/want" || fail "--request - differs from --prompt: $(cat "$TMP/out3")"

# --chat: the ChatML prompt (its token count is HF's), text out, stops at the --eos given.
read -r -a cids <<<"$("$ZOO" generate -q "$M" --prompt Hello --chat --system "Be brief." --max-new-tokens 10 --ids --ignore-eos)"
((${#cids[@]} == 10)) || fail "--chat --ignore-eos: ${cids[*]}"
c=1
while ((c < 10)) && [[ ${cids[c]} == "${cids[0]}" ]]; do c=$((c + 1)); done
if ((c < 10)); then
  "$ZOO" generate "$M" --prompt Hello --chat --system "Be brief." --max-new-tokens 10 --eos "${cids[c]}" >"$TMP/out" 2>"$TMP/err" ||
    fail "generate --chat: $(cat "$TMP/err")"
  check_utf8 "$TMP/out" "--chat"
  grep -qF "stopped at eos" "$TMP/err" || fail "--chat did not stop at an eos: $(cat "$TMP/err")"
  want_prompt=$(python3 - "$M" <<'PY'
import json, sys
from tokenizers import Tokenizer
from transformers.utils.chat_template_utils import render_jinja_template
cfg = json.load(open(sys.argv[1] + "/tokenizer_config.json"))
text, _ = render_jinja_template(conversations=[[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]],
                                chat_template=cfg["chat_template"], add_generation_prompt=True)
print(len(Tokenizer.from_file(sys.argv[1] + "/tokenizer.json").encode(text[0], add_special_tokens=False).ids))
PY
)
  grep -qF "prefill $want_prompt tokens" "$TMP/err" || fail "--chat prompt is not $want_prompt tokens: $(cat "$TMP/err")"
else
  fail "--chat greedy ids are one token repeated: ${cids[*]}"
fi

# Errors name the file.
cp "$M/config.json" "$M/model.safetensors" "$TMP/" && mkdir -p "$TMP/notok" && mv "$TMP/config.json" "$TMP/model.safetensors" "$TMP/notok/"
"$ZOO" generate "$TMP/notok" --prompt Hello >"$TMP/out" 2>"$TMP/err"
[[ $? == 2 ]] && grep -qF "$TMP/notok/tokenizer.json: no such file" "$TMP/err" || fail "no tokenizer: $(cat "$TMP/err")"
# --chat --messages: the whole conversation through the template; the same two messages as above
# give the same prompt as --prompt with --system.
printf '[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]' >"$TMP/messages.json"
"$ZOO" generate "$M" --chat --messages "$TMP/messages.json" --max-new-tokens 2 >"$TMP/out" 2>"$TMP/err" ||
  fail "--chat --messages: $(cat "$TMP/err")"
grep -qF "prefill $want_prompt tokens" "$TMP/err" || fail "--chat --messages prompt is not $want_prompt tokens: $(cat "$TMP/err")"
"$ZOO" generate "$M" --chat --messages "$TMP/messages.json" --set enable_thinking=false --max-new-tokens 2 >"$TMP/out" 2>"$TMP/err" ||
  fail "--chat --messages --set: $(cat "$TMP/err")"
grep -qF "prefill $want_prompt tokens" "$TMP/err" || fail "--set changed a template that ignores it: $(cat "$TMP/err")"
"$ZOO" generate "$M" --prompt Hello --set enable_thinking=false >"$TMP/out" 2>"$TMP/err"
[[ $? == 2 ]] && grep -qF -- "--set, --template: need --chat" "$TMP/err" || fail "--set without --chat: $(cat "$TMP/err")"
"$ZOO" generate "$M" --messages "$TMP/messages.json" >"$TMP/out" 2>"$TMP/err"
[[ $? == 2 ]] && grep -qF -- "--messages: needs --chat" "$TMP/err" || fail "--messages without --chat: $(cat "$TMP/err")"
# The real Qwen3 template (kept outside the repository: ZOO_REAL_TEMPLATES, see docs/validation.md)
# on this Qwen vocabulary: a multi-turn conversation with thinking off prefills what transformers'
# rendering encodes to.
if [[ -n ${ZOO_REAL_TEMPLATES:-} && -f $ZOO_REAL_TEMPLATES/Qwen-Qwen3-0.6B.jinja ]]; then
  cp "$ZOO_REAL_TEMPLATES/Qwen-Qwen3-0.6B.jinja" "$M/chat_template.jinja"
  printf '[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>\\nx\\n</think>\\n\\nHello!"}, {"role": "user", "content": "Grüß dich"}]' >"$TMP/qwen3.json"
  "$ZOO" generate "$M" --chat --messages "$TMP/qwen3.json" --set enable_thinking=false --max-new-tokens 2 >"$TMP/out" 2>"$TMP/err" ||
    fail "real Qwen3 template: $(cat "$TMP/err")"
  want_qwen3=$(python3 - "$M" "$TMP/qwen3.json" <<'PY'
import json, sys
from tokenizers import Tokenizer
from transformers.utils.chat_template_utils import render_jinja_template
text, _ = render_jinja_template(conversations=[json.load(open(sys.argv[2]))], chat_template=open(sys.argv[1] + "/chat_template.jinja").read(),
                                add_generation_prompt=True, enable_thinking=False, eos_token="<|im_end|>")
print(len(Tokenizer.from_file(sys.argv[1] + "/tokenizer.json").encode(text[0], add_special_tokens=False).ids))
PY
)
  grep -qF "prefill $want_qwen3 tokens" "$TMP/err" || fail "real Qwen3 template: prompt is not $want_qwen3 tokens: $(cat "$TMP/err")"
  rm "$M/chat_template.jinja"
else
  echo "real Qwen3 template: not checked (ZOO_REAL_TEMPLATES unset)"
fi
# A template's own refusal exits 1 with its words; a template that does not parse exits 2; both name the file.
printf '{"chat_template": "{{ raise_exception(\\"roles must alternate\\") }}"}\n' >"$M/tokenizer_config.json"
"$ZOO" generate "$M" --prompt Hello --chat >"$TMP/out" 2>"$TMP/err"
[[ $? == 1 ]] && grep -qF "$M/tokenizer_config.json: roles must alternate" "$TMP/err" || fail "raising template: $(cat "$TMP/err")"
printf '{"chat_template": "{%% for m in messages %%}[INST] {{ m.content }}"}\n' >"$M/tokenizer_config.json"
"$ZOO" generate "$M" --prompt Hello --chat >"$TMP/out" 2>"$TMP/err"
[[ $? == 2 ]] && grep -qF "$M/tokenizer_config.json:1: syntax error" "$TMP/err" || fail "bad template: $(cat "$TMP/err")"
"$ZOO" generate "$M" --prompt Hello --request x.json >"$TMP/out" 2>"$TMP/err"
[[ $? == 2 ]] || fail "--prompt with --request accepted"

echo "$failures failures"
((failures == 0))
