#!/usr/bin/env python3
"""Measure the routing table the diffusers processors decide with (int8attn vs cuDNN SDPA).

For a grid of head dims × query lengths × key lengths (self-attention and the short-key text
cross-attention of SD/SDXL/PixArt/video DiTs), times PyTorch SDPA with the cuDNN backend and
int8attn end-to-end in each mode as the diffusers processors call it (FAST with K scales per
64 keys) on the same fp16 inputs (CUDA-graph replays, median, as
``bench.py``), plus, for short keys, int8attn against K/V kept quantized in a ``KVCache`` (what
the processors' text K/V cache could save). Writes:

- ``--table PATH``: the table the package ships (``int8attn/routing/sm<cc>.json``): per mode
  and head dim, SDPA-cuDNN time / int8attn time at each grid point;
- ``OUT/route_table.json`` and ``OUT/route_table.md``: every time and ratio, and the short-key
  and mid-size summary.

Usage: python3 bench/route_table.py [--quick] [--out DIR] [--table PATH]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import int8attn
from bench import log, time_fn

HEAD_DIMS = (40, 64, 80, 128, 160)
NQ = (256, 1024, 2048, 4096, 8192, 16384)
NK = (77, 256, 512, 1024, 2048, 4096, 8192, 16384)
BATCH, HEADS = 2, 12  # a CFG batch of 12-head layers: between SD1.5's 8 and Flux's 24 heads
MODES = ("exact", "balanced", "fast")


def grid(quick: bool):
    dims = (64, 128) if quick else HEAD_DIMS
    nq = (1024, 4096) if quick else NQ
    for d in dims:
        for n_q in nq:
            # Short keys at every query length; longer keys up to the query length (self- or
            # joint attention); nothing longer (no diffusion layer attends to more keys than it
            # has queries, but for text cross-attention).
            for n_k in NK:
                if n_k <= 512 or n_k <= n_q:
                    yield d, n_q, n_k


def measure(d: int, n_q: int, n_k: int) -> dict:
    g = torch.Generator(device="cuda").manual_seed(n_q * 7 + n_k * 3 + d)
    q = torch.randn(BATCH, HEADS, n_q, d, device="cuda", dtype=torch.float16, generator=g)
    k = torch.randn(BATCH, HEADS, n_k, d, device="cuda", dtype=torch.float16, generator=g)
    v = torch.randn(BATCH, HEADS, n_k, d, device="cuda", dtype=torch.float16, generator=g)
    row = {"head_dim": d, "nq": n_q, "nk": n_k, "ms": {}, "method": {}}

    def sdpa(backend):
        def fn():
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v)
        return fn

    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        try:
            row["ms"][name], row["method"][name] = time_fn(sdpa(backend))
        except RuntimeError as exc:  # a backend refusing a head dim: recorded, not fatal
            row["ms"][name] = None
            row["method"][name] = f"error: {str(exc).splitlines()[0][:120]}"
    out = torch.empty_like(q)
    for mode in MODES:  # as the processors call it: FAST with K scales per 64 keys
        kg = "block" if mode == "fast" else None
        row["ms"][mode], row["method"][mode] = time_fn(
            lambda: int8attn.attention(q, k, v, mode=mode, out=out, k_granularity=kg))
    if n_k <= 512:  # text K/V quantized once, then reused every step
        for mode in ("balanced", "fast"):
            with int8attn.KVCache(BATCH, HEADS, n_k, d, device="cuda", mode=mode) as cache:
                cache.append(k, v)
                row["ms"][f"{mode}_cached"], row["method"][f"{mode}_cached"] = time_fn(
                    lambda: cache.forward(q, out=out))
    base = row["ms"]["cudnn"]
    row["ratio"] = {m: (base / t if base and t else None) for m, t in row["ms"].items()}
    return row


def table_json(rows, dims, meta) -> dict:
    nq = sorted({r["nq"] for r in rows})
    nk = sorted({r["nk"] for r in rows})
    at = {(r["head_dim"], r["nq"], r["nk"]): r for r in rows}
    ratio = {}
    for mode in MODES:
        ratio[mode] = {}
        for d in dims:
            ratio[mode][str(d)] = [
                [(round(at[(d, a, b)]["ratio"][mode], 3)
                  if (d, a, b) in at and at[(d, a, b)]["ratio"][mode] is not None else None)
                 for b in nk] for a in nq]
    cap = torch.cuda.get_device_capability()
    return {"device": meta["gpu"], "capability": list(cap), "source": meta["source"],
            "measured": meta["date"], "torch": meta["torch"], "cudnn": meta["cudnn"],
            "batch_heads": [BATCH, HEADS], "head_dims": list(dims), "nq": nq, "nk": nk,
            "ratio": ratio,
            "note": "SDPA-cuDNN time / int8attn end-to-end time, fp16, "
                    f"B={BATCH} H={HEADS}; made by bench/route_table.py"}


def markdown(rows, meta) -> str:
    lines = [f"# Routing table: int8attn vs cuDNN SDPA ({meta['gpu']}, {meta['date']})", "",
             f"torch {meta['torch']}, cuDNN {meta['cudnn']}, int8attn {meta['int8attn']}; "
             f"B={BATCH} H={HEADS} fp16; ratio = cuDNN ms / int8attn ms (> 1: int8attn faster); "
             f"command: `{meta['command']}`", "",
             "| D | Nq | Nk | cuDNN ms | flash ms | exact | balanced | fast | balanced cached | fast cached |",
             "|---|---|---|---|---|---|---|---|---|---|"]

    def f(x):
        return "—" if x is None else f"{x:.2f}"

    for r in rows:
        ms, ra = r["ms"], r["ratio"]
        lines.append(
            f"| {r['head_dim']} | {r['nq']} | {r['nk']} | "
            f"{ms['cudnn'] if ms['cudnn'] is None else round(ms['cudnn'], 4)} | "
            f"{ms['flash'] if ms['flash'] is None else round(ms['flash'], 4)} | "
            f"{f(ra.get('exact'))} | {f(ra.get('balanced'))} | {f(ra.get('fast'))} | "
            f"{f(ra.get('balanced_cached'))} | {f(ra.get('fast_cached'))} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small grid (smoke test)")
    ap.add_argument("--out", default=None, help="results folder (default bench/results/run-*)")
    ap.add_argument("--table", default=None,
                    help="write the package's routing table here (e.g. "
                         "bindings/python/src/int8attn/routing/sm90.json)")
    args = ap.parse_args()
    out_dir = args.out or os.path.join("bench", "results",
                                       "run-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out_dir, exist_ok=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "int8attn": int8attn.version(),
            "date": datetime.date.today().isoformat(), "command": " ".join(sys.argv),
            "source": "bench/results/ (route_table.json of the run that wrote this table)"}
    cells = list(grid(args.quick))
    rows, t0 = [], time.time()
    for i, (d, n_q, n_k) in enumerate(cells):
        rows.append(measure(d, n_q, n_k))
        r = rows[-1]["ratio"]
        log(f"[{i + 1}/{len(cells)} {time.time() - t0:.0f}s] D={d} Nq={n_q} Nk={n_k}: "
            + " ".join(f"{m} {r[m]:.2f}" for m in MODES if r.get(m)))
        torch.cuda.empty_cache()
    dims = sorted({r["head_dim"] for r in rows})
    with open(os.path.join(out_dir, "route_table.json"), "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1)
    md = markdown(rows, meta)
    with open(os.path.join(out_dir, "route_table.md"), "w") as fh:
        fh.write(md)
    if args.table:
        os.makedirs(os.path.dirname(os.path.abspath(args.table)), exist_ok=True)
        with open(args.table, "w") as fh:
            json.dump(table_json(rows, dims, meta), fh, indent=1)
            fh.write("\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
