#!/usr/bin/env python3
"""Sampling goldens from transformers' own logits processors (run where torch and transformers are).

Writes tests/fixtures/sampling/goldens.json: random logits rows, a token sequence per row (prompt
then output), sampling settings, and what transformers makes of them: the repetition penalty by
RepetitionPenaltyLogitsProcessor over the whole sequence, then TemperatureLogitsWarper,
TopKLogitsWarper, TopPLogitsWarper and MinPLogitsWarper (generate()'s order), the softmax of the
result (the distribution a draw is made from) and, for temperature 0, the argmax. transformers has
no presence or frequency penalty; those follow vLLM's rule (logits -= frequency * output counts,
then -= presence * (counts > 0)), written here in torch, after the repetition penalty as vLLM
applies them. test_framework "sampling goldens*" checks zoo::apply_penalties +
zoo::sampling_distribution against this file (within 1e-6, the same greedy pick).

  python3 tools/golden/make_sampling_goldens.py [--out tests/fixtures/sampling/goldens.json]
"""
import argparse
import json
import os
import sys

try:
    import torch
    import transformers
    from transformers.generation.logits_process import (
        MinPLogitsWarper,
        RepetitionPenaltyLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )
except ImportError as e:  # the ctest wrapper reads 77 as skipped
    print(f"make_sampling_goldens: needs torch and transformers ({e})", file=sys.stderr)
    sys.exit(77)

VOCAB = 256

# (temperature, top_k, top_p, min_p, repetition, frequency, presence)
SETTINGS = [
    (0.0, 0, 1.0, 0.0, 1.3, 0.0, 0.0),
    (0.0, 0, 1.0, 0.0, 0.7, 0.0, 0.0),
    (0.0, 0, 1.0, 0.0, 1.0, 1.5, 0.0),
    (0.0, 0, 1.0, 0.0, 1.0, 0.0, 2.0),
    (0.0, 0, 1.0, 0.0, 1.2, 0.8, -0.6),
    (1.0, 0, 1.0, 0.0, 1.5, 0.0, 0.0),
    (0.7, 0, 1.0, 0.0, 1.0, 0.5, 0.5),
    (0.9, 40, 1.0, 0.0, 1.1, 0.0, 0.0),
    (1.2, 0, 0.9, 0.0, 1.0, 0.3, 0.0),
    (0.8, 0, 1.0, 0.05, 1.0, 0.0, 1.0),
    (0.6, 20, 0.95, 0.0, 1.05, 0.2, 0.2),
    (1.0, 50, 0.8, 0.02, 0.9, -0.4, 0.7),
    (0.5, 0, 0.7, 0.1, 2.0, 2.0, -2.0),
    (1.5, 10, 1.0, 0.0, 1.0, 0.0, 0.0),
    (1.0, 0, 0.5, 0.0, 1.3, 1.0, 1.0),
    (0.75, 0, 1.0, 0.2, 1.15, 0.0, 0.4),
]


def process(logits, tokens, output_start, s):
    temperature, top_k, top_p, min_p, repetition, frequency, presence = s
    ids = torch.tensor([tokens], dtype=torch.long)
    scores = logits.clone().unsqueeze(0)
    if repetition != 1.0:
        scores = RepetitionPenaltyLogitsProcessor(penalty=repetition)(ids, scores)
    counts = torch.bincount(torch.tensor(tokens[output_start:], dtype=torch.long), minlength=VOCAB).to(torch.float32)
    if frequency != 0.0:
        scores = scores - frequency * counts.unsqueeze(0)
    if presence != 0.0:
        scores = scores - presence * (counts > 0).to(torch.float32).unsqueeze(0)
    if temperature == 0.0:
        return scores[0], None
    scores = TemperatureLogitsWarper(temperature)(ids, scores)
    if top_k > 0:
        scores = TopKLogitsWarper(top_k)(ids, scores)
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p)(ids, scores)
    if min_p > 0.0:
        scores = MinPLogitsWarper(min_p)(ids, scores)
    return scores[0], torch.softmax(scores.to(torch.float64), dim=-1)[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="tests/fixtures/sampling/goldens.json")
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(2026)
    cases = []
    for i, s in enumerate(SETTINGS):
        logits = (torch.randn(VOCAB, generator=gen) * 3.0).to(torch.float32)
        length = 8 + 23 * i
        # Few distinct ids, so tokens repeat (frequency counts above 1) and some appear only in the prompt.
        pool = torch.randint(0, VOCAB, (12 + i,), generator=gen)
        tokens = pool[torch.randint(0, pool.numel(), (length,), generator=gen)].tolist()
        output_start = length // 2
        scores, probs = process(logits, tokens, output_start, s)
        case = {
            "logits": [float(x) for x in logits.tolist()],
            "tokens": tokens,
            "output_start": output_start,
            "temperature": s[0], "top_k": s[1], "top_p": s[2], "min_p": s[3],
            "repetition_penalty": s[4], "frequency_penalty": s[5], "presence_penalty": s[6],
            "greedy": int(torch.argmax(scores).item()),
        }
        if probs is not None:
            case["probs"] = [float(x) for x in probs.tolist()]
        cases.append(case)
    doc = {
        "made_by": f"tools/golden/make_sampling_goldens.py, transformers {transformers.__version__}, torch {torch.__version__}",
        "presence_frequency": "no transformers processor: vLLM's rule in torch",
        "cases": cases,
    }
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases to {args.out}")


if __name__ == "__main__":
    main()
