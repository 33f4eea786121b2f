#!/usr/bin/env python3
# Run from the repository root on the GPU host after `make_codec_fixtures.py --real --out /tmp/cr`.
# GPU-only time of transformers' codec decode (cuDNN float32, TF32 off) at 250 frames: CUDA graph
# replay (no Python/launch overhead) and the profiler's kernel-time sum, with and without cudnn.benchmark.
import sys, torch
sys.path.insert(0, 'tools/fixtures')
import make_codec_fixtures as M
from pathlib import Path
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
cfg = M.real_config(); d = Path('/tmp/cr/higgs-codec-real')
stored = M.G.load_checkpoint(d)
state = {k[len(M.PREFIX):]: v.float() for k, v in stored.items() if k.startswith(M.PREFIX)}
m = M.HiggsAudioV2TokenizerModel(cfg).eval(); m.load_state_dict(state, strict=False); m = m.cuda()
codes = torch.randint(0, 1024, (1, 8, 250), generator=torch.Generator().manual_seed(11)).cuda()
def events(fn, n=20):
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    ts.sort(); return ts[len(ts) // 2]
for bench in (False, True):
    torch.backends.cudnn.benchmark = bench
    with torch.no_grad():
        for _ in range(3): m.decode(codes, return_dict=False)
        eager = events(lambda: m.decode(codes, return_dict=False))
        try:
            s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2): m.decode(codes, return_dict=False)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g): out = m.decode(codes, return_dict=False)
            graph = f"{events(g.replay):.3f} ms"
        except Exception as e:
            graph = f"failed ({type(e).__name__}: {str(e)[:80]})"
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            m.decode(codes, return_dict=False); torch.cuda.synchronize()
        kern = sum(e.device_time_total for e in p.key_averages()) / 1000
    print(f"cudnn.benchmark={bench}: eager (events) {eager:.3f} ms, CUDA graph replay {graph}, kernel time sum {kern:.3f} ms")
