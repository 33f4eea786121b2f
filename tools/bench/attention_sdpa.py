#!/usr/bin/env python3
"""Causal prefill attention in torch (scaled_dot_product_attention), at the shapes that Zoo's own
kernel is timed at (`test_cuda "[cuda_bench]"`, lines "prefill attention T=..."), so that both
numbers come from one GPU run (issue 12: the attention kernel alone against torch SDPA).

    python3 tools/bench/attention_sdpa.py [--json] [--device cuda] [--shapes T:Hq:Hk:D,...]

Each shape is timed with torch's default backend choice (what transformers' "sdpa" attention
gets) and with every SDPA backend torch offers for it (flash, cuDNN, memory-efficient:
`torch.nn.attention.sdpa_kernel`), bf16, q [1, Hq, T, D] and k/v [1, Hk, T, D] with GQA
(`enable_gqa`), `is_causal=True`; median of 10 after 3 warm-ups, CUDA events. The best backend
is the baseline to beat; all are printed. FLOPs are counted as in bench_test.cpp: query i sees
i + 1 keys, two matmuls of 2 * D FLOPs per (query, key) and head. `--device cpu` (with small
`--shapes`) is a dry run of the script, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import sys

# torch is imported where it is used, so that the shape list and its parser load without it (the
# drift test against bench_test.cpp, test_bench_shapes.py, runs in CI, where torch is not).

# bench_test.cpp's prefill attention shapes: (tokens, q heads, kv heads, head_dim).
ZOO_SHAPES = [(4096, 32, 8, 128), (4096, 16, 8, 128), (4096, 32, 8, 64), (4096, 16, 4, 256),
              (16384, 32, 8, 128), (512, 32, 8, 128), (1024, 32, 8, 128), (2048, 32, 8, 128),
              (8192, 32, 8, 128), (1024, 16, 8, 128), (2048, 16, 8, 128)]


def parse_shapes(text: str) -> list[tuple[int, int, int, int]]:
    shapes = []
    for item in text.split(","):
        parts = item.split(":")
        if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise argparse.ArgumentTypeError(f"shape {item!r}: expected T:Hq:Hk:D, positive integers")
        t, hq, hk, d = (int(p) for p in parts)
        if hq % hk:
            raise argparse.ArgumentTypeError(f"shape {item!r}: q heads must be a multiple of kv heads")
        shapes.append((t, hq, hk, d))
    return shapes


def causal_flops(t: int, hq: int, d: int) -> float:
    return 4.0 * d * hq * (t * (t + 1) / 2)


def backends() -> list[tuple[str, object]]:
    from torch.nn.attention import SDPBackend
    out = [("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        out.insert(1, ("cudnn", SDPBackend.CUDNN_ATTENTION))
    return out


def measure(shape: tuple[int, int, int, int], device: str) -> dict:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    from timing import median_ms
    t, hq, hk, d = shape
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    gen = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(1, hq, t, d, device=device, dtype=dtype, generator=gen)
    k = torch.randn(1, hk, t, d, device=device, dtype=dtype, generator=gen)
    v = torch.randn(1, hk, t, d, device=device, dtype=dtype, generator=gen)
    row = {"tokens": t, "q_heads": hq, "kv_heads": hk, "head_dim": d, "backends": {}}
    cuda = device.startswith("cuda")
    # "default" is torch's own pick, i.e. what transformers' sdpa attention gets; then each backend.
    candidates = [("default", None)] + (backends() if cuda else [])
    for name, backend in candidates:
        def run():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        try:
            if backend is None:
                ms = median_ms(run, device, repeat=10 if cuda else 2, warmup=3 if cuda else 1)
            else:
                with sdpa_kernel([backend]):
                    ms = median_ms(run, device, repeat=10, warmup=3)
        except RuntimeError as e:  # this backend does not take the shape (or is not built)
            row["backends"][name] = {"error": str(e).splitlines()[0][:120]}
            continue
        row["backends"][name] = {"ms": ms, "tflops": causal_flops(t, hq, d) / (ms * 1e-3) / 1e12}
    timed = {n: b for n, b in row["backends"].items() if "ms" in b}
    if timed:
        best = min(timed, key=lambda n: timed[n]["ms"])
        row["best"] = {"backend": best, **timed[best]}
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--shapes", type=parse_shapes, default=ZOO_SHAPES, help="T:Hq:Hk:D,... (default: bench_test.cpp's)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args()
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("attention_sdpa.py: no CUDA device (use --device cpu for a dry run)", file=sys.stderr)
        return 2
    rows = [measure(s, args.device) for s in args.shapes]
    info = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
            "rows": rows}
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    print(f"torch {info['torch']} on {info['device']}")
    for r in rows:
        parts = [f"{n} {b['ms']:.3f} ms" if "ms" in b else f"{n} n/a" for n, b in r["backends"].items()]
        best = r.get("best")
        head = f"sdpa prefill attention T={r['tokens']:<5} heads {r['q_heads']}/{r['kv_heads']} D={r['head_dim']:<3}"
        tail = f"best {best['backend']} {best['ms']:8.3f} ms {best['tflops']:7.1f} TFLOP/s (causal)" if best else "no backend ran"
        print(f"{head}  {tail}  [{', '.join(parts)}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
