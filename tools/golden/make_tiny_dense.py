#!/usr/bin/env python3
"""Writes a tiny random dense decoder checkpoint with transformers, plus a request.json, to try
record_golden.py (and a new plugin) on a model without q/k norm:

    make_tiny_dense.py OUT_DIR [--arch llama|qwen2|mistral] [--untied] [--seed N] [--tokens T]

llama: LlamaForCausalLM with llama3 RoPE scaling (theta 500000, factor 8, low/high frequency
factors 1/4, original context 64: with head_dim 16 the frequencies fall in all three bands);
qwen2: Qwen2ForCausalLM (q/k/v biases, set random); mistral: MistralForCausalLM without a sliding
window; the last two with default RoPE (theta 10000). 2 layers, hidden 64, 4 heads / 2 kv x 16,
MLP 128, vocab 256, eps 1e-5; norm weights 1 + 0.1*randn so a skipped norm weight shows; the head
is tied unless --untied. Written by save_pretrained (float32 safetensors, transformers-5
`rope_parameters` config layout). Python tool only; never on the product path.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
DEFAULT_ROPE = {"rope_type": "default", "rope_theta": 10000.0}
SIZES = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-5, max_position_embeddings=512)


def make(out: Path, arch: str = "llama", tied: bool = True, seed: int = 7, tokens: int = 40) -> dict:
    """Writes the checkpoint and request.json into out; returns the config's rope_parameters."""
    import torch
    import transformers as tf

    config_cls, model_cls = {"llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
                             "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM),
                             "mistral": (tf.MistralConfig, tf.MistralForCausalLM)}[arch]
    rope = dict(LLAMA3_ROPE if arch == "llama" else DEFAULT_ROPE)
    extra = {"sliding_window": None} if arch == "mistral" else {}
    cfg = config_cls(**SIZES, tie_word_embeddings=tied, rope_parameters=rope, bos_token_id=None,
                     eos_token_id=None, pad_token_id=None, **extra)
    torch.manual_seed(seed)
    model = model_cls(cfg)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif n.endswith(".bias"):  # qwen2's q/k/v biases start at zero
                p.copy_(0.1 * torch.randn_like(p))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    gen = torch.Generator().manual_seed(seed + 1000)
    ids = [int(i) for i in torch.randint(0, SIZES["vocab_size"], (tokens,), generator=gen)]
    (out / "request.json").write_text(json.dumps({"input_ids": ids}) + "\n")
    return rope


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--arch", choices=["llama", "qwen2", "mistral"], default="llama")
    ap.add_argument("--untied", action="store_true", help="separate lm_head.weight")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tokens", type=int, default=40, help="request length")
    args = ap.parse_args(argv)
    make(args.out, args.arch, not args.untied, args.seed, args.tokens)
    print(f"make_tiny_dense: wrote {args.arch} ({'untied' if args.untied else 'tied'}) to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
