#!/usr/bin/env python3
"""Host time per Python attention call: int8attn's entry points against torch SDPA's.

An eager diffusion step makes hundreds of attention calls; each costs host time before its
kernels are queued. This measures that cost alone: the GPU is first held busy by a long sleep
kernel, then N calls are issued and timed on the host (no synchronisation inside the loop; the
queue never drains, so no call waits for the device), then the device is synchronised; the
median call of 15 such batches' worth. A shape's entry points take turns call by call, each
call timed alone and each batch in another order, so a drift of the host's speed during the run
(a GPU VM's host moves by tens of µs a call within seconds) and whatever the call before leaves
in the caches reach them all alike.

Entry points: torch SDPA (default backends, and pinned to cuDNN), ``int8attn.attention`` (HND
and NHD), ``torch.ops.int8attn.attention``, ``int8attn.sageattn``, a diffusers ``Attention``
module with its stock ``AttnProcessor2_0`` and with ``Int8AttnProcessor`` (when diffusers is
installed; module time includes the projections, so compare the two), and a split of
int8attn's own cost in turns of its own: `attention` into a given output (no allocation), the
descriptor packing and C call alone (``_fastpath.forward``), the C call alone (validation,
planning, launches; descriptors packed once), and Python with the C call stubbed.

Usage: python3 bench/host_overhead.py [--calls 30] [--out DIR]
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import random
import statistics
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


def host_us(fns, calls: int, repeats: int = 15):
    """Host microseconds per call of each function of ``fns`` (name -> fn), device kept busy:
    each batch issues ``calls`` calls of every function, taking turns call by call, each call
    timed alone, each batch in another (seeded) order of the functions; the result is a
    function's median call over ``repeats`` batches. Turns call by
    call put every function under the same host conditions (the host of a GPU VM drifts by tens
    of µs a call within seconds); the median is robust to the preemptions a minimum of batch
    means was not.

    Batches stay small: with the device held, a few hundred queued launches fill the driver's
    launch queue and the host then waits for the device, which is not host time (a diffusers
    module call is ~10 launches, so a batch of four modules takes ``calls // 4`` turns)."""
    turns = max(1, calls // len(fns)) if len(fns) > 2 else calls
    for fn in fns.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    samples = {name: [] for name in fns}
    items = list(fns.items())
    rng = random.Random(0)
    for _ in range(repeats * max(1, calls // turns)):
        torch.cuda._sleep(int(1e8))  # ~60 ms of device work: no call waits for the device
        # Each batch takes the functions in another order, so none always follows the same one
        # (a call may run colder after another library's code than after its own).
        order = items[:]
        rng.shuffle(order)
        for _ in range(turns):
            for name, fn in order:
                t0 = time.perf_counter_ns()
                fn()
                samples[name].append(time.perf_counter_ns() - t0)
        torch.cuda.synchronize()
    return {name: statistics.median(v) / 1e3 for name, v in samples.items()}


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
    res = host_us({
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
        "int8attn_hnd": lambda: int8attn.attention(q, k, v, mode="fast"),
        "int8attn_nhd": lambda: int8attn.attention(qn, kn, vn, mode="fast", layout="NHD"),
        "torch_op": lambda: torch.ops.int8attn.attention(q, k, v, 3),
        "sageattn": lambda: int8attn.sageattn(q, k, v),
    }, calls)
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):  # the context outside the timed calls
        res.update(host_us({"sdpa_cudnn": lambda: F.scaled_dot_product_attention(q, k, v)},
                           calls))
    # int8attn's split, in turns of their own: `attention` into a given output (no allocation),
    # the packing and C call alone (_fastpath.forward), the C call alone (descriptors packed
    # once), and Python with the C call stubbed (below)
    o = torch.empty_like(q)
    _fastpath.forward(q, k, v, o, 3, False, None, False, 0, 0)
    s = _fastpath._slots
    ctx = _fastpath._context_handle(q.get_device())
    fn = _fastpath._forward_fn
    res.update(host_us({
        "int8attn_hnd_out": lambda: int8attn.attention(q, k, v, mode="fast", out=o),
        "pack_and_c_call": lambda: _fastpath.forward(q, k, v, o, 3, False, None, False, 0, 0),
        "c_call_only": lambda: fn(ctx, *s.refs, s.params_ref)}, calls))
    _fastpath._forward_fn = lambda *a: 0
    try:
        res.update(host_us({"python_only": lambda: int8attn.attention(q, k, v, mode="fast")},
                           calls))
    finally:
        _fastpath._forward_fn = fn
    # the diffusers module: one copy per processor (same weights, same inputs), stock first
    dim = H * D
    attn, stock = diffusers_attention(dim, H, dim if Nk != Nq else None)
    if attn is not None:
        x = torch.randn(B, Nq, dim, device="cuda", dtype=torch.float16)
        ctx_states = None if Nk == Nq else torch.randn(B, Nk, dim, device="cuda",
                                                       dtype=torch.float16)
        processors = {"module_stock": stock(),
                      "module_int8attn_always": int8attn.Int8AttnProcessor(mode="fast",
                                                                           route="always"),
                      "module_int8attn_auto": int8attn.Int8AttnProcessor(mode="fast",
                                                                         route="auto")}
        if ctx_states is not None:
            processors["module_int8attn_text_kv"] = int8attn.Int8AttnProcessor(
                mode="fast", route="always", cache_text_kv=True)
        modules = {}
        for name, proc in processors.items():
            modules[name] = copy.deepcopy(attn)
            modules[name].set_processor(proc)
        with torch.no_grad():
            res.update(host_us({name: (lambda m=m: m(x, ctx_states))
                                for name, m in modules.items()}, calls))
    res["excess_vs_sdpa"] = res["int8attn_hnd"] - res["sdpa"]
    if "module_stock" in res:
        res["module_excess_vs_stock"] = res["module_int8attn_auto"] - res["module_stock"]
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
