#!/usr/bin/env python3
"""GPU-only time of transformers' Higgs codec decode (cuDNN convolutions, float32, TF32 off) at
250 frames: eager with CUDA events, replayed as a CUDA graph (no Python or launch overhead), and the
profiler's kernel-time sum, with cudnn.benchmark off and on. What a cuDNN path in Zoo would have to
beat, next to `test_higgs "[codec_bench]"` (docs/performance.md). Run from the repository root on
the GPU host:

    python3 tools/fixtures/make_codec_fixtures.py --real --out /tmp/cr --threads 16
    python3 tools/bench/codec_cudnn_probe.py /tmp/cr/higgs-codec-real
"""

import argparse
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import make_codec_fixtures as M  # noqa: E402
from timing import median_ms  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fixture", type=Path, help="the higgs-codec-real directory")
    ap.add_argument("--frames", type=int, default=250)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cfg = M.real_config()
    stored = M.G.load_checkpoint(args.fixture)
    state = {k[len(M.PREFIX):]: v.float() for k, v in stored.items() if k.startswith(M.PREFIX)}
    model = M.HiggsAudioV2TokenizerModel(cfg).eval()
    model.load_state_dict(state, strict=False)
    model = model.cuda()
    gen = torch.Generator().manual_seed(11)
    codes = torch.randint(0, cfg.codebook_size, (1, cfg.num_quantizers, args.frames), generator=gen).cuda()

    def decode():
        return model.decode(codes, return_dict=False)

    for bench in (False, True):
        torch.backends.cudnn.benchmark = bench
        with torch.no_grad():
            for _ in range(3):
                decode()
            eager = median_ms(decode)
            try:
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(2):
                        decode()
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    decode()
                replay = f"{median_ms(graph.replay):.3f} ms"
            except Exception as e:  # capture is best effort; the kernel sum below still answers
                replay = f"failed ({type(e).__name__}: {str(e)[:80]})"
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                decode()
                torch.cuda.synchronize()
            kernels = sum(e.device_time_total for e in prof.key_averages()) / 1000
        print(f"cudnn.benchmark={bench}: eager (events) {eager:.3f} ms, CUDA graph replay {replay}, "
              f"kernel time sum {kernels:.3f} ms")


if __name__ == "__main__":
    main()
