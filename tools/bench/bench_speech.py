#!/usr/bin/env python3
"""A load generator for an OpenAI-compatible speech endpoint (zoo serve of a Higgs model).

    bench_speech.py BASE_URL --requests 64 --concurrency 16 --frames 100 [--codebooks 8] [--json]

Each request is a POST /v1/audio/speech with response_format pcm (16-bit mono, streamed as it is
decoded), a fixed text, greedy codes (random weights rarely end the speech themselves, so every
request runs --frames frames: max_new_tokens = frames + codebooks - 1) and its own seed. Per request
it records when the first audio bytes arrived (first-chunk latency, from the request's start), the
audio's length (bytes / 2 / the X-Sample-Rate header) and whether a player that starts at the first
chunk would run dry (an underrun: at some chunk's arrival less audio had arrived than the time
since the first chunk). Reports requests/s and seconds of audio per second over the whole run,
real time per request (audio length / request time), first-chunk latency (median, p90, p99) and
underruns. Standard library only (threads and http.client).
"""
import argparse
import http.client
import json
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


def one_request(host, port, body):
    """(first_chunk_s, total_s, audio_s, underrun, error)"""
    start = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=600)
    try:
        conn.request("POST", "/v1/audio/speech", json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        if r.status != 200:
            return None, None, 0.0, False, f"{r.status} {r.read()[:300]!r}"
        rate = int(r.getheader("X-Sample-Rate") or 24000)
        received = 0
        first = None
        underrun = False
        while True:
            chunk = r.read1(1 << 16)
            if not chunk:
                break
            now = time.perf_counter()
            if first is None:
                first = now
            elif received / 2 / rate < now - first - 1e-3:
                underrun = True  # the audio so far ran out before this chunk came
            received += len(chunk)
        end = time.perf_counter()
        return (first - start if first else None), end - start, received / 2 / rate, underrun, None
    except Exception as e:  # noqa: BLE001 (reported per request)
        return None, None, 0.0, False, repr(e)
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base")
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--frames", type=int, default=100, help="frames per request (25 a second for Higgs)")
    ap.add_argument("--codebooks", type=int, default=8)
    ap.add_argument("--text", default="Hello there, this is a tiny text to speech test. The quick brown fox jumps.")
    ap.add_argument("--model", default=None)
    ap.add_argument("--warmup", type=int, default=2, help="requests sent one at a time first, not counted")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.base)

    def body(i):
        b = {"input": a.text, "response_format": "pcm", "temperature": 0, "seed": i,
             "max_new_tokens": a.frames + a.codebooks - 1}
        if a.model:
            b["model"] = a.model
        return b

    for i in range(a.warmup):
        _, _, _, _, err = one_request(u.hostname, u.port, body(10_000 + i))
        if err:
            sys.exit(f"bench_speech: warm-up request failed: {err}")
    results = [None] * a.requests
    next_index = [0]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = next_index[0]
                if i >= a.requests:
                    return
                next_index[0] += 1
            results[i] = one_request(u.hostname, u.port, body(i))

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    errors = [r[4] for r in results if r[4]]
    ok = [r for r in results if not r[4]]
    firsts = [r[0] for r in ok if r[0] is not None]
    audio = sum(r[2] for r in ok)
    report = {
        "requests": a.requests, "concurrency": a.concurrency, "frames": a.frames, "errors": len(errors),
        "wall_s": round(wall, 3), "requests_per_s": round(len(ok) / wall, 3),
        "audio_s_per_s": round(audio / wall, 2),
        "realtime_per_request_median": round(statistics.median([r[2] / r[1] for r in ok]), 2) if ok else None,
        "first_chunk_ms": {"median": round(1e3 * statistics.median(firsts), 1) if firsts else None,
                           "p90": round(1e3 * percentile(firsts, 90), 1), "p99": round(1e3 * percentile(firsts, 99), 1)},
        "audio_s_per_request": round(audio / max(len(ok), 1), 3),
        "underruns": sum(1 for r in ok if r[3]),
    }
    if a.json:
        print(json.dumps(report))
    else:
        f = report["first_chunk_ms"]
        print(f"{len(ok)}/{a.requests} requests at concurrency {a.concurrency}, {a.frames} frames each "
              f"({report['audio_s_per_request']:.2f} s of audio): {report['requests_per_s']:.2f} req/s, "
              f"{report['audio_s_per_s']:.1f} audio-s/s, {report['realtime_per_request_median']}x real time per "
              f"request; first chunk median {f['median']} ms, p90 {f['p90']} ms, p99 {f['p99']} ms; "
              f"underruns {report['underruns']}")
    for e in errors[:5]:
        print("error:", e, file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
