#!/usr/bin/env python3
"""A/B timing of library builds: end-to-end int8attn forward times for a few shapes, for the
library named by INT8ATTN_LIBRARY. Run it once per build in one device session and compare the
printed lines (absolute times are comparable only within one session):

    INT8ATTN_LIBRARY=build-a/lib/libint8attn.so python3 bench/ab_time.py fast flux_1024px,square_8k_d128
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import bench  # noqa: E402  (shape table and CUDA-graph timer)
import int8attn  # noqa: E402


def main() -> None:
    mode, names = sys.argv[1], sys.argv[2].split(",")
    shapes = {s[0]: s[1:] for s in bench.SQUARE + bench.DIFFUSION + bench.DECODE}
    ctx = int8attn.Context()
    label = os.environ.get("INT8ATTN_LIBRARY", "default")
    for name in names:
        B, Hq, Hkv, Nq, Nk, D = shapes[name]
        q = torch.randn(B, Hq, Nq, D, device="cuda", dtype=torch.float16)
        k = torch.randn(B, Hkv, Nk, D, device="cuda", dtype=torch.float16)
        v = torch.randn(B, Hkv, Nk, D, device="cuda", dtype=torch.float16)
        out = torch.empty_like(q)
        ms, _ = bench.time_fn(lambda: int8attn.attention(q, k, v, mode=mode, out=out, context=ctx))
        tops = 4.0 * B * Hq * Nq * Nk * D / (ms * 1e-3) / 1e12
        print(f"{label:40s} {mode:8s} {name:18s} {ms:9.4f} ms {tops:7.1f} TOPS", flush=True)


if __name__ == "__main__":
    main()
