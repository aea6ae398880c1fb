#!/usr/bin/env python3
"""One end-to-end int8attn forward per shape and mode, for `ncu` to time each kernel of it.

    ncu --clock-control none -k regex:'kv_|attention|stats|combine' \\
        python3 bench/profile_forward.py flux_1024px balanced
"""
import sys

import torch

import int8attn

SHAPES = {"flux_1024px": (1, 24, 24, 4608, 4608, 128), "decode_b16_nk32k": (16, 32, 8, 1, 32768, 128),
          "square_8k_d64": (4, 32, 32, 8192, 8192, 64), "square_8k_d128": (4, 32, 32, 8192, 8192, 128)}
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
