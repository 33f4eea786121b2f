#!/usr/bin/env python3
"""The benchmark tools' checks that need no torch, so they run in CI and not only on the GPU host
(where a drift between attention_sdpa.py's shapes and bench_test.cpp's once went unseen):

    python3 tools/bench/test_bench_shapes.py [-v]
"""

from __future__ import annotations

import re
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import attention_sdpa as sdpa  # noqa: E402


class AttentionSdpaShapes(unittest.TestCase):
    def test_shapes_are_bench_test_cpp_s(self):
        # The torch side must time the shapes Zoo's kernel is timed at, so both numbers compare.
        text = (ROOT / "tests" / "cuda" / "bench" / "bench_test.cpp").read_text()
        block = text[text.index("for (const P p : {"):text.index("DeviceBuffer q = random_bf16_buffer(rng, p.T")]
        zoo = [tuple(int(x) for x in m) for m in re.findall(r"P\{(\d+), (\d+), (\d+), (\d+)\}", block)]
        self.assertTrue(zoo, "no prefill attention shapes found in bench_test.cpp")
        self.assertEqual(zoo, sdpa.ZOO_SHAPES)

    def test_the_default_is_the_list(self):
        self.assertEqual(sdpa.parse_shapes(",".join(":".join(map(str, s)) for s in sdpa.ZOO_SHAPES)), sdpa.ZOO_SHAPES)


if __name__ == "__main__":
    unittest.main()
