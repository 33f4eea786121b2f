#!/usr/bin/env python3
"""transformers' continuous batching (generate_batch) on the prompts `zoo generate --input` reads.

    bench_generate_batch.py CHECKPOINT PROMPTS.jsonl [--new-tokens 128] [--attn sdpa] [--json]

PROMPTS.jsonl holds one {"input_ids": [...]} object per line (make one with --make N LEN VOCAB).
Greedy, no eos (every request gives --new-tokens tokens, as `zoo generate --ignore-eos`); the model
loads in bf16 on CUDA; one untimed warm-up call on the first 8 prompts, then the timed call over all
of them. Prints output tokens/s (generated tokens over the generate_batch wall time, load excluded,
as `zoo generate --input` reports its engine time).
"""
import argparse
import json
import random
import sys
import time


def make_prompts(path, count, length, vocab, seed=5):
    rng = random.Random(seed)
    with open(path, "w") as out:
        for _ in range(count):
            out.write(json.dumps({"input_ids": [rng.randrange(vocab) for _ in range(length)]}) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint", nargs="?")
    ap.add_argument("prompts")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--attn", default="sdpa")
    ap.add_argument("--make", nargs=3, type=int, metavar=("COUNT", "LEN", "VOCAB"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.make:
        make_prompts(a.prompts, *a.make)
        return 0
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.generation import GenerationConfig

    prompts = [json.loads(line)["input_ids"] for line in open(a.prompts) if line.strip()]
    model = AutoModelForCausalLM.from_pretrained(a.checkpoint, dtype=torch.bfloat16, attn_implementation=a.attn)
    model = model.to("cuda").eval()
    config = GenerationConfig(max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens, do_sample=False,
                              eos_token_id=None, pad_token_id=0)
    # No inference_mode around it: the batching manager updates its tensors in a thread of its own.
    model.generate_batch(inputs=prompts[:8], generation_config=config, progress_bar=False)
    torch.cuda.synchronize()
    start = time.perf_counter()
    outputs = model.generate_batch(inputs=prompts, generation_config=config, progress_bar=False)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    tokens = sum(len(o.generated_tokens) for o in outputs.values())
    if tokens != len(prompts) * a.new_tokens:
        print(f"generate_batch gave {tokens} tokens, expected {len(prompts) * a.new_tokens}", file=sys.stderr)
        return 1
    result = {"requests": len(prompts), "output_tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds,
              "attn": a.attn, "transformers": __import__("transformers").__version__, "torch": torch.__version__}
    print(json.dumps(result) if a.json else
          f"transformers generate_batch: {len(prompts)} requests, {tokens} tokens in {seconds:.2f} s: "
          f"{tokens / seconds:.0f} tokens/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
