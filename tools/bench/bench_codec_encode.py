#!/usr/bin/env python3
"""Times transformers' HiggsAudioV2TokenizerModel.encode on the input Zoo's encode benchmark uses.

    python3 tools/fixtures/make_codec_encode_fixtures.py --real --out DIR      # once, torchaudio needed
    python3 tools/bench/bench_codec_encode.py DIR/higgs-codec-enc-real [--device cuda] [--runs 20]

The side-by-side of `ZOO_CODEC_ENC_REAL_FIXTURE=DIR/higgs-codec-enc-real build/bin/test_higgs
"[codec_encode_bench]"` (Zoo's CUDA and CPU encode of the same 10 s input, case `a.input` of the
fixture's golden-encode.safetensors): float32, TF32 off, median over `--runs` after 3 warm-ups,
and the codes compared with the fixture's goldens (made on the CPU).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import make_codec_encode_fixtures as E  # noqa: E402
import make_codec_fixtures as C  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fixture", type=Path, help="a higgs-codec-enc-real directory (or higgs-tiny-codec-enc)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    real = "real" in args.fixture.name
    cfg = C.real_config() if real else E.tiny_config()
    model = E.load_reference(args.fixture, cfg).to(args.device)
    golden = load_file(str(args.fixture / "golden-encode.safetensors"))
    x = golden["a.input"].to(args.device).view(1, 1, -1)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    times = []
    with torch.no_grad():
        for i in range(args.runs + 3):
            sync()
            start = time.perf_counter()
            codes = model.encode(x, return_dict=False)
            sync()
            if i >= 3:
                times.append((time.perf_counter() - start) * 1000)
    times.sort()
    audio_ms = 1000 * x.numel() / cfg.sample_rate
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"cpu ({torch.get_num_threads()} threads)"
    want = golden["a.codes"]
    got = codes[0].t().cpu()
    equal = int((got == want).sum()) if got.shape == want.shape else -1
    print(f"transformers encode on {name} (float32, TF32 off): {x.numel()} samples ({audio_ms:.0f} ms of audio) -> "
          f"{got.shape[0]} frames: median {times[len(times) // 2]:.3f} ms, min {times[0]:.3f} ms = "
          f"{audio_ms / times[len(times) // 2]:.0f}x real time; codes equal to the CPU goldens {equal} of {want.numel()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
