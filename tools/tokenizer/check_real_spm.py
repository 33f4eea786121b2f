#!/usr/bin/env python3
"""Zoo's tokenizer against HF `tokenizers` on real sentencepiece vocabularies (issue 23, item 5).

The committed fixtures (make_fixtures.py) are small vocabularies trained here; this checks the
real ones, which no test can download: the Mistral 7B v0.1 (32,000 ids) and v0.3 (32,768 ids)
sentencepiece models that the `mistral-common` wheel ships, converted to tokenizer.json the way
transformers' sentencepiece converter does (every piece with its id, the merges of each piece's
splits ordered by the piece's score, byte fallback, control pieces as special tokens) in the two
shapes they are published in: v0.1 as Llama 2 (Prepend + Replace normalizer) and v0.3 with the
Metaspace pre-tokenizer (prepend first, no split), both with the Replace/ByteFallback/Fuse/Strip
decoder. Every line of the fixtures' corpus is encoded and decoded by HF `tokenizers` (the
reference) and by `zoo tokenize`; the ids and texts must be identical. sentencepiece itself is
reported beside, as a check of the conversion, not as a gate.

Needs: pip install tokenizers sentencepiece mistral-common (network at install time only).
Usage: python3 tools/tokenizer/check_real_spm.py ZOO_BINARY [--workdir DIR]
Exit 0 when every id and decode matches, 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = [("mistral-v0.1", "tokenizer.model.v1", "llama2"), ("mistral-v0.3", "mistral_instruct_tokenizer_240323.model.v3", "metaspace")]


def convert(path, shape):
    import sentencepiece as spm
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    sp = spm.SentencePieceProcessor()
    sp.Load(path)
    n = sp.GetPieceSize()
    vocab = {sp.id_to_piece(i): i for i in range(n)}
    merges = []
    for piece, i in vocab.items():
        splits = [(piece[:k], piece[k:]) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
        splits.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges.extend((a, b, sp.get_score(i)) for a, b in splits)
    merges.sort(key=lambda m: m[2], reverse=True)  # stable: ties keep vocabulary order
    tok = Tokenizer(BPE(vocab, [(a, b) for a, b, _ in merges], unk_token=sp.id_to_piece(sp.unk_id()), fuse_unk=True,
                        byte_fallback=True))
    tok.add_special_tokens([AddedToken(sp.id_to_piece(i), special=True, normalized=False)
                            for i in range(n) if sp.IsControl(i) or sp.IsUnknown(i)])
    if shape == "llama2":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    return tok, sp


def zoo_lines(zoo, tokenizer, lines, decode):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))
    try:
        cmd = [zoo, "tokenize", tokenizer, "--input", f.name] + (["--decode"] if decode else [])
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600).stdout
    finally:
        os.unlink(f.name)
    return [json.loads(l) for l in out.split("\n") if l]  # not splitlines: U+2028 is text


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("zoo")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    import mistral_common

    data = os.path.join(os.path.dirname(mistral_common.__file__), "data")
    work = args.workdir or tempfile.mkdtemp(prefix="zoo-real-spm-")
    with tarfile.open(os.path.join(ROOT, "tests/fixtures/tokenizer/fixtures.tar.xz")) as tar:
        corpus = [json.loads(l) for l in tar.extractfile("corpus.jsonl").read().decode().split("\n") if l]
    if not corpus:
        print("FAIL: the fixtures' corpus is empty: nothing to compare")
        return 1
    ok = True
    for name, model, shape in MODELS:
        tok, sp = convert(os.path.join(data, model), shape)
        path = os.path.join(work, name, "tokenizer.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tok.save(path)
        want = [tok.encode(t, add_special_tokens=False).ids for t in corpus]
        got = zoo_lines(args.zoo, path, corpus, decode=False)
        want_text = [tok.decode(ids, skip_special_tokens=False) for ids in want]
        got_text = zoo_lines(args.zoo, path, want, decode=True)
        bad_ids = [i for i, (a, b) in enumerate(zip(want, got)) if a != b] + list(range(len(got), len(want)))
        bad_text = [i for i, (a, b) in enumerate(zip(want_text, got_text)) if a != b] + list(range(len(got_text), len(want)))
        spm_same = sum(sp.encode(t) == ids for t, ids in zip(corpus, want))
        print(f"{name}: {tok.get_vocab_size()} ids, {len(corpus)} lines, {sum(map(len, want))} tokens: "
              f"ids differ on {len(bad_ids)} lines {bad_ids[:5]}, decodes on {len(bad_text)} {bad_text[:5]} "
              f"(sentencepiece's own ids equal HF's on {spm_same} lines)")
        ok = ok and not bad_ids and not bad_text
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
