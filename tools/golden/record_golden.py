#!/usr/bin/env python3
"""Records a golden trace (every DESIGN.md tap point) of any transformers causal LM.

    record_golden.py MODEL_DIR --request request.json --out golden.safetensors
                     [--dtype float32|bfloat16] [--device cpu|cuda] [--attn eager|sdpa]
                     [--points GLOB,...] [--threads N]

MODEL_DIR is a Hugging Face directory (config.json + safetensors) that
AutoModelForCausalLM.from_pretrained loads, of a model_type in NORM_LAYOUTS (Qwen3, Llama,
Mistral, Qwen2, Phi-3, Gemma 1/2/3, OLMo-2): where a block's norms sit decides which module
output is which Zoo stage, so a model_type the table does not know is refused (exit 2) rather than
labelled by guesswork. The request is
Zoo's request JSON ({"input_ids": [...]}). One prefill forward runs with forward hooks on the
standard module names; the result is written sequence-major, float32 (I64 input_ids), exactly as
`zoo trace` writes a trace and tools/fixtures writes the committed goldens:

    input_ids [T]; embed, final_norm [T,H]; logits [T,V]
    layer.L.{input_norm, o_proj, attn_residual, post_attn_norm, down_proj, output} [T,H]
    layer.L.{q_proj, q_norm, q_rope, attn} [T, heads*D]      (head-major within a row)
    layer.L.{k_proj, v_proj, k_norm, k_rope} [T, kv_heads*D]
    layer.L.{gate_proj, up_proj, act} [T,I]

How each value is captured (module names relative to the decoder, `model.`):
    embed           embed_tokens output; hidden_states[0] instead (with a note) where they differ
    input_norm      layers.L.input_layernorm output
    q/k/v_proj      layers.L.self_attn.{q,k,v}_proj output (Phi-3: qkv_proj output, split)
    q_norm, k_norm  layers.L.self_attn.{q,k}_norm output, only where the model has them (Qwen3);
                    Llama, Mistral and Qwen2 have none and their traces hold no q_norm/k_norm
    q_rope, k_rope  what the attention's module-level apply_rotary_pos_emb returns: the recorder
                    wraps that function in the attention class's Python module for the duration of
                    the forward, so RoPE scaling (llama3, linear, yarn, ...) is whatever the model
                    really applied. A model whose attention never calls that function gets them
                    recomputed from the rotary_emb cos/sin and the q/k that enter RoPE (q_norm
                    output, else q_proj); __metadata__ rope_capture says which
    attn            self_attn.o_proj input
    o_proj          self_attn.o_proj output
    attn_residual   post_attention_layernorm input (pre layout; sandwich: pre_feedforward_layernorm
                    input; post: the MLP's input)
    post_attn_norm  post_attention_layernorm output (pre layout only)
    post_attn_out_norm  sandwich and post layouts: post_attention_layernorm output (the attention
                    output normed before the residual add: not Zoo's pre-MLP post_attn_norm)
    pre_mlp_norm    sandwich: pre_feedforward_layernorm output
    post_mlp_norm   sandwich and post: post_feedforward_layernorm output
    gate/up_proj    mlp.{gate,up}_proj output (Phi-3: gate_up_proj output, halves)
    act             mlp.down_proj input (= act_fn(gate) * up, checked at layer 0)
    down_proj       mlp.down_proj output
    router_logits   mixture-of-experts layers (an mlp with a `gate` router and `experts`): the
                    router's first output [T, experts]; router_topk_weights [T, k] and
                    router_topk_ids [T, k] (I64) its second and third (probability order)
    moe_output      the mixture-of-experts mlp's output (in place of gate_proj .. down_proj)
    output          layers.L output (checked == hidden_states[L+1] for L < N-1)
    final_norm      norm output (checked == hidden_states[-1])
    logits          the model's logits (lm_head)

With tie_word_embeddings the head is embed_tokens whatever lm_head.weight the checkpoint also
holds (DESIGN.md); the recorder re-ties if transformers did not. A stage whose module a model
lacks is left out, and the recorder names what it left out on stderr and in __metadata__.
float32 goldens use eager attention and one CPU thread by default (bit-reproducible on a given
torch); bf16 goldens (the GPU host) default to sdpa, as tools/fixtures does.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import sys
from collections import OrderedDict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tools" / "fixtures"))

GENERATOR = "tools/golden/record_golden.py"

STAGES = (
    "input_norm", "q_proj", "k_proj", "v_proj", "q_norm", "k_norm", "q_rope", "k_rope",
    "attn", "o_proj", "post_attn_out_norm", "attn_residual", "post_attn_norm", "pre_mlp_norm",
    "gate_proj", "up_proj", "act", "down_proj", "router_logits", "router_topk_ids", "router_topk_weights",
    "moe_output", "post_mlp_norm", "output",
)
DENSE_MLP = {"gate_proj", "up_proj", "act", "down_proj"}
MOE_MLP = {"router_logits", "router_topk_ids", "router_topk_weights", "moe_output"}

# Where each model_type's block norms sit (docs/validation.md has the table per family):
#   pre       input_layernorm before attention, post_attention_layernorm before the MLP
#   sandwich  input_layernorm, post_attention_layernorm on the attention output,
#             pre_feedforward_layernorm before the MLP, post_feedforward_layernorm on its output
#   post      post_attention_layernorm and post_feedforward_layernorm on the sublayer outputs only
NORM_LAYOUTS = {
    "llama": "pre", "mistral": "pre", "qwen2": "pre", "qwen3": "pre", "phi3": "pre", "gemma": "pre",
    "gemma2": "sandwich", "gemma3_text": "sandwich", "olmo2": "post", "qwen3_moe": "pre",
    "qwen2_moe": "pre",
}
LAYOUT_STAGES = {  # the stages each layout has besides the ones every layout has
    "pre": {"input_norm", "attn_residual", "post_attn_norm"},
    "sandwich": {"input_norm", "post_attn_out_norm", "attn_residual", "pre_mlp_norm", "post_mlp_norm"},
    "post": {"post_attn_out_norm", "attn_residual", "post_mlp_norm"},
}
LAYOUT_FREE = set(STAGES) - set().union(*LAYOUT_STAGES.values())


class UsageError(Exception):
    """Bad input: exit status 2 with one line naming the file."""


def fail(msg: str, code: int) -> None:
    print(f"record_golden: {msg}", file=sys.stderr)
    raise SystemExit(code)


def read_request(path: Path) -> list[int]:
    try:
        req = json.loads(path.read_text())
    except OSError as e:
        raise UsageError(f"{path}: cannot read ({e.strerror})")
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: not valid JSON ({e})")
    if not isinstance(req, dict) or "input_ids" not in req:
        raise UsageError(f"{path}: the request needs an \"input_ids\" array")
    extra = set(req) - {"input_ids"}
    if extra:
        raise UsageError(f"{path}: only plain-LM requests (input_ids) are recorded here; "
                         f"unsupported keys {sorted(extra)}")
    ids = req["input_ids"]
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and not isinstance(i, bool)
                                                       and i >= 0 for i in ids):
        raise UsageError(f"{path}: \"input_ids\" must be a non-empty array of non-negative integers")
    return ids


def decoder_of(causal_lm):
    """The base model holding embed_tokens / layers / norm (causal_lm.model for the standard
    *ForCausalLM classes)."""
    for get in (lambda m: m.model, lambda m: m.get_decoder()):
        try:
            core = get(causal_lm)
        except Exception:  # noqa: BLE001 - try the next way
            continue
        if all(hasattr(core, a) for a in ("embed_tokens", "layers", "norm")):
            return core
    raise RuntimeError(f"{type(causal_lm).__name__}: no decoder with embed_tokens, layers and norm "
                       "(the standard module names this recorder hooks)")


class Recorder:
    """Forward hooks on the standard module names, plus a wrapper around the attention module's
    apply_rotary_pos_emb; `raw` maps tap names to the captured tensors (batch 1, any layout)."""

    def __init__(self, core, layout: str = "pre"):
        self.core = core
        self.layout = layout
        self.raw: dict[str, "torch.Tensor"] = {}
        self.rope_layout: dict[str, int] = {}
        self.handles = []
        self.absent: set[str] = set()
        self.current_layer: int | None = None
        self.patched: list[tuple[object, object]] = []
        self.rope_calls = 0
        self.moe_layers: set[int] = set()

    def __enter__(self):
        import torch.nn as nn

        for i, layer in enumerate(self.core.layers):
            p = f"layer.{i}."
            attn = getattr(layer, "self_attn", None)
            mlp = getattr(layer, "mlp", None)

            def sub(parent, name, stage):
                m = getattr(parent, name, None) if parent is not None else None
                if isinstance(m, nn.Module):
                    return m
                self.absent.add(stage)
                return None

            if self.layout != "post":
                self._out(sub(layer, "input_layernorm", "input_norm"), p + "input_norm")
            if attn is not None and isinstance(getattr(attn, "qkv_proj", None), nn.Module):
                self._out(attn.qkv_proj, p + "_qkv")  # fused q|k|v (Phi-3), split in record()
            else:
                for s in ("q_proj", "k_proj", "v_proj"):
                    self._out(sub(attn, s, s), p + s)
            for s in ("q_norm", "k_norm"):
                self._out(sub(attn, s, s), p + s)
            o = sub(attn, "o_proj", "attn")
            self._in(o, p + "attn")
            self._out(o, p + "o_proj")
            post = sub(layer, "post_attention_layernorm", "post_attn_norm")
            if self.layout == "pre":
                self._in(post, p + "attn_residual")
                self._out(post, p + "post_attn_norm")
            else:
                self._out(post, p + "post_attn_out_norm")
                self._out(sub(layer, "post_feedforward_layernorm", "post_mlp_norm"), p + "post_mlp_norm")
            if self.layout == "sandwich":
                pre = sub(layer, "pre_feedforward_layernorm", "pre_mlp_norm")
                self._in(pre, p + "attn_residual")
                self._out(pre, p + "pre_mlp_norm")
            elif self.layout == "post":
                self._in(mlp, p + "attn_residual")  # the residual stream the MLP reads
            if is_moe(mlp):
                self.moe_layers.add(i)
                self.handles.append(mlp.gate.register_forward_hook(lambda m, a, o, p=p: self._store_router(p, o)))
                self._out(mlp, p + "moe_output")
                self._out(layer, p + "output")
                if attn is not None:
                    self._layer_hooks(attn, i)
                continue
            if mlp is not None and isinstance(getattr(mlp, "gate_up_proj", None), nn.Module):
                self._out(mlp.gate_up_proj, p + "_gate_up")  # fused gate|up (Phi-3), halved in record()
            else:
                self._out(sub(mlp, "gate_proj", "gate_proj"), p + "gate_proj")
                self._out(sub(mlp, "up_proj", "up_proj"), p + "up_proj")
            act_fn = getattr(mlp, "act_fn", None)
            if isinstance(act_fn, nn.Module):
                self._out(act_fn, p + "_act_fn")  # only for the act cross-check
            down = sub(mlp, "down_proj", "down_proj")
            self._in(down, p + "act")
            self._out(down, p + "down_proj")
            self._out(layer, p + "output")
            if attn is not None:
                self._layer_hooks(attn, i)
        self._out(self.core.embed_tokens, "embed")
        self._out(self.core.norm, "final_norm")
        self._patch_rope()
        return self

    def _store_router(self, p: str, outputs) -> None:
        # A forward hook that returns something replaces the module's output: this returns None.
        for n, v in zip(("router_logits", "router_topk_weights", "router_topk_ids"), outputs):
            self._store(p + n, v)

    def _layer_hooks(self, attn, i: int) -> None:
        # Which layer is computing: set by a pre-hook on the attention, read by the RoPE wrapper.
        self.handles.append(attn.register_forward_pre_hook(lambda m, a, i=i: setattr(self, "current_layer", i)))
        self.handles.append(attn.register_forward_hook(lambda m, a, o: setattr(self, "current_layer", None)))

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        self.handles.clear()
        for module, fn in self.patched:
            module.apply_rotary_pos_emb = fn
        self.patched.clear()

    def _patch_rope(self) -> None:
        mods = set()
        for layer in self.core.layers:
            attn = getattr(layer, "self_attn", None)
            if attn is not None:
                mods.add(sys.modules[type(attn).__module__])
        for module in mods:
            fn = getattr(module, "apply_rotary_pos_emb", None)
            if not callable(fn):
                continue

            def wrapper(q, k, cos, sin, *args, _orig=fn, **kwargs):
                q_out, k_out = _orig(q, k, cos, sin, *args, **kwargs)
                L = self.current_layer
                if L is not None:
                    self.rope_calls += 1
                    unsqueeze_dim = kwargs.get("unsqueeze_dim", args[1] if len(args) > 1 else 1)
                    self._store(f"layer.{L}.q_rope", q_out)
                    self._store(f"layer.{L}.k_rope", k_out)
                    # unsqueeze_dim 1: [B, heads, T, D]; 2: [B, T, heads, D]
                    self.rope_layout[f"layer.{L}"] = int(unsqueeze_dim)
                return q_out, k_out

            module.apply_rotary_pos_emb = wrapper
            self.patched.append((module, fn))

    def _store(self, name, value):
        if isinstance(value, (tuple, list)):
            value = value[0]
        if name in self.raw:
            raise RuntimeError(f"tap point {name} fired twice in one forward (a shared module?)")
        self.raw[name] = value.detach()

    def _out(self, module, name):
        if module is not None:
            self.handles.append(module.register_forward_hook(lambda m, i, o: self._store(name, o)))

    def _in(self, module, name):
        if module is not None:
            self.handles.append(module.register_forward_pre_hook(lambda m, i: self._store(name, i[0])))


def is_moe(mlp) -> bool:
    """A mixture-of-experts MLP as transformers writes them: a `gate` router module and `experts`."""
    import torch.nn as nn
    return mlp is not None and isinstance(getattr(mlp, "gate", None), nn.Module) and \
        isinstance(getattr(mlp, "experts", None), nn.Module)


def flat_rows(t, T: int):
    """A router output [T, n] (or [1, T, n]) -> [T, n] on the CPU: float32, or int64 for ids."""
    import torch
    t = t.detach().cpu()
    if t.dim() == 3 and t.shape[0] == 1:
        t = t[0]
    if t.dim() != 2 or t.shape[0] != T:
        raise RuntimeError(f"unexpected router output shape {tuple(t.shape)} for T={T}")
    return (t.to(torch.int64) if not t.is_floating_point() else t.float()).contiguous()


def flat(t, T: int):
    """[1, T, ...] -> [T, prod(...)] float32 on the CPU."""
    t = t.detach().float().cpu()
    if t.dim() < 2 or t.shape[0] != 1 or t.shape[1] != T:
        raise RuntimeError(f"unexpected tap shape {tuple(t.shape)} for T={T}")
    return t.reshape(T, -1).contiguous()


def load_model(model_dir: Path, dtype, device: str, attn: str, notes: list[str]):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        AutoConfig.from_pretrained(str(model_dir))
    except Exception as e:  # noqa: BLE001 - transformers raises many kinds here
        raise UsageError(f"{model_dir / 'config.json'}: transformers cannot read it ({e})")
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype, attn_implementation=attn)
    model = model.to(device).eval()
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    core = decoder_of(model)
    head = model.get_output_embeddings()
    if getattr(cfg, "tie_word_embeddings", False) and head is not None and \
            head.weight.data_ptr() != core.embed_tokens.weight.data_ptr():
        # DESIGN.md: tie_word_embeddings wins over a stored lm_head.weight (some transformers
        # versions untie when the stored head differs).
        head.weight = core.embed_tokens.weight
        notes.append("re-tied lm_head to embed_tokens (tie_word_embeddings; the checkpoint's "
                     "lm_head.weight is ignored)")
    return model, core, cfg


def recompute_rope(core, raw: dict, L: int, T: int, cfg, device):
    """RoPE'd q/k from the model's own rotary_emb cos/sin, for attentions that do not call their
    module's apply_rotary_pos_emb. Uses rotate-half, the layout every model this recorder knows
    uses."""
    import torch

    p = f"layer.{L}."
    heads = cfg.num_attention_heads
    kv = getattr(cfg, "num_key_value_heads", None) or heads
    D = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    q = raw.get(p + "q_norm", raw[p + "q_proj"]).reshape(1, T, heads, D)
    k = raw.get(p + "k_norm", raw[p + "k_proj"]).reshape(1, T, kv, D)
    pos = torch.arange(T, device=device)[None]
    cos, sin = core.rotary_emb(q, pos)  # [1, T, rot]
    rot = cos.shape[-1]
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]

    def apply(x):
        xr, xp = x[..., :rot], x[..., rot:]
        h = rot // 2
        rh = torch.cat((-xr[..., h:], xr[..., :h]), dim=-1)
        return torch.cat((xr * cos + rh * sin, xp), dim=-1)

    return apply(q), apply(k)


def record(model, core, cfg, ids: list[int], notes: list[str]) -> "OrderedDict":
    import torch

    device = next(model.parameters()).device
    T = len(ids)
    vocab = getattr(cfg, "vocab_size", None)
    if vocab is not None and max(ids) >= vocab:
        raise UsageError(f"request: input id {max(ids)} is outside the vocabulary ({vocab})")
    n_layers = len(core.layers)
    model_type = getattr(cfg, "model_type", "?")
    if model_type not in NORM_LAYOUTS:
        raise UsageError(f"model_type {model_type}: the recorder does not know where its block norms sit, so it "
                         f"cannot say which module output is which stage (known: {', '.join(sorted(NORM_LAYOUTS))})")
    layout = NORM_LAYOUTS[model_type]
    with torch.no_grad(), Recorder(core, layout) as rec:
        out = model(input_ids=torch.tensor([ids], device=device), output_hidden_states=True,
                    use_cache=False)
    raw = rec.raw
    heads = cfg.num_attention_heads
    kv = getattr(cfg, "num_key_value_heads", None) or heads
    D = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    for L in range(n_layers):
        p = f"layer.{L}."
        if p + "_qkv" in raw:
            q, k, v = raw.pop(p + "_qkv").split([heads * D, kv * D, kv * D], dim=-1)
            raw[p + "q_proj"], raw[p + "k_proj"], raw[p + "v_proj"] = q, k, v
        if p + "_gate_up" in raw:
            raw[p + "gate_proj"], raw[p + "up_proj"] = raw.pop(p + "_gate_up").chunk(2, dim=-1)
        # Gemma 3 norms q and k after moving heads before tokens ([1, heads, T, D]); Qwen3 before.
        for s, n in (("q_norm", heads), ("k_norm", kv)):
            x = raw.get(p + s)
            if x is not None and x.dim() == 4 and x.shape[1] == n and x.shape[2] == T and n != T:
                raw[p + s] = x.transpose(1, 2)
    rope_capture = "patched apply_rotary_pos_emb"
    for L in range(n_layers):
        p = f"layer.{L}."
        if p + "q_rope" in raw:
            if rec.rope_layout[f"layer.{L}"] == 1:  # [B, heads, T, D] -> [B, T, heads, D]
                raw[p + "q_rope"] = raw[p + "q_rope"].transpose(1, 2)
                raw[p + "k_rope"] = raw[p + "k_rope"].transpose(1, 2)
        elif hasattr(core, "rotary_emb") and p + "q_proj" in raw and p + "k_proj" in raw:
            raw[p + "q_rope"], raw[p + "k_rope"] = recompute_rope(core, raw, L, T, cfg, device)
            rope_capture = "recomputed from rotary_emb (the attention did not call apply_rotary_pos_emb)"
        else:
            rec.absent.update({"q_rope", "k_rope"})
    if rope_capture.startswith("recomputed"):
        notes.append(f"q_rope/k_rope {rope_capture}")

    trace: "OrderedDict[str, torch.Tensor]" = OrderedDict()
    trace["input_ids"] = torch.tensor(ids, dtype=torch.int64)
    hs = out.hidden_states
    trace["embed"] = flat(raw["embed"], T)
    hs0 = flat(hs[0], T)
    if not torch.equal(hs0, trace["embed"]):
        # A model that scales or otherwise transforms its embedding rows before layer 0: the
        # DESIGN `embed` is what layer 0 receives.
        trace["embed"] = hs0
        notes.append("embed taken from hidden_states[0] (differs from the embed_tokens output)")
    # Absent: a stage this layout has whose module the model lacks (q/k norm where there is none);
    # the stages of other layouts are not this model's and are not named.
    own = LAYOUT_FREE | LAYOUT_STAGES[layout]
    absent = set(rec.absent) & own
    for L in range(n_layers):
        # A layer's MLP stages are the dense or the mixture-of-experts ones, never both.
        own_here = own - (DENSE_MLP if L in rec.moe_layers else MOE_MLP)
        for s in STAGES:
            name = f"layer.{L}.{s}"
            if name in raw:
                trace[name] = flat_rows(raw[name], T) if s in MOE_MLP - {"moe_output"} else flat(raw[name], T)
            elif s in own_here:
                absent.add(s)
    trace["final_norm"] = flat(raw["final_norm"], T)
    trace["logits"] = flat(out.logits, T)

    # transformers' own bookkeeping must agree with what the hooks saw.
    def same(a, b, what):
        if not torch.equal(flat(a, T), b):
            raise RuntimeError(f"hook/hidden_states mismatch at {what}")
    for L in range(n_layers - 1):
        same(hs[L + 1], trace[f"layer.{L}.output"], f"layer.{L}.output == hidden_states[{L + 1}]")
    same(hs[-1], trace["final_norm"], "final_norm == hidden_states[-1]")
    if "layer.0._act_fn" in raw and "layer.0.act" in trace:
        act = flat(raw["layer.0._act_fn"] * raw["layer.0.up_proj"], T)
        if not torch.equal(act, trace["layer.0.act"]):
            raise RuntimeError("layer.0.act != act_fn(gate_proj) * up_proj (not a gated MLP?)")
    return trace, sorted(absent, key=STAGES.index), rope_capture


def select(trace: "OrderedDict", points: str | None) -> "OrderedDict":
    if not points:
        return trace
    globs = [g.strip() for g in points.split(",") if g.strip()]
    # fnmatch's * also matches dots, as zoo's --points globs do; no [] classes there.
    return OrderedDict((k, v) for k, v in trace.items()
                       if any(fnmatch.fnmatchcase(k, g.replace("[", "[[]")) for g in globs))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", type=Path, help="Hugging Face model directory")
    ap.add_argument("--request", type=Path, required=True, help="request JSON ({\"input_ids\": [...]})")
    ap.add_argument("--out", type=Path, required=True, help="golden safetensors to write")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                    help="compute dtype (the trace is float32 either way)")
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    ap.add_argument("--attn", default=None,
                    help="attn_implementation (default: eager for float32, sdpa for bfloat16)")
    ap.add_argument("--points", default=None, help="comma-separated globs to keep (default: all)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (1 keeps float32 goldens reproducible bit for bit)")
    args = ap.parse_args(argv)

    try:
        import torch  # noqa: F401 - fail here, with the fix, rather than deep inside
        import transformers  # noqa: F401
    except ModuleNotFoundError as e:
        fail(f"{e.name} is not installed: pip install -r {REPO_ROOT / 'tools' / 'requirements.txt'}", 2)
    try:
        ids = read_request(args.request)
        if not (args.model_dir / "config.json").is_file():
            raise UsageError(f"{args.model_dir}: no config.json (want a Hugging Face model directory)")
        import torch
        import goldens as G

        torch.set_num_threads(max(1, args.threads))
        # TF32 would silently turn float32 goldens on the GPU into 10-bit-mantissa products.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        if args.device.startswith("cuda") and not torch.cuda.is_available():
            raise UsageError("--device cuda: torch sees no CUDA device")
        attn = args.attn or ("eager" if args.dtype == "float32" else "sdpa")
        notes: list[str] = []
        with contextlib.redirect_stdout(sys.stderr):
            model, core, cfg = load_model(args.model_dir, G.TORCH_DTYPES[args.dtype], args.device, attn, notes)
            trace, absent, rope_capture = record(model, core, cfg, ids, notes)
        trace = select(trace, args.points)
        if not trace:
            raise UsageError(f"--points '{args.points}' selects nothing")
        meta = G.metadata(GENERATOR, args.dtype, args.device, model_dir=args.model_dir.resolve().name,
                          model_type=getattr(cfg, "model_type", "?"), attn_implementation=attn,
                          rope_capture=rope_capture, stages_absent=",".join(absent) or "none")
        G.save_tensors(args.out, trace, meta)
    except UsageError as e:
        fail(str(e), 2)
    for n in notes:
        print(f"record_golden: note: {n}", file=sys.stderr)
    print(f"record_golden: {args.out}: {len(trace)} tensors, T={len(ids)}, {len(core.layers)} layers, "
          f"model_type {getattr(cfg, 'model_type', '?')}, {args.dtype} on {args.device} ({attn}); "
          f"stages absent: {', '.join(absent) or 'none'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
