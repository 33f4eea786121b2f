"""Median wall time of a callable for the benchmark tools: CUDA events on a GPU (device time of
what `fn` enqueues, synchronized per sample), perf_counter on the CPU."""

from __future__ import annotations

import statistics
import time

import torch


def median_ms(fn, device: str = "cuda", repeat: int = 20, warmup: int = 0) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        if device.startswith("cuda"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            samples.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(samples)
