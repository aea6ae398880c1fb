#!/usr/bin/env python3
"""Measure the routing table the diffusers processors decide with (int8attn vs cuDNN SDPA).

For a grid of head dims × query lengths × key lengths (self-attention and the short-key text
cross-attention of SD/SDXL/PixArt/video DiTs), times PyTorch SDPA with the cuDNN backend and
int8attn end-to-end in each mode as the diffusers processors call it (FAST with K scales per
64 keys) on the same fp16 inputs (CUDA-graph replays, median, as
``bench.py``), plus, for short keys, int8attn against K/V kept quantized in a ``KVCache`` (what
the processors' text K/V cache could save). Writes:

- ``--table PATH``: the table the package ships (``int8attn/routing/sm<cc>.json``): per mode,
  head dim and batch × heads (12, 24, 48, 96), SDPA-cuDNN time / int8attn time at each grid point,
  and again at lengths that are not multiples of 128 (cuDNN is slower there);
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
BATCH = 2  # a CFG batch
# Query heads per level of batch × heads, the first the full grid: 12 (24 heads in all: Flux
# and Wan), 6 (12: calls with 12-23, SD1.5's 16 and SDXL's 20, read it), 24 (48: SD3) and 48
# (96: CogVideoX). int8attn's fixed costs per call weigh less with more heads, so the ratio at a
# shape grows with them.
HEADS = (12, 6, 24, 48)
MODES = ("exact", "balanced", "fast")
# Other levels than the first only where int8attn can win (self- or joint attention of 1K+ keys,
# up to 8K queries) and only the modes the processors route by (EXACT always goes to SDPA); the
# other cells take the first level's ratio.
LEVEL_NQ = (2048, 4096, 8192)
LEVEL_MODES = ("balanced", "fast")
# cuDNN runs lengths that are not multiples of 128 at ~20% less speed (H100, D=64: 390 against
# 470 TFLOPS at 4096, 4429 tokens) and int8attn does not, so joint attention's image + text
# tokens (SD3: 4096 + 333) can win where the power-of-two lengths lose. Those cells are measured
# again at lengths + UNALIGNED, for calls whose lengths are not multiples of 128.
UNALIGNED = 77


def grid(quick: bool):
    dims = (64, 128) if quick else HEAD_DIMS
    nq = (1024, 4096) if quick else NQ
    for heads in (HEADS[:2] if quick else HEADS):
        for d in dims:
            for n_q in nq:
                # Short keys at every query length; longer keys up to the query length (self- or
                # joint attention); nothing longer (no diffusion layer attends to more keys than
                # it has queries, but for text cross-attention).
                for n_k in NK:
                    if not (n_k <= 512 or n_k <= n_q):
                        continue
                    level_cell = (n_q in LEVEL_NQ or quick) and 1024 <= n_k <= n_q
                    if heads == HEADS[0] or level_cell:
                        yield heads, d, n_q, n_k, 0
                    if level_cell:
                        yield heads, d, n_q, n_k, UNALIGNED


def measure(heads: int, d: int, n_q: int, n_k: int, offset: int) -> dict:
    """One grid cell: lengths n_q + offset and n_k + offset (offset 0 or UNALIGNED)."""
    full = heads == HEADS[0] and offset == 0  # every method once; the routed modes otherwise
    g = torch.Generator(device="cuda").manual_seed(n_q * 7 + n_k * 3 + d + heads + offset)
    lq, lk = n_q + offset, n_k + offset
    q = torch.randn(BATCH, heads, lq, d, device="cuda", dtype=torch.float16, generator=g)
    k = torch.randn(BATCH, heads, lk, d, device="cuda", dtype=torch.float16, generator=g)
    v = torch.randn(BATCH, heads, lk, d, device="cuda", dtype=torch.float16, generator=g)
    row = {"batch_heads": BATCH * heads, "head_dim": d, "nq": n_q, "nk": n_k, "offset": offset,
           "ms": {}, "method": {}}

    def sdpa(backend):
        def fn():
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v)
        return fn

    backends = (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION))
    for name, backend in backends if full else backends[:1]:
        try:
            row["ms"][name], row["method"][name] = time_fn(sdpa(backend))
        except RuntimeError as exc:  # a backend refusing a head dim: recorded, not fatal
            row["ms"][name] = None
            row["method"][name] = f"error: {str(exc).splitlines()[0][:120]}"
    out = torch.empty_like(q)
    for mode in MODES if full else LEVEL_MODES:  # as the processors call it: FAST with K
        # scales per 64 keys
        kg = "block" if mode == "fast" else None
        row["ms"][mode], row["method"][mode] = time_fn(
            lambda: int8attn.attention(q, k, v, mode=mode, out=out, k_granularity=kg))
    if n_k <= 512 and full:  # text K/V quantized once, then reused every step
        for mode in ("balanced", "fast"):
            with int8attn.KVCache(BATCH, heads, n_k, d, device="cuda", mode=mode) as cache:
                cache.append(k, v)
                row["ms"][f"{mode}_cached"], row["method"][f"{mode}_cached"] = time_fn(
                    lambda: cache.forward(q, out=out))
    base = row["ms"]["cudnn"]
    row["ratio"] = {m: (base / t if base and t else None) for m, t in row["ms"].items()}
    return row


def table_json(rows, dims, meta) -> dict:
    """The package's table: per mode, head dim and level of batch × heads, the [nq][nk] grid of
    ratios; a cell not measured at a level takes the first level's ratio."""
    nq = sorted({r["nq"] for r in rows})
    nk = sorted({r["nk"] for r in rows})
    levels = sorted({r["batch_heads"] for r in rows})
    at = {(r["batch_heads"], r["head_dim"], r["nq"], r["nk"], r["offset"]): r for r in rows}

    def cell(bh, mode, d, a, b, offset):
        r = at.get((bh, d, a, b, offset))
        x = r["ratio"].get(mode) if r else None
        return round(x, 3) if x is not None else None

    def grids(mode, d, offset, aligned=None):
        # a cell not measured: the aligned table's at that level (for the unaligned one), else
        # the first level's
        def level(i, first):
            return [[next((x for x in (cell(levels[i], mode, d, a, b, offset),
                                       aligned[i][ia][ib] if aligned else None,
                                       first[ia][ib] if first else None) if x is not None), None)
                     for ib, b in enumerate(nk)] for ia, a in enumerate(nq)]

        base = levels.index(BATCH * HEADS[0])
        out = [None] * len(levels)
        out[base] = level(base, None)
        for i in range(len(levels)):
            if i != base:
                out[i] = level(i, out[base])
        return out

    ratio, ratio_unaligned = {}, {}
    for mode in MODES:
        ratio[mode], ratio_unaligned[mode] = {}, {}
        for d in dims:
            ratio[mode][str(d)] = grids(mode, d, 0)
            ratio_unaligned[mode][str(d)] = grids(mode, d, UNALIGNED, ratio[mode][str(d)])
    cap = torch.cuda.get_device_capability()
    return {"device": meta["gpu"], "capability": list(cap), "source": meta["source"],
            "measured": meta["date"], "torch": meta["torch"], "cudnn": meta["cudnn"],
            "batch_heads": levels, "head_dims": list(dims), "nq": nq, "nk": nk,
            "ratio": ratio, "ratio_unaligned": ratio_unaligned, "unaligned_offset": UNALIGNED,
            "note": "SDPA-cuDNN time / int8attn end-to-end time, fp16, batch "
                    f"{BATCH} x query heads per level; ratio_unaligned: at lengths + "
                    f"{UNALIGNED}, for calls whose lengths are not multiples of 128; cells not "
                    "measured take the aligned table's ratio, else the first level's; made by "
                    "bench/route_table.py"}


def markdown(rows, meta) -> str:
    lines = [f"# Routing table: int8attn vs cuDNN SDPA ({meta['gpu']}, {meta['date']})", "",
             f"torch {meta['torch']}, cuDNN {meta['cudnn']}, int8attn {meta['int8attn']}; "
             f"B={BATCH}, H = batch·heads / {BATCH}, fp16; ratio = cuDNN ms / int8attn ms "
             f"(> 1: int8attn faster); – = not measured at that level; "
             f"command: `{meta['command']}`", "",
             "| B·H | D | Nq | Nk | cuDNN ms | flash ms | exact | balanced | fast | balanced cached | fast cached |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    # (Nq, Nk as run: + UNALIGNED in the rows of the unaligned table)

    def f(x):
        return "—" if x is None else f"{x:.2f}"

    def t(x):
        return "—" if x is None else round(x, 4)

    for r in rows:
        ms, ra = r["ms"], r["ratio"]
        lines.append(
            f"| {r['batch_heads']} | {r['head_dim']} | {r['nq'] + r['offset']} | "
            f"{r['nk'] + r['offset']} | "
            f"{t(ms.get('cudnn'))} | {t(ms.get('flash'))} | "
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
    for i, (heads, d, n_q, n_k, offset) in enumerate(cells):
        rows.append(measure(heads, d, n_q, n_k, offset))
        r = rows[-1]["ratio"]
        log(f"[{i + 1}/{len(cells)} {time.time() - t0:.0f}s] B*H={BATCH * heads} D={d} "
            f"Nq={n_q + offset} Nk={n_k + offset}: "
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
