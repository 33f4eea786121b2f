#!/usr/bin/env python3
"""Runs tools/bench/bench_serve.py (argv[1], its arguments after) against `transformers serve` 5.17.

transformers serve's /v1/completions takes a string prompt only, answers 422 to `ignore_eos`, and sends
`usage` in a last chunk that also holds a choice. So, in http.client, without touching the bench:
- a prompt of token ids becomes text, each id one word that the checkpoint's tokenizer reads back as one
  token (distinct prompts of exactly the same length, as zoo serve gets them);
- `ignore_eos: true` becomes `generation_config: {"eos_token_id": -1}` (transformers' CB: no EOS);
- the line with `usage` becomes `data: {"choices":[],"usage":...}`, which the bench reads as the usage;
- a `data: {"error": ...}` line fails the request (the bench counts it among its errors).
"""
import atexit
import http.client
import json
import os
import runpy
import sys

from tokenizers import Tokenizer

tok = Tokenizer.from_file(os.environ["TS_TOKENIZER"])
words = []
for piece, i in sorted(tok.get_vocab().items(), key=lambda kv: kv[1]):
    w = piece[1:]
    if piece.startswith("\u0120") and w.isascii() and w.isalpha() and w.islower() and 3 <= len(w) <= 12:
        if tok.encode(" " + w, add_special_tokens=False).ids == [i]:
            words.append(" " + w)
            if len(words) == 8192:
                break
assert len(words) > 1000, f"only {len(words)} one-token words in {os.environ['TS_TOKENIZER']}"
stats = {"requests": 0, "checked": [], "stream_errors": 0}


def as_text(ids):
    text = "".join(words[t % len(words)] for t in ids)
    if len(stats["checked"]) < 4:
        stats["checked"].append((len(ids), len(tok.encode(text, add_special_tokens=False).ids)))
    return text


class Response(http.client.HTTPResponse):
    def readline(self, limit=-1):
        line = super().readline(limit)
        if line.startswith(b"data: {"):
            if b'"usage"' in line and b'"choices":[]' not in line:
                usage = json.loads(line[6:])["usage"]
                line = b"data: " + json.dumps({"choices": [], "usage": usage}, separators=(",", ":")).encode() + b"\n"
            elif line.startswith(b'data: {"error"'):
                stats["stream_errors"] += 1
                raise RuntimeError("stream error: " + line[6:206].decode(errors="replace"))
        return line


class Connection(http.client.HTTPConnection):
    response_class = Response

    def request(self, method, url, body=None, headers={}, **kw):
        if body and url.endswith("/completions"):
            b = json.loads(body)
            if isinstance(b.get("prompt"), list):
                b["prompt"] = as_text(b["prompt"])
            if b.pop("ignore_eos", False):
                b["generation_config"] = json.dumps({"eos_token_id": -1})
            stats["requests"] += 1
            body = json.dumps(b)
        return super().request(method, url, body, headers, **kw)


@atexit.register
def report():
    print(f"  adapter: {stats['requests']} requests, prompt tokens (ids -> text -> ids) {stats['checked']}, "
          f"{stats['stream_errors']} in-stream errors, {len(words)} one-token words", file=sys.stderr)


http.client.HTTPConnection = Connection
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
