#!/usr/bin/env python3
"""Checks tools/golden/record_golden.py (CPU, a few seconds after the imports).

    test_record_golden.py [SOURCE_DIR [BINARY_DIR]]

1. On the committed Qwen3 fixtures it must reproduce tests/fixtures/*/golden.safetensors (made by
   tools/fixtures with its own hooks): same tensors, same order, same shapes, values within
   float32 noise (another torch may sum in another order). Likewise on the committed llama,
   qwen2 and mistral fixtures (made by tools/fixtures/make_llama_fixtures.py through this
   recorder), whose goldens hold every stage but q_norm/k_norm.
2. On tiny random LlamaForCausalLM checkpoints (llama3 RoPE scaling with all three frequency
   bands in use; tied and untied head), and Qwen2 (q/k/v biases) and Mistral ones (default RoPE),
   it must emit every stage but q_norm/k_norm, with q_rope / k_rope equal to an independent
   float64 RoPE of q_proj / k_proj, and logits equal to final_norm times the head read straight
   from the checkpoint file.
3. With BINARY_DIR/bin/zoo built: `zoo trace` of configs/qwen3-tiny.yaml compared with the
   recorder's golden passes that config's gates (`zoo compare --gates`).
4. With BINARY_DIR/bin/zoo built: the gates of configs/{llama-tiny,llama-tiny-hd128,qwen2-tiny,
   mistral-tiny}.yaml accept a float64 reference trace of the committed fixtures and reject it with
   a wrong eps, llama3 band or missing bias (tools/fixtures/test_llama_configs.py).
5. Bad input exits 2 naming the file.

Exit 77 (ctest's SKIP_RETURN_CODE) when torch or transformers cannot be imported.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

SKIP = 77
SRC = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
BIN = Path(sys.argv[2]).resolve() if len(sys.argv) > 2 else SRC / "build"
RECORDER = SRC / "tools" / "golden" / "record_golden.py"
QWEN3_FIXTURES = ["qwen3-tiny", "qwen3-tiny-hd64", "qwen3-tiny-f32-untied", "qwen3-tiny-sharded"]
# tools/fixtures/make_llama_fixtures.py records these with this recorder: rerunning it on the
# committed checkpoint and request must give the committed golden (a stale golden fails here).
LLAMA_FIXTURES = ["llama-tiny", "llama-tiny-hd128", "qwen2-tiny", "mistral-tiny"]
# The families of tools/fixtures/make_family_fixtures.py and the stages their layouts lack modules for.
FAMILY_ABSENT = {"gemma-tiny": "q_norm,k_norm", "gemma2-tiny": "q_norm,k_norm", "gemma3-tiny": "none",
                 "phi3-tiny": "q_norm,k_norm", "olmo2-tiny": "none", "mistral-sw-tiny": "q_norm,k_norm",
                 "qwen3-moe-tiny": "none", "qwen2-moe-tiny": "q_norm,k_norm"}

try:
    import numpy as np
    import torch
    import transformers  # noqa: F401
    from safetensors import safe_open
    from safetensors.torch import load_file
except Exception as e:  # noqa: BLE001 - any import failure means "cannot test here"
    print(f"SKIPPED: torch/transformers not importable ({type(e).__name__}: {e})")
    sys.exit(SKIP)

sys.path.insert(0, str(RECORDER.parent))
import make_tiny_dense as M  # noqa: E402
import record_golden as R  # noqa: E402

failures: list[str] = []


def check(cond: bool, what: str) -> None:
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def run_recorder(model_dir: Path, request: Path, out: Path, *extra: str) -> None:
    rc = R.main([str(model_dir), "--request", str(request), "--out", str(out), *extra])
    if rc != 0:
        raise RuntimeError(f"record_golden returned {rc}")


def meta_of(path: Path) -> dict:
    with safe_open(str(path), framework="pt") as f:
        return f.metadata()


def qwen3_fixtures(tmp: Path) -> None:
    for name in QWEN3_FIXTURES + LLAMA_FIXTURES + list(FAMILY_ABSENT):
        fx = SRC / "tests" / "fixtures" / name
        out = tmp / f"{name}.safetensors"
        run_recorder(fx, fx / "request.json", out)
        golden, mine = load_file(str(fx / "golden.safetensors")), load_file(str(out))
        check(list(golden) == list(mine), f"{name}: same tensor names in the same order ({len(golden)})")
        worst, worst_name = 0.0, ""
        for k, g in golden.items():
            a = mine.get(k)
            if a is None or a.shape != g.shape or a.dtype != g.dtype:
                check(False, f"{name}: {k} {None if a is None else (tuple(a.shape), a.dtype)} "
                             f"vs golden {(tuple(g.shape), g.dtype)}")
                continue
            d = (a.double() - g.double()).abs().max().item()
            # float32 noise of another summation order, relative to the tensor's scale
            rel = d / max(1.0, g.double().abs().max().item())
            if rel > worst:
                worst, worst_name = rel, k
        check(worst <= 2e-6, f"{name}: every tensor within float32 noise of the committed golden "
                             f"(worst relative max_abs {worst:.2e} at {worst_name or '-'})")
        meta = meta_of(out)
        absent = "none" if name in QWEN3_FIXTURES else FAMILY_ABSENT.get(name, "q_norm,k_norm")
        check(meta.get("rope_capture") == "patched apply_rotary_pos_emb" and meta.get("stages_absent") == absent,
              f"{name}: RoPE captured from the model's own call, stages absent: {absent} "
              f"({meta.get('rope_capture')}; {meta.get('stages_absent')})")


def unknown_layout(tmp: Path) -> None:
    """A model_type whose norm layout the recorder does not know is refused, not labelled by
    module names (OLMo-2's post_attention_layernorm once came out as attn_residual)."""
    notes: list[str] = []
    fx = SRC / "tests" / "fixtures" / "olmo2-tiny"
    model, core, cfg = R.load_model(fx, torch.float32, "cpu", "eager", notes)
    cfg.model_type = "olmo2_unknown_variant"
    try:
        R.record(model, core, cfg, [1, 2, 3], notes)
        check(False, "an unknown model_type is refused")
    except R.UsageError as e:
        check("does not know where its block norms sit" in str(e), f"an unknown model_type is refused ({e})")


def llama3_inv_freq(theta: float, dim: int, factor: float, low: float, high: float, original: int) -> np.ndarray:
    """Llama 3.1 frequency scaling, written from Meta's reference description in float64."""
    inv = theta ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    wavelen = 2 * math.pi / inv
    low_wavelen, high_wavelen = original / low, original / high
    out = np.empty_like(inv)
    for i, (f, w) in enumerate(zip(inv, wavelen)):
        if w < high_wavelen:
            out[i] = f
        elif w > low_wavelen:
            out[i] = f / factor
        else:
            smooth = (original / w - low) / (high - low)
            out[i] = (1 - smooth) * f / factor + smooth * f
    return out


def rope64(x: np.ndarray, inv: np.ndarray) -> np.ndarray:
    """x [T, heads, D] float64, rotate-half RoPE at positions 0..T-1."""
    T = x.shape[0]
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    ang = np.concatenate([ang, ang], axis=-1)[:, None, :]
    h = x.shape[-1] // 2
    rot = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
    return x * np.cos(ang) + rot * np.sin(ang)


def llama(tmp: Path, tied: bool, arch: str = "llama") -> None:
    """A tiny random model without q/k norm (make_tiny_dense.py): llama (llama3 RoPE scaling), or
    qwen2 (q/k/v biases) and mistral with default RoPE."""
    label = f"{arch}-tiny-{'tied' if tied else 'untied'}"
    heads, kv, D = M.SIZES["num_attention_heads"], M.SIZES["num_key_value_heads"], M.SIZES["head_dim"]
    d = tmp / label
    rope = M.make(d, arch, tied, seed=7 if tied else 8)
    ids = json.loads((d / "request.json").read_text())["input_ids"]
    out = tmp / f"{label}.safetensors"
    run_recorder(d, d / "request.json", out)
    trace = load_file(str(out))
    pre = R.LAYOUT_FREE | R.LAYOUT_STAGES["pre"]  # these are pre-norm models
    want = ["input_ids", "embed"] + [f"layer.{L}.{s}" for L in range(2) for s in R.STAGES
                                     if s in pre - R.MOE_MLP and s not in ("q_norm", "k_norm")] + ["final_norm", "logits"]
    check(list(trace) == want, f"{label}: every DESIGN tap but q_norm/k_norm, in forward order")
    meta = meta_of(out)
    check(meta.get("stages_absent") == "q_norm,k_norm" and meta.get("rope_capture") == "patched apply_rotary_pos_emb",
          f"{label}: metadata names the absent stages and the RoPE capture ({meta.get('stages_absent')})")

    if arch == "llama":
        inv = llama3_inv_freq(rope["rope_theta"], D, rope["factor"], rope["low_freq_factor"],
                              rope["high_freq_factor"], rope["original_max_position_embeddings"])
        wavelen = 2 * math.pi * (rope["rope_theta"] ** (np.arange(0, D, 2) / D))
        bands = {int(w < 16) - int(w > 64) for w in wavelen}  # 1 high, 0 smoothed, -1 low
        check(bands == {-1, 0, 1}, f"{label}: the llama3 scaling uses all three frequency bands")
    else:
        inv = rope["rope_theta"] ** (-np.arange(0, D, 2, dtype=np.float64) / D)
        if arch == "qwen2":
            with safe_open(str(d / "model.safetensors"), framework="pt") as f:
                b = f.get_tensor("model.layers.0.self_attn.q_proj.bias")
            check(float(b.abs().max()) > 0, f"{label}: q_proj has a (nonzero) bias in the checkpoint")
    T = len(ids)
    for L in range(2):
        for x, n in (("q", heads), ("k", kv)):
            src = trace[f"layer.{L}.{x}_proj"].double().numpy().reshape(T, n, D)
            ref = rope64(src, inv).reshape(T, -1)
            err = float(np.abs(trace[f"layer.{L}.{x}_rope"].double().numpy() - ref).max())
            check(err < 1e-5, f"{label}: layer.{L}.{x}_rope == float64 {'llama3' if arch == 'llama' else 'default'} "
                              f"RoPE of {x}_proj (max_abs {err:.1e})")
    with safe_open(str(d / "model.safetensors"), framework="pt") as f:
        head = f.get_tensor("model.embed_tokens.weight" if tied else "lm_head.weight")
        check(tied == ("lm_head.weight" not in f.keys()), f"{label}: checkpoint {'has no' if tied else 'has its'} lm_head.weight")
    ref = trace["final_norm"].double() @ head.double().T
    err = float((trace["logits"].double() - ref).abs().max())
    check(err < 1e-4, f"{label}: logits == final_norm x {'embed_tokens' if tied else 'lm_head'}^T (max_abs {err:.1e})")


def zoo_compare(tmp: Path) -> None:
    zoo = BIN / "bin" / "zoo"
    if not zoo.exists():
        print(f"note: {zoo} not built; skipping the zoo compare check")
        return
    config = SRC / "configs" / "qwen3-tiny.yaml"
    request = SRC / "tests" / "fixtures" / "qwen3-tiny" / "request.json"
    golden = tmp / "qwen3-tiny.safetensors"  # the recorder's, from qwen3_fixtures
    trace = tmp / "zoo-qwen3-tiny.safetensors"
    r = subprocess.run([str(zoo), "trace", str(config), "--request", str(request), "--out", str(trace),
                        "--points", "*"], capture_output=True, text=True)
    check(r.returncode == 0, f"zoo trace {config.name} --points '*'"
                             + ("" if r.returncode == 0 else f" (rc {r.returncode}: {r.stderr.strip()[-300:]})"))
    r = subprocess.run([str(zoo), "compare", str(golden), str(trace), "--gates", str(config)],
                       capture_output=True, text=True)
    summary = [line for line in r.stdout.splitlines() if line.startswith(("gates:", "result:"))]
    check(r.returncode == 0 and "result: PASS" in r.stdout,
          f"zoo compare (recorder golden vs zoo trace) passes configs/qwen3-tiny.yaml's gates: {summary}")


def bad_input(tmp: Path) -> None:
    req = tmp / "bad.json"
    req.write_text('{"input_ids": [1, 2], "audio_codes": [[1]]}')
    r = subprocess.run([sys.executable, str(RECORDER), str(SRC / "tests" / "fixtures" / "qwen3-tiny"),
                        "--request", str(req), "--out", str(tmp / "x.safetensors")], capture_output=True, text=True)
    check(r.returncode == 2 and str(req) in r.stderr and len(r.stderr.strip().splitlines()) == 1,
          f"a request with audio_codes exits 2 naming the file ({r.returncode}: {r.stderr.strip()})")
    r = subprocess.run([sys.executable, str(RECORDER), str(tmp), "--request",
                        str(SRC / "tests" / "fixtures" / "qwen3-tiny" / "request.json"),
                        "--out", str(tmp / "x.safetensors")], capture_output=True, text=True)
    check(r.returncode == 2 and "config.json" in r.stderr,
          f"a directory without config.json exits 2 naming it ({r.returncode}: {r.stderr.strip()})")


def llama_configs(tmp: Path) -> None:
    """tools/fixtures/test_llama_configs.py: the llama/qwen2/mistral configs' gates accept the float64
    reference on the committed fixtures and reject it with a wrong eps, RoPE band or missing bias."""
    zoo = BIN / "bin" / "zoo"
    if not zoo.is_file():
        print(f"note: {zoo} not built; skipping the llama config gate checks")
        return
    sys.path.insert(0, str(SRC / "tools" / "fixtures"))
    import test_llama_configs  # noqa: E402

    test_llama_configs.run(check, tmp, zoo)


def main() -> int:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="zoo-golden-test-") as t:
        tmp = Path(t)
        qwen3_fixtures(tmp)
        unknown_layout(tmp)
        llama(tmp, tied=True)
        llama(tmp, tied=False)
        llama(tmp, tied=False, arch="qwen2")
        llama(tmp, tied=True, arch="mistral")
        zoo_compare(tmp)
        llama_configs(tmp)
        bad_input(tmp)
    if failures:
        print(f"\n{len(failures)} check(s) failed:")
        for f in failures:
            print(f"  {f}")
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
