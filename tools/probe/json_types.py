#!/usr/bin/env python3
"""Type-confusion probe for the JSON files a zoo command reads.

Every value of FILE (to depth 3; the first 60 keys of an object, 3 items of a list) is replaced in
turn by null, true, 1, -1, 1.5, "s", [] and {} in a copy of MODEL_DIR, and the command is run.
Reported as BAD: a hang, a crash (exit code other than 0, 1, 2), a message with nlohmann's own
text ("[json.exception...", "type must be") or an "internal" error, or more than one error line.

  tools/probe/json_types.py --zoo build/bin/zoo tests/fixtures/qwen3-tiny-sharded request.json -- validate DIR
DIR in the command is the mutated copy, TMP a scratch directory. Exit 1 when anything is BAD.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

REPLACEMENTS = [None, True, 1, -1, 1.5, "s", [], {}]


def paths(value, prefix=(), depth=0):
    yield prefix
    if depth >= 3:
        return
    if isinstance(value, dict):
        for key in list(value)[:60]:
            yield from paths(value[key], prefix + (key,), depth + 1)
    elif isinstance(value, list):
        for i in range(min(len(value), 3)):
            yield from paths(value[i], prefix + (i,), depth + 1)


def replaced(doc, path, value):
    if not path:
        return value
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", default="build/bin/zoo")
    ap.add_argument("model_dir")
    ap.add_argument("file")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    original = json.load(open(os.path.join(args.model_dir, args.file)))
    runs = bad = 0
    for path in paths(original):
        for value in REPLACEMENTS:
            with tempfile.TemporaryDirectory() as tmp:
                model = os.path.join(tmp, "m")
                os.mkdir(model)
                for name in os.listdir(args.model_dir):
                    if name != args.file:
                        os.symlink(os.path.abspath(os.path.join(args.model_dir, name)), os.path.join(model, name))
                doc = replaced(json.loads(json.dumps(original)), path, value)
                with open(os.path.join(model, args.file), "w") as f:
                    json.dump(doc, f)
                argv = [a.replace("DIR", model).replace("TMP", tmp) for a in command]
                runs += 1
                try:
                    p = subprocess.run([args.zoo] + argv, capture_output=True, text=True, timeout=60)
                except subprocess.TimeoutExpired:
                    bad += 1
                    print(f"BAD hang: {path} = {value!r}")
                    continue
                errors = [l for l in p.stderr.splitlines() if l.startswith("zoo: error") or l.startswith("zoo: validation")]
                leak = any(s in p.stderr for s in ("json.exception", "type must be", "internal"))
                if leak or p.returncode not in (0, 1, 2) or (p.returncode != 0 and len(errors) != 1):
                    bad += 1
                    print(f"BAD exit {p.returncode}: {path} = {value!r}: {p.stderr.strip()[:300]!r}")
    print(f"{args.model_dir}/{args.file}: {runs} runs, {bad} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
