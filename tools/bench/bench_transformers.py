#!/usr/bin/env python3
"""transformers side of the Zoo benchmarks, with the same phases and JSON keys as `zoo bench --json`.

    bench_transformers.py CHECKPOINT [--prompt-len 512,2048] [--decode-context 512,4096]
                          [--new-tokens 64] [--repeat 3] [--device cuda] [--json]
    bench_transformers.py --roofline [--device cuda] [--json]

CHECKPOINT is an HF directory (config.json + model.safetensors or shards + index), e.g. from
`zoo synth`. Qwen3 checkpoints load with Qwen3ForCausalLM.from_pretrained (bf16, sdpa), Qwen3-MoE
ones with Qwen3MoeForCausalLM. A Higgs
Audio v3 checkpoint (model_type higgs_multimodal_qwen3) loads its Qwen3 body the same way with
the Higgs tensor names mapped onto Qwen3's, and its audio head is F.linear with the tied audio
table, as Zoo's higgs_audio plugin computes it.

Each step mirrors what `zoo bench` times (apps/zoo/cmd_bench.cpp), so the ratio compares
like with like:
  - prefill: a fresh cache, one forward over the prompt with use_cache=True, logits of the last
    position only (logits_to_keep=1), copied to the host as float32 (Zoo returns host float32
    logits). One untimed warm-up, median of --repeat.
  - decode: prefill the context (untimed), then --new-tokens one-token steps feeding back the same
    deterministic token sequence as Zoo, each returning host logits; time per step, median over
    repeats.
  - load: from_pretrained (to host memory: device_map would need accelerate) then .to(device),
    synchronized; the CUDA context, transformers' lazy imports and its first-load work (a tiny
    model loaded once) happen before the clock starts, as Zoo's plugin opens before its clock.
  - memory: torch.cuda.max_memory_allocated, plus device-used bytes (total - free, Zoo's measure)
    sampled after each forward.

--mode compiled is the baseline transformers' docs recommend for fast decode: a StaticCache
(max_cache_len = context + new tokens, reset between repeats) and the one-token decode step under
torch.compile(mode="reduce-overhead", fullgraph=True) (CUDA graphs), fed and read back exactly
like the eager decode above. The prefill into the cache runs eagerly, as transformers' generate()
runs it (only decode steps are compiled), so compiled mode reports decode only (its "prefill" list
is empty). The first repeat (untimed) also pays compilation; its time is runtime.warmup_s.
--no-compile keeps the StaticCache path without torch.compile: a CPU smoke test of the same code.

--roofline measures what the hardware gives torch: best bf16 matmul TFLOP/s (n x n x n) and
device copy bandwidth (bytes read + written per second, and the one-way number).
Only torch, transformers, safetensors and the standard library are used.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import re
import statistics
import sys
import time
from pathlib import Path

import torch

HIGGS_TEXT = "tied.embedding.text_embedding.weight"
HIGGS_AUDIO = "tied.embedding.modality_embeddings.0.embedding.weight"
# Higgs stored names -> Qwen3ForCausalLM names (regex, as from_pretrained's key_mapping takes them).
HIGGS_KEY_MAPPING = {r"^body\.": "model.", r"^tied\.embedding\.text_embedding\.": "model.embed_tokens."}


def log(msg: str) -> None:
    print(f"bench_transformers: {msg}", file=sys.stderr, flush=True)


def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of integers")
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"'{text}' needs positive integers")
    return values


class Device:
    """Synchronization and memory sampling that degrade to no-ops on the CPU."""

    def __init__(self, name: str):
        self.name = name
        self.torch = torch.device(name)
        self.cuda = self.torch.type == "cuda"
        self.peak_used = 0
        if self.cuda:
            if not torch.cuda.is_available():
                raise SystemExit(f"bench_transformers: device '{name}' asked for, but torch sees no CUDA device")
            if self.torch.index is None:  # set_device and friends want an index
                self.torch = torch.device("cuda", torch.cuda.current_device())
            torch.cuda.set_device(self.torch.index)
            torch.zeros(1, device=self.torch)  # make the context outside every timed region
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def note_memory(self) -> None:
        if self.cuda:
            free, total = torch.cuda.mem_get_info()
            self.peak_used = max(self.peak_used, total - free)

    def gpu_name(self) -> str:
        return torch.cuda.get_device_name(self.torch) if self.cuda else "cpu"


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def random_ids(count: int, vocab: int, seed: int, device: Device) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (1, count), generator=gen, dtype=torch.long).to(device.torch)


def read_config(checkpoint: Path) -> dict:
    path = checkpoint / "config.json"
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise SystemExit(f"bench_transformers: {path}: cannot read ({e.strerror})")
    except json.JSONDecodeError as e:
        raise SystemExit(f"bench_transformers: {path}: not valid JSON ({e})")


def is_higgs(config: dict) -> bool:
    return config.get("model_type") == "higgs_multimodal_qwen3" or (
        "text_config" in config and "audio_encoder_config" in config)


def shard_of(checkpoint: Path, name: str) -> Path:
    index = checkpoint / "model.safetensors.index.json"
    if index.exists():
        weight_map = json.loads(index.read_text())["weight_map"]
        if name not in weight_map:
            raise SystemExit(f"bench_transformers: {index}: no tensor '{name}'")
        return checkpoint / weight_map[name]
    return checkpoint / "model.safetensors"


def qwen3_text_config(config: dict):
    from transformers import Qwen3Config

    text = dict(config["text_config"])
    if "rope_theta" in text and text["rope_theta"] is None:
        text.pop("rope_theta")  # the value is under rope_parameters
    text["tie_word_embeddings"] = True  # Higgs ties the text head whatever text_config says
    return Qwen3Config(**text)


def load_higgs_body_by_hand(checkpoint: Path, qcfg, dtype: torch.dtype, attn: str, device: Device):
    """Fallback when from_pretrained's key_mapping is unavailable: build on the device, copy the
    renamed tensors in."""
    from safetensors import safe_open
    from transformers import Qwen3ForCausalLM

    qcfg._attn_implementation = attn
    old_dtype = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device.torch):
            model = Qwen3ForCausalLM(qcfg)
    finally:
        torch.set_default_dtype(old_dtype)
    params = dict(model.named_parameters())
    files = sorted({p.name for p in checkpoint.glob("*.safetensors")})
    loaded = set()
    with torch.no_grad():
        for file in files:
            with safe_open(str(checkpoint / file), framework="pt", device=str(device.torch)) as f:
                for key in f.keys():
                    name = key
                    for pattern, repl in HIGGS_KEY_MAPPING.items():
                        name, n = re.subn(pattern, repl, name)
                        if n:
                            break
                    if name in params:
                        params[name].copy_(f.get_tensor(key))
                        loaded.add(name)
    missing = set(params) - loaded - {"lm_head.weight"}
    if missing:
        raise SystemExit(f"bench_transformers: {checkpoint}: tensors missing for {sorted(missing)[:5]}...")
    if model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
        model.lm_head.weight = model.model.embed_tokens.weight
    return model


def warm_up_loading(dtype: torch.dtype, attn: str, device: Device) -> None:
    """Loads a tiny Qwen3 once, untimed: transformers imports modules and builds tables lazily on
    its first from_pretrained, which would otherwise count as load time (Zoo opens its plugin, the
    equivalent, before its clock starts)."""
    import tempfile

    from transformers import Qwen3Config, Qwen3ForCausalLM

    tiny = Qwen3Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=1, head_dim=32, bos_token_id=None,
                       eos_token_id=None, pad_token_id=None, tie_word_embeddings=True)
    with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
        Qwen3ForCausalLM(tiny).to(dtype).save_pretrained(tmp)
        model = Qwen3ForCausalLM.from_pretrained(tmp, dtype=dtype, attn_implementation=attn).to(device.torch)
        del model
    device.sync()


def check_loaded(checkpoint: Path, stored_name: str, param: torch.Tensor) -> None:
    """Raises unless `param` holds the checkpoint's tensor: proves the weights were loaded, not
    left at their random initialization, whatever a transformers version reports."""
    from safetensors import safe_open

    with safe_open(str(shard_of(checkpoint, stored_name)), framework="pt", device="cpu") as f:
        stored = f.get_tensor(stored_name)
    if not torch.equal(stored.to(param.dtype), param.detach().cpu()):
        raise RuntimeError(f"{stored_name} was not loaded")


def load_model(checkpoint: Path, dtype: torch.dtype, attn: str, device: Device, higgs_load: str = "auto"):
    """Returns (model, audio_table or None, info dict). Timed by the caller."""
    from transformers import Qwen3ForCausalLM

    config = read_config(checkpoint)
    # No device_map: that needs accelerate, which the GPU host lacks; from_pretrained then .to() is
    # transformers' plain path.
    common = dict(dtype=dtype, attn_implementation=attn)
    if not is_higgs(config):
        # The class config.json's model_type names (Gemma 2's soft-caps and windows, OLMo-2's
        # whole-projection q/k norms): a Qwen3 class at another family's shape loads, but leaves
        # that family's tensors at random init and skips its ops.
        from transformers import AutoModelForCausalLM as cls
        model, loading = cls.from_pretrained(str(checkpoint), output_loading_info=True, **common)
        model = model.to(device.torch)
        check_loaded(checkpoint, "model.norm.weight", model.model.norm.weight)
        missing = sorted(set(loading.get("missing_keys", [])) - {"lm_head.weight"})
        if missing:
            log(f"warning: {checkpoint}: tensors left at random init: {missing[:5]}")
        kind = config.get("model_type", "qwen3")
        return model.eval(), None, {"kind": kind, "load_method": "from_pretrained", "missing_keys": missing}

    from safetensors import safe_open

    qcfg = qwen3_text_config(config)
    method = "from_pretrained+key_mapping"
    try:
        if higgs_load == "by-hand":
            raise RuntimeError("--higgs-load by-hand")
        model, loading = Qwen3ForCausalLM.from_pretrained(
            str(checkpoint), config=qcfg, key_mapping=HIGGS_KEY_MAPPING, output_loading_info=True, **common)
        missing = set(loading.get("missing_keys", [])) - {"lm_head.weight"}
        if missing:
            raise RuntimeError(f"missing {sorted(missing)[:5]}")
        model = model.to(device.torch)
        check_loaded(checkpoint, "body.norm.weight", model.model.norm.weight)
    except Exception as e:  # noqa: BLE001 - any failure of this path falls back to the explicit one
        log(f"from_pretrained with key_mapping failed ({e}); loading the body by hand")
        model = load_higgs_body_by_hand(checkpoint, qcfg, dtype, attn, device)
        check_loaded(checkpoint, "body.norm.weight", model.model.norm.weight)
        method = "by_hand"
    with safe_open(str(shard_of(checkpoint, HIGGS_AUDIO)), framework="pt", device=str(device.torch)) as f:
        table = f.get_tensor(HIGGS_AUDIO).to(dtype)
    audio = config["audio_encoder_config"]
    K, V = int(audio["num_codebooks"]), int(audio["vocab_size"])
    if tuple(table.shape) != (K * V, qcfg.hidden_size):
        raise SystemExit(f"bench_transformers: {checkpoint}: {HIGGS_AUDIO} is {tuple(table.shape)}, "
                         f"want ({K * V}, {qcfg.hidden_size})")
    return model.eval(), table, {"kind": "higgs_audio", "load_method": method, "codebooks": K, "codes": V}


class Runner:
    """One forward step returning host float32 logits of the last position, like a Zoo session."""

    def __init__(self, model, audio_table, info: dict):
        self.model = model
        self.table = audio_table
        self.info = info
        module = model if audio_table is None else model.model
        # transformers renamed past_key_values to cache (5.2x keeps the old name, deprecated)
        self.cache_kw = "cache" if "cache" in inspect.signature(module.forward).parameters else "past_key_values"

    @staticmethod
    def cache_of(out):
        for name in ("cache", "past_key_values"):
            value = getattr(out, name, None)
            if value is not None:
                return value
        raise RuntimeError("the forward returned no KV cache")

    def step(self, ids: torch.Tensor, cache):
        kwargs = {"input_ids": ids, "use_cache": True, self.cache_kw: cache}
        if self.table is None:
            out = self.model(logits_to_keep=1, **kwargs)
            logits = out.logits[0, -1]
        else:  # Higgs: Qwen3 body, then the tied audio head [K*V, H] at the last position
            out = self.model.model(**kwargs)
            hidden = out.last_hidden_state[0, -1]
            logits = torch.nn.functional.linear(hidden, self.table).view(self.info["codebooks"], self.info["codes"])
        host = logits.float().cpu()
        return self.cache_of(out), host


class StaticDecoder:
    """transformers' fast-decode recipe: a StaticCache sized context + new tokens, an eager prefill
    into it, and a compiled one-token step (torch.compile reduce-overhead: CUDA graphs). Each step
    returns host float32 logits of the last position, as Runner.step does."""

    def __init__(self, runner: Runner, max_len: int, compile_mode: str | None, fullgraph: bool = True):
        from transformers import StaticCache

        self.runner = runner
        model = runner.model
        self.cache = StaticCache(config=self.cache_config(model.config, max_len), max_cache_len=max_len)
        module = model if runner.table is None else model.model
        # transformers < 5.1x takes cache_position; 5.1x tracks the position inside the cache.
        self.cache_position = "cache_position" in inspect.signature(module.forward).parameters
        self.eager = self._forward
        self.compile_mode = compile_mode
        self.fullgraph = fullgraph
        self.step_fn = self._forward
        if compile_mode:
            self.step_fn = torch.compile(self._forward, mode=compile_mode, fullgraph=fullgraph, dynamic=False)

    cache_layers = "as the config states"

    def cache_config(self, config, max_len: int):
        """The config the StaticCache is built from. transformers 5.17's sliding-window cache layer
        counts its tokens in a Python int that the mask code reads, so torch.compile (dynamic=False)
        recompiles every decode step (TORCH_LOGS=recompiles: `cumulative_length_int == 12`): a 9B
        body never finished compiling. Where the window is at least the whole run (context + new
        tokens), a sliding layer sees every cached key, so a full StaticLayer computes the same
        attention with a tensor position instead; a window shorter than the run keeps its layers."""
        text = config.get_text_config(decoder=True)
        window = getattr(text, "sliding_window", None)
        types = getattr(text, "layer_types", None) or (
            ["sliding_attention"] * text.num_hidden_layers if window is not None else None)
        if not window or window < max_len or not types or "sliding_attention" not in types:
            return config
        import copy

        config = copy.deepcopy(config)
        text = config.get_text_config(decoder=True)
        text.layer_types = ["full_attention" if t == "sliding_attention" else t for t in types]
        self.cache_layers = f"full StaticLayers for the sliding ones (window {window} >= {max_len} positions)"
        return config

    def _forward(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        runner = self.runner
        kwargs = {"input_ids": ids, "position_ids": positions, "use_cache": True, runner.cache_kw: self.cache}
        if self.cache_position:
            kwargs["cache_position"] = positions[0]
        if runner.table is None:
            return runner.model(logits_to_keep=1, **kwargs).logits[0, -1]
        hidden = runner.model.model(**kwargs).last_hidden_state[0, -1]
        return torch.nn.functional.linear(hidden, runner.table).view(runner.info["codebooks"], runner.info["codes"])

    def prefill(self, ids: torch.Tensor) -> torch.Tensor:
        self.cache.reset()
        positions = torch.arange(ids.shape[1], device=ids.device)[None]
        return self.eager(ids, positions).float().cpu()

    def step(self, token: int, position: int, device: torch.device) -> torch.Tensor:
        ids = torch.tensor([[token]], dtype=torch.long, device=device)
        positions = torch.tensor([[position]], dtype=torch.long, device=device)
        try:
            logits = self.step_fn(ids, positions)
        except Exception as e:  # noqa: BLE001 - a graph break under fullgraph: compile with breaks
            if not (self.compile_mode and self.fullgraph):
                raise
            log(f"fullgraph compile failed ({type(e).__name__}: {str(e).splitlines()[0][:200]}); "
                "compiling with graph breaks allowed")
            self.fullgraph = False
            torch._dynamo.reset()
            self.step_fn = torch.compile(self._forward, mode=self.compile_mode, fullgraph=False, dynamic=False)
            logits = self.step_fn(ids, positions)
        return logits.float().cpu()  # copies out of the CUDA graph's output buffer


def decode_compiled(args, runner: Runner, device: Device, vocab: int, weight_bytes: int) -> tuple[list, dict]:
    """Decode rows like bench()'s, through StaticDecoder; returns (rows, runtime extras)."""
    compile_mode = None if args.no_compile else "reduce-overhead"
    if compile_mode:
        # One compiled graph per decode context (static shapes); leave room for several.
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
    rows, warmup, fullgraph, cache_layers = [], {}, True, ""
    for context in args.decode_context or args.prompt_len:
        log(f"compiled decode {args.new_tokens} tokens at context {context} x {args.repeat} "
            f"(StaticCache, {compile_mode or 'no torch.compile'})")
        decoder = StaticDecoder(runner, context + args.new_tokens, compile_mode)
        ids = random_ids(context, vocab, 99 + context, device)
        per_token = []
        for r in range(args.repeat + 1):
            decoder.prefill(ids)
            nxt = int(ids[0, -1])
            device.sync()
            t0 = time.perf_counter()
            for i in range(args.new_tokens):
                decoder.step(nxt, context + i, device.torch)
                nxt = (nxt * 31 + 7) % vocab  # the token sequence Zoo feeds back
            device.sync()
            if r > 0:
                per_token.append((time.perf_counter() - t0) / args.new_tokens)
            else:  # r == 0 compiles and records the CUDA graphs
                warmup[str(context)] = time.perf_counter() - t0
            device.note_memory()
        fullgraph = fullgraph and decoder.fullgraph
        cache_layers = decoder.cache_layers
        del decoder
        t = median(per_token)
        rows.append({"context": context, "new_tokens": args.new_tokens, "ms_per_token": 1e3 * t,
                     "tokens_per_s": 1.0 / t, "weight_gb_per_s": weight_bytes / t / 1e9})
    extras = {"mode": "compiled", "cache": f"StaticCache, layers {cache_layers}",
              "compile": f"torch.compile(mode={compile_mode!r}, fullgraph={fullgraph}, dynamic=False)"
              if compile_mode else "none (--no-compile)", "warmup_s": warmup}
    return rows, extras


def bench(args) -> dict:
    import transformers

    device = Device(args.device)
    dtype = getattr(torch, args.dtype)
    checkpoint = Path(args.checkpoint)
    config = read_config(checkpoint)
    text_config = config.get("text_config", config)
    vocab = int(text_config["vocab_size"])

    warm_up_loading(dtype, args.attn, device)
    device.sync()
    start = time.perf_counter()
    model, table, info = load_model(checkpoint, dtype, args.attn, device, args.higgs_load)
    device.sync()
    load_s = time.perf_counter() - start
    device.note_memory()
    params = {p.data_ptr(): p for p in model.parameters()}  # tied tensors once
    weight_bytes = sum(p.numel() * p.element_size() for p in params.values())
    if table is not None:
        weight_bytes += table.numel() * table.element_size()
    runner = Runner(model, table, info)
    log(f"loaded {checkpoint} ({info['load_method']}) in {load_s:.2f} s, {weight_bytes / 1e9:.3f} GB")

    prefill = []
    decode = []
    extras = {"mode": "eager", "cache": "DynamicCache"}
    if args.mode == "compiled":
        # no inference_mode: tensors made under it cannot enter a CUDA-graph-compiled region
        with torch.no_grad():
            decode, extras = decode_compiled(args, runner, device, vocab, weight_bytes)
    with torch.inference_mode():
        for length in args.prompt_len if args.mode == "eager" else []:
            log(f"prefill {length} tokens x {args.repeat}")
            ids = random_ids(length, vocab, 1234 + length, device)
            times = []
            for r in range(args.repeat + 1):
                device.sync()
                t0 = time.perf_counter()
                cache, _ = runner.step(ids, None)
                device.sync()
                if r > 0:  # r == 0 warms kernels, allocator and cuBLAS handles
                    times.append(time.perf_counter() - t0)
                device.note_memory()
                del cache
            t = median(times)
            prefill.append({"tokens": length, "seconds": t, "tokens_per_s": length / t})

        for context in (args.decode_context or args.prompt_len) if args.mode == "eager" else []:
            log(f"decode {args.new_tokens} tokens at context {context} x {args.repeat}")
            ids = random_ids(context, vocab, 99 + context, device)
            per_token = []
            for r in range(args.repeat + 1):
                cache, _ = runner.step(ids, None)
                nxt = int(ids[0, -1])
                device.sync()
                t0 = time.perf_counter()
                for _ in range(args.new_tokens):
                    step_ids = torch.tensor([[nxt]], dtype=torch.long, device=device.torch)
                    cache, _ = runner.step(step_ids, cache)
                    nxt = (nxt * 31 + 7) % vocab  # the token sequence Zoo feeds back
                device.sync()
                if r > 0:
                    per_token.append((time.perf_counter() - t0) / args.new_tokens)
                device.note_memory()
                del cache
            t = median(per_token)
            decode.append({"context": context, "new_tokens": args.new_tokens, "ms_per_token": 1e3 * t,
                           "tokens_per_s": 1.0 / t, "weight_gb_per_s": weight_bytes / t / 1e9})

    runtime = {"gpu": device.gpu_name(), "weights_gb": weight_bytes / 1e9,
               "torch": torch.__version__, "transformers": transformers.__version__,
               "attn_implementation": args.attn, "load_method": info["load_method"], **extras}
    if info.get("missing_keys"):
        runtime["missing_keys"] = info["missing_keys"]
    if device.cuda:
        runtime["peak_device_memory_gb"] = device.peak_used / 1e9
        runtime["peak_allocated_gb"] = torch.cuda.max_memory_allocated() / 1e9
        runtime["peak_reserved_gb"] = torch.cuda.max_memory_reserved() / 1e9
    return {
        "model": f"transformers {info['kind']} {checkpoint}" + (" (compiled)" if args.mode == "compiled" else ""),
        "plugin": "transformers",
        "device": args.device,
        "dtype": args.dtype,
        "weight_bytes": weight_bytes,
        "load": {"seconds": load_s, "gb_per_s": weight_bytes / load_s / 1e9},
        "prefill": prefill,
        "decode": decode,
        "runtime": runtime,
        "repeat": args.repeat,
    }


def timed(device: Device, fn, iters: int) -> float:
    """Seconds for `iters` calls of fn, on the device's own clock where there is one."""
    if device.cuda:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) / 1e3
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return time.perf_counter() - t0


def roofline(args) -> dict:
    device = Device(args.device)
    n = args.matmul_n
    gen = torch.Generator(device=device.torch).manual_seed(0)
    a = torch.randn(n, n, generator=gen, device=device.torch, dtype=torch.bfloat16)
    b = torch.randn(n, n, generator=gen, device=device.torch, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=device.torch, dtype=torch.bfloat16)
    mm = lambda: torch.matmul(a, b, out=c)  # noqa: E731
    timed(device, mm, args.matmul_iters)  # warm-up: cuBLAS handle, heuristics, clocks
    flops = 2.0 * n ** 3
    tflops = [flops * args.matmul_iters / timed(device, mm, args.matmul_iters) / 1e12 for _ in range(args.trials)]
    del a, b, c

    elems = int(args.copy_gb * 1e9) // 2
    src = torch.empty(elems, device=device.torch, dtype=torch.bfloat16)
    src.fill_(1.0)
    dst = torch.empty_like(src)
    cp = lambda: dst.copy_(src)  # noqa: E731
    timed(device, cp, 2)
    nbytes = src.numel() * src.element_size()
    per_copy = [timed(device, cp, args.copy_iters) / args.copy_iters for _ in range(args.trials)]
    best = min(per_copy)
    return {
        "device": device.gpu_name(),
        "torch": torch.__version__,
        "matmul": {"n": n, "dtype": "bfloat16", "iterations": args.matmul_iters, "trials": args.trials,
                   "tflops_best": max(tflops), "tflops_median": median(tflops)},
        "copy": {"bytes": nbytes, "iterations": args.copy_iters, "trials": args.trials,
                 "gb_per_s": 2 * nbytes / best / 1e9, "one_way_gb_per_s": nbytes / best / 1e9,
                 "gb_per_s_median": 2 * nbytes / median(per_copy) / 1e9},
        # the two numbers side_by_side.py divides by
        "matmul_tflops": max(tflops),
        "copy_gb_per_s": 2 * nbytes / best / 1e9,
    }


def print_bench(out: dict) -> None:
    print(f"model   {out['model']}\ndevice  {out['device']} ({out['dtype']})\nweights {out['weight_bytes'] / 1e9:.3f} GB")
    print(f"load    {out['load']['seconds']:.3f} s  ({out['load']['gb_per_s']:.2f} GB/s)\n")
    print(f"{'phase':<10} {'tokens':>10} {'tokens/s':>14} {'ms':>12}")
    for p in out["prefill"]:
        print(f"{'prefill':<10} {p['tokens']:>10} {p['tokens_per_s']:>14.1f} {1e3 * p['seconds']:>12.2f}")
    print(f"\n{'phase':<10} {'context':>10} {'tokens/s':>14} {'ms/token':>12} {'weights GB/s':>14}")
    for d in out["decode"]:
        print(f"{'decode':<10} {d['context']:>10} {d['tokens_per_s']:>14.1f} {d['ms_per_token']:>12.3f} "
              f"{d['weight_gb_per_s']:>14.1f}")
    print(f"\nruntime {json.dumps(out['runtime'])}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", nargs="?", help="HF checkpoint directory (config.json + safetensors)")
    parser.add_argument("--prompt-len", type=int_list, default=[128], help="prefill lengths, comma-separated")
    parser.add_argument("--decode-context", type=int_list, default=None,
                        help="contexts to decode at (default: the prompt lengths)")
    parser.add_argument("--new-tokens", type=int, default=32, help="decode steps timed per repeat")
    parser.add_argument("--repeat", type=int, default=3, help="timed repeats (median reported)")
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--attn", default="sdpa", help="attn_implementation (default sdpa)")
    parser.add_argument("--higgs-load", default="auto", choices=["auto", "by-hand"],
                        help="Higgs body: from_pretrained with key_mapping (auto, falls back to by-hand) or by hand")
    parser.add_argument("--mode", default="eager", choices=["eager", "compiled"],
                        help="eager: DynamicCache, prefill and decode (default); compiled: StaticCache + "
                             "torch.compile(mode='reduce-overhead') decode steps")
    parser.add_argument("--no-compile", action="store_true",
                        help="compiled mode without torch.compile (StaticCache path only; CPU smoke tests)")
    parser.add_argument("--json", action="store_true", help="print JSON (zoo bench --json keys)")
    parser.add_argument("--roofline", action="store_true", help="measure matmul peak and copy bandwidth instead")
    parser.add_argument("--matmul-n", type=int, default=8192, help="roofline: n of the n x n x n matmul")
    parser.add_argument("--matmul-iters", type=int, default=20, help="roofline: matmuls per trial")
    parser.add_argument("--copy-gb", type=float, default=4.0, help="roofline: size of the copied tensor in GB")
    parser.add_argument("--copy-iters", type=int, default=10, help="roofline: copies per trial")
    parser.add_argument("--trials", type=int, default=5, help="roofline: trials (best reported)")
    args = parser.parse_args(argv)
    if args.new_tokens < 1 or args.repeat < 1:
        parser.error("--new-tokens and --repeat must be at least 1")
    if not args.roofline and not args.checkpoint:
        parser.error("a checkpoint directory is needed (or --roofline)")

    # Library chatter (load reports, progress) goes to stderr so stdout holds only the result.
    with contextlib.redirect_stdout(sys.stderr):
        out = roofline(args) if args.roofline else bench(args)
    if args.roofline:
        if args.json:
            print(json.dumps(out, indent=2))
        else:
            print(f"device  {out['device']}\nmatmul  {out['matmul']['tflops_best']:.1f} TFLOP/s bf16 "
                  f"(n={args.matmul_n}, best of {args.trials})\ncopy    {out['copy']['gb_per_s']:.1f} GB/s "
                  f"read+write, {out['copy']['one_way_gb_per_s']:.1f} GB/s one way "
                  f"({out['copy']['bytes'] / 1e9:.2f} GB)")
        return 0
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print_bench(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
