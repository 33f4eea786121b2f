#!/usr/bin/env python3
"""Self-test of the benchmark tools on the CPU, with tiny checkpoints:

    python3 tools/bench/test_bench_tools.py [-v]
    ZOO=build/bin/zoo python3 tools/bench/test_bench_tools.py   # also checks against `zoo bench --json`

Checks that the shape configs match the published Qwen3 parameter counts and transformers' own
module sizes, that bench_transformers.py's cached steps compute what a full forward computes
(Qwen3 and the Higgs body + audio head, by both Higgs loading paths, with the eager DynamicCache and
the compiled mode's StaticCache path), that its JSON has
`zoo bench --json`'s keys, and that side_by_side.py's ratios and roofline shares point the right
way, survive missing files and round-trip through a bundle. For bench_higgs_transformers.py: the
cached TTS loop's codes equal a full recompute's, the delay pattern and its reversal, the codec's
960 samples per frame at the released tokenizer's config, and the JSON of a tiny smoke run.
"""

from __future__ import annotations

import contextlib
import io
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

try:
    import torch
    import transformers  # noqa: F401
except Exception as e:  # noqa: BLE001 - any import failure means "cannot test here"
    print(f"SKIPPED: torch/transformers not importable ({type(e).__name__}: {e})")
    sys.exit(77)  # ctest's SKIP_RETURN_CODE

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHAPES = ROOT / "configs" / "shapes"
sys.path.insert(0, str(HERE))

import attention_sdpa as sdpa  # noqa: E402
import bench_higgs_transformers as bh  # noqa: E402
import bench_transformers as bt  # noqa: E402
import side_by_side as sbs  # noqa: E402

TINY = dict(vocab_size=320, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, rope_theta=10000.0, max_position_embeddings=512,
            bos_token_id=None, eos_token_id=None, pad_token_id=None)


def tiny_qwen3(tied: bool = True):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(tie_word_embeddings=tied, **TINY)).eval()
    with torch.no_grad():  # norms away from 1 so an unloaded norm is told apart
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(0.1 * torch.randn_like(p))
    return model


def write_higgs(model, path: Path, codebooks: int = 3, codes: int = 10) -> torch.Tensor:
    """The tiny Qwen3 saved under the Higgs names, with an audio table; returns the table."""
    from safetensors.torch import save_file

    path.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for name, p in model.state_dict().items():
        if name == "lm_head.weight":
            continue
        if name == "model.embed_tokens.weight":
            tensors[bt.HIGGS_TEXT] = p.clone()
        else:
            tensors["body." + name[len("model."):]] = p.clone()
    table = torch.randn(codebooks * codes, TINY["hidden_size"]) * 0.5
    tensors[bt.HIGGS_AUDIO] = table
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    text = {k: v for k, v in TINY.items() if k != "rope_theta"}
    text.update(model_type="qwen3", rope_theta=None, tie_word_embeddings=True,
                rope_parameters={"rope_type": "default", "rope_theta": TINY["rope_theta"]})
    config = {"architectures": ["HiggsMultimodalQwen3ForConditionalGeneration"], "model_type": "higgs_multimodal_qwen3",
              "audio_token_id": -100, "tie_word_embeddings": True, "text_config": text,
              "audio_encoder_config": {"num_codebooks": codebooks, "vocab_size": codes,
                                       "out_dim": TINY["hidden_size"], "use_delay_pattern": True}}
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return table


def run_main(module, argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = module.main(argv)
    assert rc == 0, f"{module.__name__} {argv} returned {rc}"
    return out.getvalue()


def key_tree(value):
    """The keys of nested dicts (first element of lists), for comparing JSON layouts."""
    if isinstance(value, dict):
        return {k: key_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [key_tree(value[0])] if value else []
    return None


def missing_keys(ours, theirs, path=""):
    """Key paths of the key tree `ours` that `theirs` lacks."""
    if isinstance(ours, dict):
        if not isinstance(theirs, dict):
            return [path or "."]
        return [m for k, v in ours.items()
                for m in (missing_keys(v, theirs[k], f"{path}.{k}") if k in theirs else [f"{path}.{k}"])]
    if isinstance(ours, list):
        if not isinstance(theirs, list):
            return [path or "."]
        return missing_keys(ours[0], theirs[0], path + "[0]") if ours and theirs else []
    return []


class ShapeConfigs(unittest.TestCase):
    # Published sizes: total parameters, and the non-embedding count of the model cards
    PUBLISHED = {"qwen3-0.6b": (0.6e9, 0.44e9), "qwen3-1.7b": (1.7e9, 1.4e9), "qwen3-4b": (4.0e9, 3.6e9),
                 "qwen3-8b": (8.2e9, 6.95e9)}

    def test_qwen3_configs_build_the_published_models(self):
        from transformers import Qwen3Config, Qwen3ForCausalLM

        for name, (total, non_embedding) in self.PUBLISHED.items():
            with self.subTest(name):
                raw = json.loads((SHAPES / f"{name}.json").read_text())
                self.assertEqual(raw["model_type"], "qwen3")
                self.assertEqual(raw["architectures"], ["Qwen3ForCausalLM"])
                self.assertEqual((raw["vocab_size"], raw["head_dim"], raw["rope_theta"], raw["rms_norm_eps"]),
                                 (151936, 128, 1000000, 1e-6))
                self.assertEqual(raw["tie_word_embeddings"], name != "qwen3-8b")
                with torch.device("meta"):
                    model = Qwen3ForCausalLM(Qwen3Config(**{k: v for k, v in raw.items() if k != "architectures"}))
                params = {id(p): p for p in model.parameters()}
                n_total = sum(p.numel() for p in params.values())
                linears = sum(m.weight.numel() for n, m in model.model.layers.named_modules()
                              if isinstance(m, torch.nn.Linear))
                shape = sbs.Shape(raw)
                self.assertEqual(shape.matmul_params, linears)
                self.assertEqual(shape.checkpoint_params(), n_total)
                self.assertLess(abs(n_total - total) / total, 0.05, f"{n_total} parameters")
                self.assertLess(abs(linears - non_embedding) / non_embedding, 0.03, f"{linears} in matmuls")

    def test_higgs_config_is_the_4b_body_with_an_audio_head(self):
        higgs = json.loads((SHAPES / "higgs-v3-4b.json").read_text())
        qwen = json.loads((SHAPES / "qwen3-4b.json").read_text())
        self.assertEqual(higgs["model_type"], "higgs_multimodal_qwen3")
        self.assertEqual(higgs["architectures"], ["HiggsMultimodalQwen3ForConditionalGeneration"])
        self.assertEqual(higgs["audio_token_id"], -100)
        self.assertEqual(higgs["audio_encoder_config"],
                         {"num_codebooks": 8, "vocab_size": 1026, "out_dim": 2560, "use_delay_pattern": True})
        text = higgs["text_config"]
        self.assertIsNone(text["rope_theta"])
        self.assertEqual(text["rope_parameters"], {"rope_type": "default", "rope_theta": 1000000.0})
        for key, value in qwen.items():
            if key not in ("rope_theta", "rope_scaling", "architectures", "torch_dtype", "transformers_version"):
                self.assertEqual(text.get(key), value, key)
        cfg = bt.qwen3_text_config(higgs)  # what the transformers side builds
        self.assertEqual((cfg.hidden_size, cfg.num_hidden_layers), (2560, 36))
        shape = sbs.Shape(higgs)
        self.assertEqual(shape.head_rows, 8 * 1026)
        self.assertEqual(shape.checkpoint_params(), sbs.Shape(qwen).checkpoint_params() + 8 * 1026 * 2560)


class TransformersBench(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="bench-test-")
        cls.dir = Path(cls.tmp.name)
        cls.device = bt.Device("cpu")
        cls.qwen = tiny_qwen3(tied=True)
        cls.qwen.save_pretrained(cls.dir / "qwen3")
        cls.untied = tiny_qwen3(tied=False)
        cls.untied.save_pretrained(cls.dir / "untied")
        cls.table = write_higgs(cls.qwen, cls.dir / "higgs")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def steps_match_full_forward(self, runner, reference):
        """Prefill then three cached steps give the last-row logits of full forwards."""
        ids = torch.randint(0, TINY["vocab_size"], (1, 11), generator=torch.Generator().manual_seed(3))
        with torch.inference_mode():
            cache, logits = runner.step(ids[:, :8], None)
            torch.testing.assert_close(logits, reference(ids[:, :8]), rtol=1e-4, atol=1e-4)
            for t in range(8, 11):
                cache, logits = runner.step(ids[:, t:t + 1], cache)
                torch.testing.assert_close(logits, reference(ids[:, :t + 1]), rtol=1e-4, atol=1e-4)

    def test_qwen3_steps(self):
        for name, source in (("qwen3", self.qwen), ("untied", self.untied)):
            with self.subTest(name):
                model, table, info = bt.load_model(self.dir / name, torch.float32, "sdpa", self.device)
                self.assertIsNone(table)
                self.assertEqual(info["missing_keys"], [])
                self.assertEqual(model.config.tie_word_embeddings, name == "qwen3")
                self.steps_match_full_forward(bt.Runner(model, table, info),
                                              lambda ids: source(input_ids=ids).logits[0, -1].float())

    def test_higgs_both_loading_paths(self):
        def reference(ids):  # Qwen3 body, final norm, tied audio table: [K, V]
            hidden = self.qwen.model(input_ids=ids).last_hidden_state[0, -1]
            return torch.nn.functional.linear(hidden, self.table).view(3, 10)

        for how, method in (("auto", "from_pretrained+key_mapping"), ("by-hand", "by_hand")):
            with self.subTest(how):
                model, table, info = bt.load_model(self.dir / "higgs", torch.float32, "sdpa", self.device, how)
                self.assertEqual(info["load_method"], method)
                self.assertEqual((info["codebooks"], info["codes"]), (3, 10))
                self.assertTrue(torch.equal(table, self.table))
                self.steps_match_full_forward(bt.Runner(model, table, info), reference)

    def static_steps_match_full_forward(self, runner, reference, compile_mode=None):
        """The compiled mode's path (StaticCache, eager prefill, one-token steps): each step's logits
        are the last-row logits of a full forward, also after a reset for a second repeat."""
        ids = torch.randint(0, TINY["vocab_size"], (1, 11), generator=torch.Generator().manual_seed(4))
        decoder = bt.StaticDecoder(runner, 11, compile_mode)
        with torch.no_grad():
            for _ in range(2):
                logits = decoder.prefill(ids[:, :8])
                torch.testing.assert_close(logits, reference(ids[:, :8]), rtol=1e-4, atol=1e-4)
                for t in range(8, 11):
                    logits = decoder.step(int(ids[0, t]), t, self.device.torch)
                    torch.testing.assert_close(logits, reference(ids[:, :t + 1]), rtol=1e-4, atol=1e-4)

    def test_static_cache_steps(self):
        def higgs_reference(ids):
            hidden = self.qwen.model(input_ids=ids).last_hidden_state[0, -1]
            return torch.nn.functional.linear(hidden, self.table).view(3, 10)

        for name, reference in (("qwen3", lambda ids: self.qwen(input_ids=ids).logits[0, -1].float()),
                                ("untied", lambda ids: self.untied(input_ids=ids).logits[0, -1].float()),
                                ("higgs", higgs_reference)):
            with self.subTest(name):
                model, table, info = bt.load_model(self.dir / name, torch.float32, "sdpa", self.device)
                with torch.no_grad():
                    self.static_steps_match_full_forward(bt.Runner(model, table, info), reference)

    def test_sliding_window_static_cache(self):
        """A Mistral whose window covers the whole run decodes through full static layers (no per-step
        Python int for torch.compile to recompile on) and one whose window is shorter keeps the
        sliding layers; both give a full forward's logits, the window applied."""
        from transformers import MistralConfig, MistralForCausalLM

        for window, layers in ((4096, "full StaticLayers for the sliding ones (window 4096 >= 11 positions)"),
                               (5, "as the config states")):
            with self.subTest(window=window):
                torch.manual_seed(1)
                model = MistralForCausalLM(MistralConfig(sliding_window=window, **TINY)).eval()
                runner = bt.Runner(model, None, {"missing_keys": []})
                with torch.no_grad():
                    self.static_steps_match_full_forward(runner, lambda ids: model(input_ids=ids).logits[0, -1].float())
                self.assertEqual(bt.StaticDecoder(runner, 11, None).cache_layers, layers)

    @unittest.skipUnless(os.environ.get("ZOO_BENCH_COMPILE"), "set ZOO_BENCH_COMPILE=1 to run torch.compile "
                         "on the CPU (minutes)")
    def test_compiled_steps(self):
        model, table, info = bt.load_model(self.dir / "qwen3", torch.float32, "sdpa", self.device)
        with torch.no_grad():
            self.static_steps_match_full_forward(bt.Runner(model, table, info),
                                                 lambda ids: self.qwen(input_ids=ids).logits[0, -1].float(),
                                                 "reduce-overhead")

    def test_compiled_mode_json(self):
        args = ["--device", "cpu", "--dtype", "float32", "--decode-context", "4,6", "--new-tokens", "3",
                "--repeat", "1", "--mode", "compiled", "--no-compile", "--json"]
        for name in ("qwen3", "higgs"):
            with self.subTest(name):
                out = json.loads(run_main(bt, [str(self.dir / name)] + args))
                self.assertEqual(out["prefill"], [])
                self.assertEqual([(d["context"], d["new_tokens"]) for d in out["decode"]], [(4, 3), (6, 3)])
                self.assertEqual(out["runtime"]["mode"], "compiled")
                self.assertEqual(out["runtime"]["cache"], "StaticCache, layers as the config states")
                self.assertEqual(sorted(out["runtime"]["warmup_s"]), ["4", "6"])
                self.assertIn("(compiled)", out["model"])

    def test_unloaded_weights_are_caught(self):
        model = tiny_qwen3()
        with torch.no_grad():
            model.model.norm.weight.fill_(1.0)
        with self.assertRaises(RuntimeError):
            bt.check_loaded(self.dir / "qwen3", "model.norm.weight", model.model.norm.weight)

    def test_json_has_zoo_bench_layout(self):
        args = ["--device", "cpu", "--dtype", "float32", "--prompt-len", "5,9", "--decode-context", "4",
                "--new-tokens", "3", "--repeat", "1", "--json"]
        for name in ("qwen3", "higgs"):
            with self.subTest(name):
                out = json.loads(run_main(bt, [str(self.dir / name)] + args))
                self.assertEqual([p["tokens"] for p in out["prefill"]], [5, 9])
                self.assertEqual([(d["context"], d["new_tokens"]) for d in out["decode"]], [(4, 3)])
                for p in out["prefill"]:
                    self.assertAlmostEqual(p["tokens_per_s"], p["tokens"] / p["seconds"], places=6)
                d = out["decode"][0]
                self.assertAlmostEqual(d["tokens_per_s"] * d["ms_per_token"], 1e3, places=6)
                self.assertAlmostEqual(d["weight_gb_per_s"], out["weight_bytes"] / (d["ms_per_token"] / 1e3) / 1e9)
                stored = sum(t.numel() * t.element_size() for t in self.stored_tensors(self.dir / name))
                self.assertEqual(out["weight_bytes"], stored)  # tied head counted once, audio table included
                self.assertEqual(sorted(out), sorted(["model", "plugin", "device", "dtype", "weight_bytes", "load",
                                                      "prefill", "decode", "runtime", "repeat"]))

    @staticmethod
    def stored_tensors(path: Path):
        from safetensors import safe_open

        with safe_open(str(path / "model.safetensors"), framework="pt") as f:
            return [f.get_tensor(k) for k in f.keys()]

    @unittest.skipUnless(os.environ.get("ZOO"), "set ZOO=path/to/zoo to compare with zoo bench --json")
    def test_same_keys_as_zoo(self):
        yaml = self.dir / "qwen3.yaml"
        yaml.write_text(f"model:\n  checkpoint: {self.dir / 'qwen3'}\n  device: cpu\n")
        common = ["--prompt-len", "5", "--decode-context", "4", "--new-tokens", "2", "--repeat", "1", "--json"]
        zoo = json.loads(subprocess.run([os.environ["ZOO"], "bench", str(yaml)] + common, check=True,
                                        capture_output=True, text=True).stdout)
        # float32 like the checkpoint: zoo counts stored bytes, this tool bytes in the compute dtype
        ours = json.loads(run_main(bt, [str(self.dir / "qwen3"), "--device", "cpu", "--dtype", "float32"] + common))
        zoo_keys, our_keys = key_tree(zoo), key_tree(ours)
        zoo_keys.pop("runtime"), our_keys.pop("runtime")  # free-form on both sides
        # Every key this tool writes is one `zoo bench --json` writes too, at the same place, so
        # side_by_side.py reads both alike (zoo's JSON has more: spreads, host, commit, ...).
        self.assertEqual(missing_keys(our_keys, zoo_keys), [])
        self.assertEqual(zoo["weight_bytes"], ours["weight_bytes"])

    def test_roofline(self):
        out = json.loads(run_main(bt, ["--roofline", "--device", "cpu", "--matmul-n", "64", "--matmul-iters", "2",
                                       "--copy-gb", "0.004", "--copy-iters", "2", "--trials", "2", "--json"]))
        self.assertGreater(out["matmul_tflops"], 0)
        self.assertEqual(out["matmul_tflops"], out["matmul"]["tflops_best"])
        self.assertGreaterEqual(out["matmul"]["tflops_best"], out["matmul"]["tflops_median"])
        self.assertEqual(out["copy"]["bytes"], 4_000_000)
        self.assertAlmostEqual(out["copy"]["gb_per_s"], 2 * out["copy"]["one_way_gb_per_s"])
        self.assertEqual(out["copy_gb_per_s"], out["copy"]["gb_per_s"])


class HiggsLoop(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        ns = type("Args", (), dict(tiny=True, shape=None, attn="sdpa", seed=5, frames=6, text_tokens=7,
                                   no_compile=True))
        cls.loop = bh.Loop(ns, torch.device("cpu"), torch.float32)

    def test_cached_rows_equal_a_full_recompute(self):
        """Every LM row's codes (before the delay pattern forces BOC/EOC) are the argmax of the tied
        head over a full forward of the prompt plus the rows fed back so far."""
        loop = self.loop
        with torch.no_grad():
            _, _, rows = loop.run(lambda: None)
            self.assertEqual(tuple(rows.shape), (loop.rows, loop.K))
            text = loop.body.embed_tokens(loop.prompt)[0]
            fed = torch.stack([loop.table[r + loop.offsets].sum(0) for r in rows[:-1]])
            hidden = loop.body(inputs_embeds=torch.cat([text, fed])[None]).last_hidden_state[0]
            free = 0
            for r in range(loop.rows):
                want = loop._head(hidden[loop.text_tokens - 1 + r]).tolist()
                for c in range(loop.K):
                    if c <= r <= loop.frames - 1 + c:  # not forced by the delay pattern
                        self.assertEqual(int(rows[r, c]), want[c], f"row {r} codebook {c}")
                        free += 1
            self.assertEqual(free, loop.frames * loop.K)

    def test_delay_pattern_and_reverse(self):
        loop = self.loop
        K, n = loop.K, loop.frames
        rows = torch.tensor([loop.delay([100 * c + r for c in range(K)], r) for r in range(loop.rows)])
        self.assertEqual(rows[0].tolist(), [100 * 0] + [loop.boc] * (K - 1))
        self.assertEqual(rows[-1].tolist(), [loop.eoc] * (K - 1) + [100 * (K - 1) + loop.rows - 1])
        codes = loop.reverse_delay(rows)
        self.assertEqual(tuple(codes.shape), (1, K, n))
        for c in range(K):  # codebook c's frame t was sampled at row t + c; >= codebook size -> 0
            want = [100 * c + t + c for t in range(n)]
            self.assertEqual(codes[0, c].tolist(), [w if w < loop.codes else 0 for w in want])

    def test_released_codec_config(self):
        cfg = bh.codec_config(False, 8)
        self.assertEqual((cfg.sample_rate, cfg.hop_length, cfg.frame_rate, cfg.num_quantizers, cfg.codebook_size),
                         (24000, 960, 25, 8, 1024))
        with self.assertRaises(SystemExit):
            bh.codec_config(False, 9)

    # transformers refuses to build HiggsAudioV2TokenizerModel without torchaudio (tools/fixtures/README.md).
    @unittest.skipUnless(importlib.util.find_spec("torchaudio"), "torchaudio is not installed: the codec cannot be built")
    def test_tiny_smoke_json(self):
        out = json.loads(run_main(bh, ["--tiny", "--device", "cpu", "--frames", "5", "--text-tokens", "6",
                                       "--repeat", "1", "--no-compile", "--json"]))
        self.assertEqual((out["frames"], out["lm_rows"], out["decode_steps"], out["codebooks"]), (5, 8, 7, 4))
        self.assertAlmostEqual(out["audio_seconds"], 5 * 6 / 24000)
        self.assertAlmostEqual(out["codec_x_realtime"], out["audio_seconds"] / out["codec_s"])
        self.assertAlmostEqual(out["ms_per_frame"], 1e3 * out["decode_loop_s"] / 7)
        self.assertGreaterEqual(out["end_to_end_s"], out["decode_loop_s"])


def fake_result(prefill_s: dict, decode_ms: dict, weight_bytes: int, load_s: float) -> dict:
    return {"weight_bytes": weight_bytes, "load": {"seconds": load_s, "gb_per_s": weight_bytes / load_s / 1e9},
            "prefill": [{"tokens": t, "seconds": s, "tokens_per_s": t / s} for t, s in prefill_s.items()],
            "decode": [{"context": c, "new_tokens": 8, "ms_per_token": m, "tokens_per_s": 1e3 / m,
                        "weight_gb_per_s": weight_bytes / (m / 1e3) / 1e9} for c, m in decode_ms.items()],
            "runtime": {"peak_device_memory_gb": 10.0}}


class SideBySide(unittest.TestCase):
    def test_table(self):
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            wb = 16_000_000_000
            (d / "zoo-qwen3-8b.json").write_text(json.dumps(fake_result({4096: 0.25}, {512: 4.0}, wb, 2.0)))
            (d / "hf-qwen3-8b.json").write_text("warning: chatter\n" + json.dumps(
                fake_result({4096: 0.5}, {512: 20.0}, wb, 8.0)))
            (d / "zoo-qwen3-0.6b.json").write_text("")
            (d / "roofline.json").write_text(json.dumps({"matmul_tflops": 800.0, "copy_gb_per_s": 4000.0,
                                                         "device": "test"}))
            text = run_main(sbs, ["--results", str(d), "--shapes", "qwen3-8b", "qwen3-0.6b",
                                  "--config-dir", str(SHAPES), "--out", str(d / "p.md"),
                                  "--write-bundle", str(d / "b.json")])
            self.assertEqual(text, (d / "p.md").read_text())
            section = text[text.index("### qwen3-8b"):text.index("### qwen3-0.6b")]
            rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
                    for line in section.splitlines() if line.startswith("| ") and "---" not in line}
            self.assertEqual(rows["prefill 4096"][2], "2.00x")  # zoo twice as fast
            self.assertEqual(rows["decode @512 (+8)"][2], "5.00x")
            self.assertEqual(rows["load"][2], "4.00x")
            self.assertEqual(rows["peak device memory"][2], "1.00x")
            shape = sbs.Shape(json.loads((SHAPES / "qwen3-8b.json").read_text()))
            achieved = shape.prefill_flops(4096) / 0.25 / 1e12
            self.assertIn(f"({100 * achieved / 800:.0f}%)", rows["prefill 4096"][3])
            self.assertIn("(100%)", rows["decode @512 (+8)"][3])  # 16 GB / 4 ms = 4000 GB/s
            self.assertIn("(20%)", rows["decode @512 (+8)"][4])
            self.assertIn("zoo-qwen3-0.6b.json` holds no JSON object", text)
            self.assertIn("hf-qwen3-0.6b.json` is missing", text)
            again = run_main(sbs, ["--bundle", str(d / "b.json")])
            strip = lambda t: [l for l in t.splitlines() if not l.startswith(("Generated", "- "))]  # noqa: E731
            self.assertEqual(strip(again), strip(text))

    def test_compiled_columns(self):
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            wb = 16_000_000_000
            (d / "zoo-qwen3-8b.json").write_text(json.dumps(fake_result({4096: 0.25}, {512: 4.0}, wb, 2.0)))
            (d / "hf-qwen3-8b.json").write_text(json.dumps(fake_result({4096: 0.5}, {512: 20.0}, wb, 8.0)))
            compiled = fake_result({}, {512: 6.0}, wb, 8.0)
            compiled["runtime"]["compile"] = "torch.compile(mode='reduce-overhead')"
            (d / "hfc-qwen3-8b.json").write_text(json.dumps(compiled))
            (d / "zoo-qwen3-0.6b.json").write_text(json.dumps(fake_result({4096: 0.1}, {512: 1.0}, wb, 1.0)))
            (d / "hfc-qwen3-0.6b.json.failed").write_text("")
            (d / "roofline.json").write_text(json.dumps({"matmul_tflops": 800.0, "copy_gb_per_s": 4000.0}))
            text = run_main(sbs, ["--results", str(d), "--shapes", "qwen3-8b", "qwen3-0.6b",
                                  "--config-dir", str(SHAPES), "--write-bundle", str(d / "b.json")])
            section = text[text.index("### qwen3-8b"):text.index("### qwen3-0.6b")]
            rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
                    for line in section.splitlines() if line.startswith("| ") and "---" not in line}
            self.assertEqual(rows["phase"][5:], ["transformers compiled", "ratio vs compiled"])
            self.assertEqual(rows["decode @512 (+8)"][2], "5.00x")  # eager columns unchanged
            self.assertEqual(rows["decode @512 (+8)"][5], "6.00 ms/tok (67% of copy)")  # 16 GB / 6 ms
            self.assertEqual(rows["decode @512 (+8)"][6], "1.50x")
            self.assertEqual(rows["prefill 4096"][5:], ["—", "—"])  # compiled mode measures decode only
            self.assertIn("reduce-overhead", section)
            failed = text[text.index("### qwen3-0.6b"):]
            self.assertIn("transformers compiled", failed)  # a failed compiled step shows as a gap
            self.assertIn("hfc-qwen3-0.6b.json` is missing (its step failed", text)
            again = run_main(sbs, ["--bundle", str(d / "b.json")])
            strip = lambda t: [l for l in t.splitlines() if not l.startswith(("Generated", "- "))]  # noqa: E731
            self.assertEqual(strip(again), strip(text))

    def test_prefill_flops(self):
        shape = sbs.Shape(json.loads((SHAPES / "qwen3-8b.json").read_text()))
        t = 1000
        attention = 4 * 36 * t * t / 2 * 32 * 128
        self.assertAlmostEqual(shape.prefill_flops(t), 2 * t * shape.matmul_params + attention + 2 * 151936 * 4096)


class KeyTrees(unittest.TestCase):
    def test_missing_keys(self):
        zoo = key_tree({"decode": [{"ms": 1, "spread": {"min": 1}}], "host": "x"})
        self.assertEqual(missing_keys(key_tree({"decode": [{"ms": 2}]}), zoo), [])
        self.assertEqual(missing_keys(key_tree({"decode": [{"ms": 2, "gbps": 3}], "gpu": 1}), zoo),
                         [".decode[0].gbps", ".gpu"])


class AttentionSdpa(unittest.TestCase):
    def test_flops_and_shapes(self):
        self.assertEqual(sdpa.causal_flops(1000, 32, 128), 4.0 * 128 * 32 * 1000 * 1001 / 2)
        self.assertEqual(sdpa.parse_shapes("64:4:2:16,8:2:2:8"), [(64, 4, 2, 16), (8, 2, 2, 8)])
        for bad in ("64:4:3:16", "64:4:2", "a:1:1:1", "0:1:1:8"):
            with self.assertRaises(Exception):
                sdpa.parse_shapes(bad)

    def test_cpu_dry_run(self):
        row = sdpa.measure((16, 4, 2, 8), "cpu")
        self.assertEqual((row["tokens"], row["q_heads"], row["kv_heads"], row["head_dim"]), (16, 4, 2, 8))
        self.assertIn("best", row)
        self.assertGreater(row["best"]["ms"], 0)

if __name__ == "__main__":
    unittest.main()
