#!/usr/bin/env python3
"""Single-threaded encode throughput: Zoo (`zoo tokenize --stats`) vs HF `tokenizers`, same corpus,
same tokenizer.json, timing only the encode calls (one call per corpus line) on both sides.

Usage: python3 tools/tokenizer/bench.py --zoo build/bin/zoo [--which qwen|llama3|llama2|mistral|gemma] [--repeat 5]
       [--tokenizer PATH]   (another tokenizer.json on the same corpus, e.g. check_real_spm.py --workdir's)
The fixtures come from tests/fixtures/tokenizer/fixtures.tar.xz (unpacked to a temp dir).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--which", default="qwen")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tokenizer", default=None, help="a tokenizer.json instead of the fixture --which names")
    ap.add_argument("--archive", default=os.path.join(here, "../../tests/fixtures/tokenizer/fixtures.tar.xz"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    with tarfile.open(args.archive) as tar:
        tar.extractall(tmp, members=[m for m in tar.getmembers() if m.name in ("corpus.jsonl", f"{args.which}/tokenizer.json")])
    tj = args.tokenizer or os.path.join(tmp, args.which, "tokenizer.json")
    corpus = os.path.join(tmp, "corpus.jsonl")
    lines = [json.loads(l) for l in open(corpus, encoding="utf-8")]
    nbytes = sum(len(l.encode()) for l in lines)

    t0 = time.perf_counter()
    tok = Tokenizer.from_file(tj)
    load = time.perf_counter() - t0
    passes = [0.0] * args.repeat
    for line in lines:
        for k in range(args.repeat):
            a = time.perf_counter()
            tok.encode(line, add_special_tokens=False)
            passes[k] += time.perf_counter() - a
    hf_first, hf_best = passes[0], min(passes)

    r = subprocess.run([args.zoo, "tokenize", tj, "--input", corpus, "--stats", "--repeat", str(args.repeat)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    m = re.search(r"load ([\d.]+) s; encode first pass ([\d.]+) s .*fastest of \d+ ([\d.]+) s", r.stderr)
    z_load, z_first, z_best = (float(x) for x in m.groups())
    mb = lambda s: nbytes / s / 1e6
    print(f"corpus: {len(lines)} lines, {nbytes} bytes; tokenizer: {args.tokenizer or args.which}; passes: {args.repeat}")
    print("| | load s | first pass MB/s | fastest pass MB/s |")
    print("|---|---|---|---|")
    print(f"| HF tokenizers {__import__('tokenizers').__version__} | {load:.3f} | {mb(hf_first):.2f} | {mb(hf_best):.2f} |")
    print(f"| Zoo | {z_load:.3f} | {mb(z_first):.2f} | {mb(z_best):.2f} |")


if __name__ == "__main__":
    main()
