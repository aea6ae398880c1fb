#!/usr/bin/env python3
"""Host time per Python attention call: int8attn's entry points against torch SDPA's.

An eager diffusion step makes hundreds of attention calls; each costs host time before its
kernels are queued. This measures that cost alone: the GPU is first held busy by a long sleep
kernel, then N calls are issued and timed on the host (no synchronisation inside the loop; the
queue never drains, so no call waits for the device), then the device is synchronised; the
best of 15 such batches.

Entry points: torch SDPA (default backends, and pinned to cuDNN), ``int8attn.attention`` (HND
and NHD), ``torch.ops.int8attn.attention``, ``int8attn.sageattn``, a diffusers ``Attention``
module with its stock ``AttnProcessor2_0`` and with ``Int8AttnProcessor`` (when diffusers is
installed; module time includes the projections, so compare the two), and the split of
int8attn's own cost into Python (descriptor packing, with the C call stubbed) and the C call
(validation, planning, launches).

Usage: python3 bench/host_overhead.py [--calls 30] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import int8attn
from int8attn import _fastpath
from int8attn import torch_integration as ti  # noqa: F401 - registers torch.ops.int8attn

# (name, B, H, Nq, Nk, D): the calls of image pipelines
SHAPES = [
    ("sdxl_self", 2, 10, 4096, 4096, 64),
    ("sdxl_cross", 2, 10, 4096, 77, 64),
    ("flux_joint", 1, 24, 4608, 4608, 128),
    ("sd15_l3_self", 2, 8, 256, 256, 160),
]


def host_us(fn, calls: int, repeats: int = 15) -> float:
    """The best of ``repeats`` batches: host microseconds per call of ``fn``, device kept busy
    (the host of a GPU VM is noisy; noise only adds time, so the minimum is the call's cost).

    ``calls`` stays small (30): with the device held, a few hundred queued launches fill the
    driver's launch queue and the host then waits for the device, which is not host time."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        torch.cuda._sleep(int(1e8))  # ~60 ms of device work: no call waits for the device
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        samples.append((t1 - t0) / calls * 1e6)
    return min(samples)


def diffusers_attention(dim: int, heads: int, cross_dim):
    try:
        from diffusers.models.attention_processor import Attention, AttnProcessor2_0
    except ImportError:
        return None, None
    attn = Attention(dim, cross_attention_dim=cross_dim, heads=heads, dim_head=dim // heads)
    attn = attn.to("cuda", torch.float16).eval()
    return attn, AttnProcessor2_0


def measure_shape(name, B, H, Nq, Nk, D, calls):
    q = torch.randn(B, H, Nq, D, device="cuda", dtype=torch.float16)
    k = torch.randn(B, H, Nk, D, device="cuda", dtype=torch.float16)
    v = torch.randn_like(k)
    qn, kn, vn = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    res = {}
    res["sdpa"] = host_us(lambda: F.scaled_dot_product_attention(q, k, v), calls)
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        res["sdpa_cudnn"] = host_us(lambda: F.scaled_dot_product_attention(q, k, v), calls)
    res["int8attn_hnd"] = host_us(lambda: int8attn.attention(q, k, v, mode="fast"), calls)
    res["int8attn_nhd"] = host_us(
        lambda: int8attn.attention(qn, kn, vn, mode="fast", layout="NHD"), calls)
    res["torch_op"] = host_us(lambda: torch.ops.int8attn.attention(q, k, v, 3), calls)
    res["sageattn"] = host_us(lambda: int8attn.sageattn(q, k, v), calls)
    # int8attn's split: the C call alone (descriptors packed once), and Python with C stubbed
    o = torch.empty_like(q)
    _fastpath.forward(q, k, v, o, 3, False, None, False, 0, 0)
    s = _fastpath._slots
    ctx = _fastpath._context_handle(q.get_device())
    fn = _fastpath._forward_fn
    res["c_call_only"] = host_us(lambda: fn(ctx, *s.refs, s.params_ref), calls)
    _fastpath._forward_fn = lambda *a: 0
    try:
        res["python_only"] = host_us(lambda: int8attn.attention(q, k, v, mode="fast"), calls)
    finally:
        _fastpath._forward_fn = fn
    # the diffusers module, stock processor vs ours (same module, same inputs)
    dim = H * D
    attn, stock = diffusers_attention(dim, H, dim if Nk != Nq else None)
    if attn is not None:
        x = torch.randn(B, Nq, dim, device="cuda", dtype=torch.float16)
        ctx_states = None if Nk == Nq else torch.randn(B, Nk, dim, device="cuda",
                                                       dtype=torch.float16)
        with torch.no_grad():
            attn.set_processor(stock())
            res["module_stock"] = host_us(lambda: attn(x, ctx_states), calls)
            for route in ("always", "auto"):
                attn.set_processor(int8attn.Int8AttnProcessor(mode="fast", route=route))
                res[f"module_int8attn_{route}"] = host_us(lambda: attn(x, ctx_states), calls)
            if ctx_states is not None:
                attn.set_processor(int8attn.Int8AttnProcessor(mode="fast", route="always",
                                                              cache_text_kv=True))
                res["module_int8attn_text_kv"] = host_us(lambda: attn(x, ctx_states), calls)
    res["excess_vs_sdpa"] = res["int8attn_hnd"] - res["sdpa"]
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=30, help="calls per timed batch")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "int8attn": int8attn.version(),
            "command": " ".join(sys.argv), "calls": args.calls,
            "python": sys.version.split()[0]}
    results = {}
    for shape in SHAPES:
        results[shape[0]] = measure_shape(*shape, calls=args.calls)
        print(f"{shape[0]}: " + ", ".join(f"{k} {v:.1f}" for k, v in results[shape[0]].items()),
              file=sys.stderr, flush=True)
    cols = list(dict.fromkeys(c for r in results.values() for c in r))
    lines = [f"# Host µs per call ({meta['gpu']}, torch {meta['torch']}, "
             f"Python {meta['python']})", "",
             "| shape | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, r in results.items():
        lines.append(f"| {name} | " + " | ".join(f"{r.get(c, float('nan')):.1f}" for c in cols)
                     + " |")
    md = "\n".join(lines) + "\n"
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "host_overhead.json"), "w") as fh:
            json.dump({"meta": meta, "us_per_call": results}, fh, indent=1)
        with open(os.path.join(args.out, "host_overhead.md"), "w") as fh:
            fh.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
