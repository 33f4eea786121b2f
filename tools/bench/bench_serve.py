#!/usr/bin/env python3
"""A load generator for an OpenAI-compatible server (zoo serve, transformers serve, vLLM).

    bench_serve.py BASE_URL --requests 512 --concurrency 256 --prompt-len 128 --max-tokens 128
                   [--model NAME] [--vocab 151936] [--seed 5] [--json]

Each request is a streamed /v1/completions with a prompt of random token ids (so no tokenizer is
needed: random-weight checkpoints from `zoo synth` have none), `ignore_eos`, greedy, and
`logprobs: 0` so that every token arrives as its own event whatever its text. Reports output
tokens/s over the whole run, time to first token and inter-token latency (median, p90, p99) as the
client sees them. Standard library only (threads and http.client).
"""
import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--model", default=None)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--text-prompts", action="store_true", help="send text ('word word ...') instead of ids")
    ap.add_argument("--shared-prefix", type=int, default=0,
                    help="the first N prompt tokens are the same in every request (a prefix cache's case)")
    ap.add_argument("--fields", default="{}",
                    help='extra request fields as a JSON object, e.g. \'{"repetition_penalty": 1.1}\'')
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.base)
    rng = random.Random(a.seed)
    draw = lambda n: [rng.randrange(min(1000, a.vocab // 2), a.vocab) for _ in range(n)]
    prefix = draw(min(a.shared_prefix, a.prompt_len))
    prompts = [prefix + draw(a.prompt_len - len(prefix)) for _ in range(a.requests)]
    next_index = [0]
    lock = threading.Lock()
    ttft, itl, tokens, errors = [], [], [0], []
    ttft_by_request = [None] * a.requests

    def one(prompt):
        body = {"prompt": " ".join(["hello"] * a.prompt_len) if a.text_prompts else prompt, "max_tokens": a.max_tokens,
                "temperature": 0, "stream": True, "ignore_eos": True, "logprobs": 0,
                "stream_options": {"include_usage": True}}
        body.update(json.loads(a.fields))
        if a.model:
            body["model"] = a.model
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
        start = time.perf_counter()
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            return None, [], 0, f"HTTP {r.status}: {r.read()[:200]!r}"
        first, stamps, usage = None, [], 0
        for line in r:
            if not line.startswith(b"data: "):
                continue
            now = time.perf_counter()
            if line.startswith(b"data: [DONE]"):
                break
            if b'"usage"' in line and b'"choices":[]' in line:
                usage = json.loads(line[6:])["usage"]["completion_tokens"]
                continue
            stamps.append(now)
            if first is None:
                first = now - start
        c.close()
        gaps = [b - a_ for a_, b in zip(stamps, stamps[1:])]
        return first, gaps, usage, None

    def worker():
        while True:
            with lock:
                if next_index[0] >= len(prompts):
                    return
                i = next_index[0]
                next_index[0] += 1
            try:
                first, gaps, n, err = one(prompts[i])
            except Exception as e:  # a broken connection counts as an error, not a crash
                first, gaps, n, err = None, [], 0, repr(e)
            with lock:
                if err:
                    errors.append(err)
                else:
                    ttft.append(first)
                    ttft_by_request[i] = first
                    itl.extend(gaps)
                    tokens[0] += n

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    out = {
        "requests": a.requests, "concurrency": a.concurrency, "prompt_len": a.prompt_len, "max_tokens": a.max_tokens,
        "errors": len(errors), "seconds": wall, "output_tokens": tokens[0], "output_tokens_per_s": tokens[0] / wall,
        "ttft_ms": {"median": 1e3 * percentile(ttft, 50), "p90": 1e3 * percentile(ttft, 90), "p99": 1e3 * percentile(ttft, 99)},
        "itl_ms": {"median": 1e3 * percentile(itl, 50), "p90": 1e3 * percentile(itl, 90), "p99": 1e3 * percentile(itl, 99)},
    }
    if errors:
        out["first_error"] = errors[0]
    if a.shared_prefix and a.requests > 1 and ttft_by_request[0] is not None:
        warm = [x for x in ttft_by_request[1:] if x is not None]
        out["shared_prefix"] = {"tokens": len(prefix), "first_ttft_ms": 1e3 * ttft_by_request[0],
                                "later_ttft_ms_median": 1e3 * percentile(warm, 50)}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"{a.requests} requests x ({a.prompt_len} in, {a.max_tokens} out) at concurrency {a.concurrency}: "
              f"{out['output_tokens_per_s']:.0f} output tokens/s, {wall:.2f} s, {len(errors)} errors")
        print(f"  TTFT ms median {out['ttft_ms']['median']:.1f} p90 {out['ttft_ms']['p90']:.1f} p99 {out['ttft_ms']['p99']:.1f}")
        print(f"  ITL  ms median {out['itl_ms']['median']:.2f} p90 {out['itl_ms']['p90']:.2f} p99 {out['itl_ms']['p99']:.2f}")
        if "shared_prefix" in out:
            sp = out["shared_prefix"]
            print(f"  shared prefix of {sp['tokens']} tokens: first request TTFT {sp['first_ttft_ms']:.1f} ms, "
                  f"later ones {sp['later_ttft_ms_median']:.1f} ms (median)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
