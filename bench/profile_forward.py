#!/usr/bin/env python3
"""One end-to-end int8attn forward per shape and mode, for `ncu` to time each kernel of it.

    ncu --clock-control none -k regex:'kv_|attention|stats|combine|finalize|fill' \\
        python3 bench/profile_forward.py flux_1024px balanced

Shapes are the names of bench/bench.py.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import bench  # noqa: E402  (shape table)
import int8attn  # noqa: E402

SHAPES = {s[0]: s[1:] for s in bench.SQUARE + bench.DIFFUSION + bench.DECODE}
name, mode = sys.argv[1], sys.argv[2]
B, Hq, Hkv, Nq, Nk, D = SHAPES[name]
q = torch.randn(B, Hq, Nq, D, device="cuda", dtype=torch.float16)
k = torch.randn(B, Hkv, Nk, D, device="cuda", dtype=torch.float16)
v = torch.randn(B, Hkv, Nk, D, device="cuda", dtype=torch.float16)
ctx = int8attn.Context()
int8attn.attention(q, k, v, mode=mode, context=ctx)  # grows the workspace
torch.cuda.synchronize()
int8attn.attention(q, k, v, mode=mode, context=ctx)
torch.cuda.synchronize()
