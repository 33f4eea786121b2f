#!/usr/bin/env python3
"""Higgs Audio v3 text-to-speech loop built from transformers parts: the baseline for issue 11.

    bench_higgs_transformers.py [--shape configs/shapes/higgs-v3-4b.json] [--device cuda]
                                [--text-tokens 50] [--seconds 10] [--repeat 3] [--json]
    bench_higgs_transformers.py --tiny --device cpu --frames 12 --no-compile     # smoke test

Random weights (nothing is downloaded). The pieces, as a transformers user would assemble them:
  - body: Qwen3Model at the shape's text_config (bf16 on cuda; float32 on cpu), a StaticCache
    sized prompt + audio rows, the text prompt prefilled eagerly;
  - per audio row (one LM step): the fed-back row embedded as the sum of its K code embeddings
    (rows of the tied audio table E [K*V, H], codebook c at offset c*V), the body over that one
    position, the tied linear head F.linear(h, E) -> [K, V], greedy codes; this step runs under
    torch.compile(mode="reduce-overhead", fullgraph=True) (CUDA graphs) unless --no-compile; the
    K codes go to the host every row, where the delay pattern is applied (codebook c is BOC for
    its first c rows and EOC for its last K-1-c rows), as a streaming sampler would;
  - codec: HiggsAudioV2TokenizerModel.decode in float32 (TF32 off) on the reverse-delayed codes
    [1, K, frames] (codes >= codebook_size mapped to 0), random weights with random codebooks and
    Snake alphas (the library's init zeroes codebooks and sets alphas to 1).

R = frames + K - 1 LM rows make `frames` codec frames; row 0 comes from the prefill's last
position, rows 1..R-1 are decode steps. Reported (median of --repeat after an untimed warm-up
that compiles and records the graphs):
  - ms_per_frame: decode-loop time / (R - 1) decode steps (embedding sum + body + head + argmax +
    codes to the host);
  - prefill_ms: the text prompt into the StaticCache, eager;
  - codec_x_realtime: audio seconds / codec decode seconds;
  - end_to_end_x_realtime: audio seconds / (prefill + decode loop + codec decode).
Codec sizes: the real Higgs audio tokenizer's (24 kHz, hop 960 = 25 frames/s, 8 x 1024 codes of
dim 64, DAC decoder 1024 wide, ratios 8,5,4,2,3, HuBERT semantic branch at its defaults) unless
--tiny, which shrinks everything for a CPU smoke test (its hop is 6 samples: pass --frames).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SHAPE = ROOT / "configs" / "shapes" / "higgs-v3-4b.json"

TINY_TEXT = dict(vocab_size=320, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, max_position_embeddings=4096,
                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
TINY_K, TINY_CODES = 4, 16


def log(msg: str) -> None:
    print(f"bench_higgs_transformers: {msg}", file=sys.stderr, flush=True)


def codec_config(tiny: bool, codebooks: int):
    from transformers import HiggsAudioV2TokenizerConfig

    if tiny:
        # hop 2*3 = 6 (odd and even strides), frame rate ceil(24000/6) = 4000, 4-bit codes:
        # num_quantizers = int(1000 * tb // (4000 * 4)) = codebooks for tb = 16 * codebooks.
        cfg = HiggsAudioV2TokenizerConfig(
            target_bandwidths=[16 * codebooks], codebook_size=TINY_CODES, codebook_dim=4,
            acoustic_model_config={"model_type": "dac", "hidden_size": 16, "decoder_hidden_size": 64,
                                   "encoder_hidden_size": 8, "downsampling_ratios": [2, 3],
                                   "upsampling_ratios": [2, 3]},
            semantic_model_config={"model_type": "hubert", "hidden_size": 16, "num_hidden_layers": 2,
                                   "num_attention_heads": 2, "intermediate_size": 32,
                                   "conv_dim": [16] * 7, "num_conv_pos_embeddings": 16})
    else:
        # The released tokenizer's config (the class defaults are a 75 Hz, 5-quantizer variant).
        cfg = HiggsAudioV2TokenizerConfig(
            target_bandwidths=[0.5, 1, 1.5, 2], codebook_size=1024, codebook_dim=64,
            acoustic_model_config={"model_type": "dac", "hidden_size": 256, "decoder_hidden_size": 1024,
                                   "encoder_hidden_size": 64, "downsampling_ratios": [8, 5, 4, 2, 3],
                                   "upsampling_ratios": [8, 5, 4, 2, 3]})
    if cfg.num_quantizers != codebooks:
        raise SystemExit(f"bench_higgs_transformers: codec has {cfg.num_quantizers} quantizers, the LM "
                         f"{codebooks} codebooks")
    return cfg


def build_codec(tiny: bool, codebooks: int, device: torch.device, seed: int):
    from transformers import HiggsAudioV2TokenizerModel

    cfg = codec_config(tiny, codebooks)
    torch.manual_seed(seed)
    with torch.device(device):  # initialize on the device: the HuBERT branch alone is ~95M parameters
        codec = HiggsAudioV2TokenizerModel(cfg).eval()
    with torch.no_grad():
        for name, buf in codec.named_buffers():
            if name.endswith("codebook.embed"):
                buf.copy_(torch.randn_like(buf))
        for name, p in codec.named_parameters():
            if name.endswith("alpha"):  # Snake
                p.copy_(1 + 0.1 * torch.randn_like(p))
    return codec.to(device=device, dtype=torch.float32), cfg


def text_config(args) -> tuple[dict, int, int]:
    """(Qwen3 text_config kwargs, K, V) from the shape file or the tiny preset."""
    if args.tiny:
        return dict(TINY_TEXT), TINY_K, TINY_CODES + 2
    try:
        shape = json.loads(Path(args.shape).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"bench_higgs_transformers: {args.shape}: cannot read ({e})")
    text = {k: v for k, v in shape["text_config"].items() if k not in ("model_type", "architectures")}
    if text.get("rope_theta", 0) is None:
        text.pop("rope_theta")  # the value is under rope_parameters
    audio = shape["audio_encoder_config"]
    return text, int(audio["num_codebooks"]), int(audio["vocab_size"])


class Loop:
    def __init__(self, args, device: torch.device, dtype: torch.dtype):
        from transformers import Qwen3Config, Qwen3Model, StaticCache

        text, self.K, self.V = text_config(args)
        self.codes = self.V - 2  # BOC = codes, EOC = codes + 1 (1024, 1025 in the real model)
        self.boc, self.eoc = self.codes, self.codes + 1
        # The shape files carry their own tie/bos/eos keys; this loop sets them itself.
        text = {k: v for k, v in text.items()
                if k not in ("tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id")}
        cfg = Qwen3Config(**text, tie_word_embeddings=True, bos_token_id=None, eos_token_id=None, pad_token_id=None)
        cfg._attn_implementation = args.attn
        self.device, self.dtype = device, dtype
        torch.manual_seed(args.seed)
        old = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            with torch.device(device):
                self.body = Qwen3Model(cfg).eval()
                # the tied audio table: input embedding rows and head
                self.table = (torch.randn(self.K * self.V, cfg.hidden_size) * 0.02).to(dtype)
        finally:
            torch.set_default_dtype(old)
        self.offsets = (torch.arange(self.K, device=device) * self.V)
        self.weight_bytes = sum(p.numel() * p.element_size() for p in self.body.parameters()) + \
            self.table.numel() * self.table.element_size()
        self.frames = args.frames
        self.rows = self.frames + self.K - 1
        self.text_tokens = args.text_tokens
        self.cache = StaticCache(config=cfg, max_cache_len=self.text_tokens + self.rows)
        self.compile_mode = None if args.no_compile else "reduce-overhead"
        self.step_fn = self._step
        if self.compile_mode:
            self.step_fn = torch.compile(self._step, mode=self.compile_mode, fullgraph=True, dynamic=False)
        gen = torch.Generator().manual_seed(args.seed + 1)
        self.prompt = torch.randint(0, cfg.vocab_size, (1, self.text_tokens), generator=gen).to(device)

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = F.linear(hidden, self.table).view(self.K, self.V)
        return logits.float().argmax(-1)

    def _step(self, row: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        emb = self.table[row + self.offsets].float().sum(0).to(self.dtype)  # sum of K code embeddings
        out = self.body(inputs_embeds=emb[None, None], position_ids=position, past_key_values=self.cache,
                        use_cache=True)
        return self._head(out.last_hidden_state[0, -1])

    def delay(self, codes: list[int], r: int) -> list[int]:
        """The delay pattern at row r: codebook c is BOC before row c, EOC after row frames-1+c."""
        return [self.boc if r < c else self.eoc if r > self.frames - 1 + c else codes[c] for c in range(self.K)]

    def run(self, sync) -> tuple[float, float, torch.Tensor]:
        """(prefill s, decode-loop s, delayed rows [R, K] on the host)."""
        self.cache.reset()
        sync()
        t0 = time.perf_counter()
        positions = torch.arange(self.text_tokens, device=self.device)[None]
        out = self.body(input_ids=self.prompt, position_ids=positions, past_key_values=self.cache, use_cache=True)
        row = self.delay(self._head(out.last_hidden_state[0, -1]).tolist(), 0)
        sync()
        t1 = time.perf_counter()
        rows = [row]
        for r in range(1, self.rows):
            ids = torch.tensor(row, dtype=torch.long, device=self.device)
            pos = torch.tensor([[self.text_tokens + r - 1]], dtype=torch.long, device=self.device)
            row = self.delay(self.step_fn(ids, pos).tolist(), r)  # .tolist(): codes to the host
            rows.append(row)
        sync()
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, torch.tensor(rows, dtype=torch.long)

    def reverse_delay(self, rows: torch.Tensor) -> torch.Tensor:
        """[R, K] delayed rows -> [1, K, frames] codec codes; BOC/EOC (>= codebook size) -> 0."""
        codes = torch.stack([rows[c:c + self.frames, c] for c in range(self.K)])
        codes = torch.where(codes >= self.codes, torch.zeros_like(codes), codes)
        return codes[None]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default=str(DEFAULT_SHAPE), help="Higgs config.json (text_config + audio_encoder_config)")
    ap.add_argument("--tiny", action="store_true", help="tiny body and codec (CPU smoke test)")
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    ap.add_argument("--dtype", default=None, choices=["bfloat16", "float32"],
                    help="body dtype (default bfloat16 on cuda, float32 on cpu); the codec is float32")
    ap.add_argument("--attn", default="sdpa", help="attn_implementation of the body (default sdpa)")
    ap.add_argument("--text-tokens", type=int, default=50, help="prompt length (random text ids)")
    ap.add_argument("--seconds", type=float, default=10.0, help="audio to generate, in seconds")
    ap.add_argument("--frames", type=int, default=None, help="codec frames (default: seconds x frame rate)")
    ap.add_argument("--repeat", type=int, default=3, help="timed repeats (median reported)")
    ap.add_argument("--no-compile", action="store_true", help="run the decode step without torch.compile")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.repeat < 1 or args.text_tokens < 1:
        ap.error("--repeat and --text-tokens must be at least 1")

    import transformers

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("bench_higgs_transformers: --device cuda, but torch sees no CUDA device")
    if cuda and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    dtype = getattr(torch, args.dtype or ("bfloat16" if cuda else "float32"))
    # float32 codec activations, as issue 11 asks of the reference (TF32 drifts by ~2e-3 here)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if not args.no_compile:
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)

    with contextlib.redirect_stdout(sys.stderr):
        _, K, _ = text_config(args)
        codec, ccfg = build_codec(args.tiny, K, device, args.seed + 2)
        sample_rate, hop = ccfg.sample_rate, ccfg.hop_length
        if args.frames is None:
            args.frames = max(1, round(args.seconds * sample_rate / hop))
        loop = Loop(args, device, dtype)
        audio_s = args.frames * hop / sample_rate
        log(f"body {loop.weight_bytes / 1e9:.2f} GB {dtype} + codec on {device}; {args.text_tokens} text tokens, "
            f"{args.frames} frames ({audio_s:.2f} s of audio), {loop.rows} LM rows; "
            f"compile: {loop.compile_mode or 'off'}")

        results = []
        with torch.no_grad():
            for r in range(args.repeat + 1):
                prefill_s, loop_s, rows = loop.run(sync)
                codes = loop.reverse_delay(rows).to(device)
                sync()
                t0 = time.perf_counter()
                wav = codec.decode(codes, return_dict=False)
                if isinstance(wav, (tuple, list)):
                    wav = wav[0]
                wav.cpu()
                codec_s = time.perf_counter() - t0
                if wav.shape[-1] != args.frames * hop:
                    raise RuntimeError(f"codec gave {wav.shape[-1]} samples for {args.frames} frames x {hop}")
                label = "warm-up (compiles)" if r == 0 else f"repeat {r}"
                log(f"{label}: prefill {1e3 * prefill_s:.1f} ms, loop {loop_s:.3f} s "
                    f"({1e3 * loop_s / max(1, loop.rows - 1):.2f} ms/frame), codec {1e3 * codec_s:.1f} ms")
                if r == 0:
                    warmup = {"prefill_s": prefill_s, "loop_s": loop_s, "codec_s": codec_s}
                else:
                    results.append((prefill_s, loop_s, codec_s))

    med = lambda i: statistics.median(x[i] for x in results)  # noqa: E731
    prefill_s, loop_s, codec_s = med(0), med(1), med(2)
    e2e = statistics.median(sum(x) for x in results)
    steps = max(1, loop.rows - 1)
    out = {
        "what": "Higgs TTS loop from transformers parts (Qwen3Model + StaticCache, tied linear head, "
                "HiggsAudioV2TokenizerModel.decode float32)",
        "shape": "tiny" if args.tiny else str(args.shape),
        "device": str(device), "dtype": str(dtype).replace("torch.", ""),
        "codebooks": loop.K, "codes": loop.V, "text_tokens": args.text_tokens, "frames": args.frames,
        "lm_rows": loop.rows, "decode_steps": steps, "audio_seconds": audio_s,
        "sample_rate": sample_rate, "hop_length": hop, "weight_bytes": loop.weight_bytes,
        "prefill_ms": 1e3 * prefill_s,
        "ms_per_frame": 1e3 * loop_s / steps,
        "decode_loop_s": loop_s,
        "codec_s": codec_s, "codec_x_realtime": audio_s / codec_s,
        "end_to_end_s": e2e, "end_to_end_x_realtime": audio_s / e2e,
        "repeat": args.repeat, "warmup": warmup,
        "runtime": {"torch": torch.__version__, "transformers": transformers.__version__,
                    "gpu": torch.cuda.get_device_name(device) if cuda else "cpu",
                    "compile": f"torch.compile(mode={loop.compile_mode!r}, fullgraph=True, dynamic=False)"
                    if loop.compile_mode else "none (--no-compile)",
                    "attn_implementation": args.attn, "tf32": False},
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{out['what']}\n{out['device']} {out['dtype']}; {out['text_tokens']} text tokens, "
              f"{out['frames']} frames = {audio_s:.2f} s of audio ({out['lm_rows']} LM rows)\n"
              f"prefill      {out['prefill_ms']:.1f} ms\n"
              f"decode       {out['ms_per_frame']:.2f} ms/frame ({loop_s:.3f} s)\n"
              f"codec        {1e3 * codec_s:.1f} ms = {out['codec_x_realtime']:.0f}x real time\n"
              f"end to end   {e2e:.3f} s = {out['end_to_end_x_realtime']:.2f}x real time\n"
              f"runtime      {json.dumps(out['runtime'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
