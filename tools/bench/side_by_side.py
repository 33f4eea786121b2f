#!/usr/bin/env python3
"""Markdown tables comparing `zoo bench --json` with bench_transformers.py --json, per model shape,
against the measured roofline (bench_transformers.py --roofline --json).

    side_by_side.py --results DIR [--shapes qwen3-0.6b qwen3-8b] [--config-dir configs/shapes]
                    [--roofline DIR/roofline.json] [--out DIR/performance.md] [--write-bundle results.json]
    side_by_side.py --bundle results.json [--out performance.md]

For each shape S it reads DIR/zoo-S.json, DIR/hf-S.json, DIR/hfc-S.json (optional: transformers
compiled, bench_transformers.py --mode compiled) and the shape's config.json
(--config-dir/S.json), or all of them from one bundle that --write-bundle made; a missing or
unreadable file leaves its cells as "—", so a partial run still gives a table. Where a shape has
a compiled result, its table gets two more columns: transformers compiled (decode only, with its
share of the copy bandwidth) and Zoo's ratio against it. Ratios are "how many times faster Zoo is" (> 1: Zoo faster, or smaller for
memory).

Roofline columns:
  - prefill: achieved TFLOP/s = FLOPs / seconds, with FLOPs = 2 * T * (matmul parameters per
    token) + 4 * layers * T^2/2 * heads * head_dim (causal attention: QK^T and PV) + 2 * (head
    parameters) once, since both sides compute logits of the last position only; shown with its
    share of the measured bf16 matmul peak.
  - decode: weight bytes / step time, shown with its share of the measured copy bandwidth
    (read + write bytes per second, the HBM traffic a copy makes).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

DASH = "—"


def load_json(path: Path, notes: list[str]) -> dict | None:
    """The JSON object in a file, or None with a note. Tolerates text before the object (a tool
    that printed something to stdout ahead of its result)."""
    if not path.exists():
        failed = path.with_name(path.name + ".failed")
        notes.append(f"`{path.name}` is missing" + (" (its step failed: see bench.log)" if failed.exists() else ""))
        return None
    text = path.read_text(errors="replace")
    for start in [0] + [i for i, c in enumerate(text) if c == "{" and (i == 0 or text[i - 1] == "\n")]:
        try:
            value = json.loads(text[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    notes.append(f"`{path.name}` holds no JSON object" + (" (empty)" if not text.strip() else ""))
    return None


class Shape:
    """Sizes from an HF config.json (Qwen3, or Higgs Audio v3 with its Qwen3 text_config)."""

    def __init__(self, config: dict):
        text = config.get("text_config") or config
        self.hidden = int(text["hidden_size"])
        self.inter = int(text["intermediate_size"])
        self.layers = int(text["num_hidden_layers"])
        self.heads = int(text["num_attention_heads"])
        self.kv_heads = int(text.get("num_key_value_heads") or self.heads)
        self.head_dim = int(text.get("head_dim") or self.hidden // self.heads)
        self.vocab = int(text["vocab_size"])
        audio = config.get("audio_encoder_config")
        self.is_higgs = bool(audio)
        self.tied = self.is_higgs or bool(text.get("tie_word_embeddings", True))
        if audio:  # Higgs: the head is the audio table, K codebooks x V codes
            self.head_rows = int(audio["num_codebooks"]) * int(audio["vocab_size"])
        else:
            self.head_rows = self.vocab

    @property
    def matmul_params_per_layer(self) -> int:
        h, d = self.hidden, self.head_dim
        attn = h * self.heads * d + 2 * h * self.kv_heads * d + self.heads * d * h  # q, k, v, o
        return attn + 3 * h * self.inter  # gate, up, down

    @property
    def matmul_params(self) -> int:
        return self.layers * self.matmul_params_per_layer

    def checkpoint_params(self) -> int:
        """Every stored parameter: embeddings (and an untied head), layers with their norms, the final
        norm, and a Higgs audio table; Higgs ties its text head."""
        h, d = self.hidden, self.head_dim
        per_layer = self.matmul_params_per_layer + 2 * h + 2 * d  # + input/post norms, q/k norms
        embeddings = self.vocab * h * (1 if self.tied else 2)
        audio = self.head_rows * h if self.is_higgs else 0
        return embeddings + self.layers * per_layer + h + audio

    def prefill_flops(self, tokens: int) -> float:
        t = float(tokens)
        linear = 2.0 * t * self.matmul_params
        attention = 4.0 * self.layers * (t * t / 2.0) * self.heads * self.head_dim
        head = 2.0 * self.head_rows * self.hidden
        return linear + attention + head


def fmt_num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return DASH
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def ratio(better_if_larger: bool, zoo: float | None, hf: float | None) -> str:
    if zoo is None or hf is None or zoo <= 0 or hf <= 0:
        return DASH
    return f"{(zoo / hf) if better_if_larger else (hf / zoo):.2f}x"


def pct(value: float | None, peak: float | None) -> str:
    return DASH if value is None or not peak else f"{100.0 * value / peak:.0f}%"


def by_key(rows: list, key: str) -> dict:
    return {r[key]: r for r in rows or [] if isinstance(r, dict) and key in r}


def get(d: dict | None, *path):
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def peak_memory(result: dict | None) -> float | None:
    runtime = get(result, "runtime") or {}
    for key in ("peak_device_memory_gb", "peak_allocated_gb"):
        if isinstance(runtime.get(key), (int, float)):
            return float(runtime[key])
    return None


def shape_table(name: str, zoo: dict | None, hf: dict | None, shape: Shape | None, peak_tflops: float | None,
                copy_gbs: float | None, hfc: dict | None = None, with_compiled: bool = False) -> list[str]:
    """with_compiled adds the columns "transformers compiled" and "ratio vs compiled" (hfc: the
    result of bench_transformers.py --mode compiled, or None when that step failed)."""
    lines = [f"### {name}", ""]
    facts = []
    for label, result in (("zoo", zoo), ("transformers", hf)):
        if result and "weight_bytes" in result:
            facts.append(f"{label} weights {result['weight_bytes'] / 1e9:.2f} GB")
    if shape:
        facts.append(f"{shape.matmul_params / 1e9:.3f} B matmul parameters per token, "
                     f"{shape.layers} layers, {shape.heads}/{shape.kv_heads} heads x {shape.head_dim}")
    if get(zoo, "model"):
        facts.append(f"zoo model: {zoo['model']}")
    if facts:
        lines += ["; ".join(facts) + ".", ""]

    lines += ["| phase | zoo | transformers | ratio | zoo roofline | transformers roofline |"
              + (" transformers compiled | ratio vs compiled |" if with_compiled else ""),
              "|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if with_compiled else "")]
    no_compiled = f" {DASH} | {DASH} |" if with_compiled else ""

    def load_cell(r):
        s, g = get(r, "load", "seconds"), get(r, "load", "gb_per_s")
        return DASH if s is None else f"{s:.2f} s ({g:.2f} GB/s)" if g is not None else f"{s:.2f} s"

    lines.append(f"| load | {load_cell(zoo)} | {load_cell(hf)} | "
                 f"{ratio(False, get(zoo, 'load', 'seconds'), get(hf, 'load', 'seconds'))} | | |"
                 + (f" {load_cell(hfc)} | {ratio(False, get(zoo, 'load', 'seconds'), get(hfc, 'load', 'seconds'))} |"
                    if with_compiled else ""))

    zp, hp = by_key(get(zoo, "prefill"), "tokens"), by_key(get(hf, "prefill"), "tokens")
    for tokens in sorted(set(zp) | set(hp)):
        cells = []
        tps = []
        for r in (zp.get(tokens), hp.get(tokens)):
            v = get(r, "tokens_per_s")
            tps.append(v)
            cells.append(DASH if v is None else f"{fmt_num(v)} tok/s")
        roof = []
        for r in (zp.get(tokens), hp.get(tokens)):
            seconds = get(r, "seconds")
            if shape is None or not seconds:
                roof.append(DASH)
                continue
            achieved = shape.prefill_flops(tokens) / seconds / 1e12
            roof.append(f"{fmt_num(achieved)} TFLOP/s ({pct(achieved, peak_tflops)})")
        # compiled: transformers' generate() runs the prefill eagerly, so there is no compiled prefill
        lines.append(f"| prefill {tokens} | {cells[0]} | {cells[1]} | {ratio(True, *tps)} | {roof[0]} | {roof[1]} |"
                     + no_compiled)

    zd, hd = by_key(get(zoo, "decode"), "context"), by_key(get(hf, "decode"), "context")
    cd = by_key(get(hfc, "decode"), "context")
    for context in sorted(set(zd) | set(hd) | set(cd)):
        ms, cells, roof = [], [], []
        for r in (zd.get(context), hd.get(context)):
            v = get(r, "ms_per_token")
            ms.append(v)
            cells.append(DASH if v is None else f"{v:.2f} ms/tok ({fmt_num(get(r, 'tokens_per_s'))} tok/s)")
            g = get(r, "weight_gb_per_s")
            roof.append(DASH if g is None else f"{fmt_num(g, 0)} GB/s ({pct(g, copy_gbs)})")
        new_tokens = get(zd.get(context) or hd.get(context), "new_tokens")
        label = f"decode @{context}" + (f" (+{new_tokens})" if new_tokens else "")
        compiled = ""
        if with_compiled:
            c = cd.get(context)
            v, g = get(c, "ms_per_token"), get(c, "weight_gb_per_s")
            cell = DASH if v is None else f"{v:.2f} ms/tok" + (f" ({pct(g, copy_gbs)} of copy)" if copy_gbs and g else "")
            compiled = f" {cell} | {ratio(False, ms[0], v)} |"
        lines.append(f"| {label} | {cells[0]} | {cells[1]} | {ratio(False, *ms)} | {roof[0]} | {roof[1]} |" + compiled)

    zm, hm = peak_memory(zoo), peak_memory(hf)
    hf_alloc = get(hf, "runtime", "peak_allocated_gb")
    hf_cell = DASH if hm is None else f"{hm:.2f} GB" + (
        f" ({hf_alloc:.2f} allocated)" if isinstance(hf_alloc, (int, float)) and hf_alloc != hm else "")
    cm = peak_memory(hfc)
    lines.append(f"| peak device memory | {DASH if zm is None else f'{zm:.2f} GB'} | {hf_cell} | "
                 f"{ratio(False, zm, hm)} | | |"
                 + (f" {DASH if cm is None else f'{cm:.2f} GB'} | {ratio(False, zm, cm)} |" if with_compiled else ""))
    if with_compiled and hfc is None:
        lines += ["", "transformers compiled: no result (see the notes below)."]
    elif with_compiled:
        how = get(hfc, "runtime", "compile")
        if isinstance(how, str) and how.startswith("none"):
            how_text = "without torch.compile (a smoke test: --no-compile)"
        else:
            how_text = "under " + (f"`{how}`" if how else "torch.compile (reduce-overhead)")
        lines += ["", f"transformers compiled: StaticCache, decode steps {how_text}; the prefill runs eagerly "
                  "(as in transformers' generate()), so it has no prefill rows."]
    lines.append("")
    return lines


def discover_shapes(results: Path) -> list[str]:
    names = set()
    for prefix in ("zoo-", "hf-", "hfc-"):
        for p in results.glob(f"{prefix}*.json"):
            names.add(p.stem[len(prefix):])
    return sorted(names)


def gather(args, notes: list[str]) -> tuple[dict | None, list[tuple]]:
    """(roofline, [(shape, zoo, hf, config, hf_compiled, compiled_attempted)]) from a results
    directory or from a bundle."""
    if args.bundle:
        bundle = load_json(args.bundle, notes) or {}
        shapes = bundle.get("shapes") or {}
        names = args.shapes or list(shapes)
        rows = []
        for name in names:
            entry = shapes.get(name) or {}
            if not entry:
                notes.append(f"`{args.bundle.name}` has no shape {name}")
            for side in ("zoo", "hf"):
                if entry and entry.get(side) is None:
                    notes.append(f"no {side} result for {name}")
            rows.append((name, entry.get("zoo"), entry.get("hf"), entry.get("config"), entry.get("hf_compiled"),
                         "hf_compiled" in entry))
        return bundle.get("roofline"), rows
    roof = load_json(args.roofline or args.results / "roofline.json", notes)
    rows = []
    for name in args.shapes or discover_shapes(args.results):
        zoo = load_json(args.results / f"zoo-{name}.json", notes)
        hf = load_json(args.results / f"hf-{name}.json", notes)
        config_path = args.config_dir / f"{name}.json"
        config = load_json(config_path, notes)
        compiled_path = args.results / f"hfc-{name}.json"
        attempted = compiled_path.exists() or compiled_path.with_name(compiled_path.name + ".failed").exists()
        hfc = load_json(compiled_path, notes) if attempted else None
        rows.append((name, zoo, hf, config, hfc, attempted))
    return roof, rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--results", type=Path, help="directory with zoo-S.json, hf-S.json, roofline.json")
    source.add_argument("--bundle", type=Path, help="a results.json written by --write-bundle")
    parser.add_argument("--shapes", nargs="*", help="shape names, in table order (default: every zoo-*.json / hf-*.json)")
    parser.add_argument("--config-dir", type=Path, default=Path(__file__).resolve().parents[2] / "configs" / "shapes",
                        help="where S.json (the shape's config.json) lives (default: configs/shapes)")
    parser.add_argument("--roofline", type=Path, help="roofline JSON (default: RESULTS/roofline.json)")
    parser.add_argument("--title", default="Zoo vs transformers", help="heading of the page")
    parser.add_argument("--out", type=Path, help="also write the markdown here")
    source.add_argument("--checkpoint-bytes", type=Path, metavar="CONFIG",
                        help="print the bytes of a bf16 checkpoint at this config.json's shape, and exit")
    parser.add_argument("--write-bundle", type=Path,
                        help="also write every input (roofline, per shape zoo/hf/config) into one JSON file")
    args = parser.parse_args(argv)
    if args.checkpoint_bytes:
        print(2 * Shape(json.loads(args.checkpoint_bytes.read_text())).checkpoint_params())
        return 0

    notes: list[str] = []
    roof, rows = gather(args, notes)
    peak_tflops = get(roof, "matmul_tflops") or get(roof, "matmul", "tflops_best")
    copy_gbs = get(roof, "copy_gb_per_s") or get(roof, "copy", "gb_per_s")

    lines = [f"# {args.title}", ""]
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    lines.append(f"Generated {when} by `tools/bench/side_by_side.py` from `{args.results or args.bundle}`.")
    lines.append("")
    if roof:
        lines.append(f"Roofline on {roof.get('device', '?')} (torch {roof.get('torch', '?')}): bf16 matmul "
                     f"{fmt_num(peak_tflops)} TFLOP/s (best, n={get(roof, 'matmul', 'n')}); copy "
                     f"{fmt_num(copy_gbs, 0)} GB/s read+write "
                     f"({fmt_num(get(roof, 'copy', 'one_way_gb_per_s'), 0)} GB/s one way).")
    else:
        lines.append("No roofline measurement: the roofline columns show no percentages.")
    lines += ["",
              "Ratio: how many times faster (or smaller) Zoo is; > 1 means Zoo wins. Prefill roofline: "
              "achieved TFLOP/s (matmuls + causal attention, head at the last position only) and share of "
              "the matmul peak. Decode roofline: weight bytes per step time and share of the copy "
              "bandwidth (read+write). Peak memory: device bytes in use (total - free) where a side "
              "reports it.", ""]

    versions = None
    for name, zoo, hf, config, hfc, attempted in rows:
        shape = None
        if config is not None:
            try:
                shape = Shape(config)
            except (KeyError, TypeError, ValueError) as e:
                notes.append(f"the config of {name} lacks a size ({e}): no FLOP counts")
        else:
            notes.append(f"no config for {name}: no FLOP counts")
        runtime = get(hf, "runtime") or {}
        if runtime.get("transformers"):
            versions = f"transformers {runtime['transformers']}, torch {runtime.get('torch', '?')}, " \
                       f"attention {runtime.get('attn_implementation', '?')}"
        lines += shape_table(name, zoo, hf, shape, peak_tflops, copy_gbs, hfc, attempted)

    if versions:
        lines += [f"transformers side: {versions}.", ""]
    if notes:
        lines += ["Notes:", ""] + [f"- {n}" for n in notes] + [""]
    text = "\n".join(lines)
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)
    if args.write_bundle:
        bundle = {"roofline": roof, "shapes": {}}
        for name, zoo, hf, config, hfc, attempted in rows:
            bundle["shapes"][name] = {"zoo": zoo, "hf": hf, "config": config}
            if attempted:
                bundle["shapes"][name]["hf_compiled"] = hfc
        args.write_bundle.write_text(json.dumps(bundle, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
