#!/usr/bin/env python3
"""Measure the routing table the diffusers processors decide with (int8attn vs PyTorch SDPA).

For a grid of head dims × query lengths × key lengths (self-attention and the short-key text
cross-attention of SD/SDXL/PixArt/video DiTs), and at the exact attention shapes of the
benchmarked models (``MODEL_SHAPES``), times PyTorch SDPA (its cuDNN backend and its default
choice, which a routed call runs; the faster of the two is "stock") and int8attn end-to-end in
each mode as the diffusers processors call it (FAST with K scales per 64 keys) on
the same fp16 inputs (CUDA-graph replays, median, as ``bench.py``), plus, for short keys,
int8attn against K/V kept quantized in a ``KVCache`` (what the processors' text K/V cache could
save). Writes:

- ``--table PATH``: the table the package ships (``int8attn/routing/sm<cc>-<gpu>.json`` for GPUs
  of the measured one's name, ``sm<cc>.json`` for every GPU of its capability): per mode,
  head dim and batch × heads (12, 24, 48, 96), stock time / int8attn time at each grid point,
  again at lengths that are not multiples of 128 (cuDNN is slower there), and at the models'
  exact shapes;
- ``OUT/route_table.json`` and ``OUT/route_table.md``: every time and ratio, and the short-key
  and mid-size summary.

A full run takes about six minutes on an H200. ``--head-dims D,...`` measures only the grid's
cells of those head dims (after a change to their kernels); ``--merge ... --over DIR`` puts
such runs' cells in place of the same cells of the full table in DIR (the other cells stay as
they were measured). ``--part I/N`` measures every N-th cell from
the I-th (so a run fits a time limit), and ``--merge DIR...`` joins the parts' ``route_table.json``
into the files above, as one run would have written them. ``--merge`` given more than once joins
each run's parts and takes every time of a cell as the geometric mean over the runs (the ratios
follow from those times): runs of one library build on several machines of one GPU model, since
cuDNN's own time moves from machine to machine by several percent (Flux at 1024 px: 0.421–0.453
ms on three H200s, int8attn 0.400–0.402 ms), enough to flip a call near the processors' 1.05
threshold.

A GPU the package has no table for (or a machine of one's own): write the table into a folder
named by ``INT8ATTN_ROUTING_DIR`` and the processors read it there, before the package's own
(``python3 bench/route_table.py --table $INT8ATTN_ROUTING_DIR/my-gpu.json``; a file named
``sm<cc>.json`` would serve every GPU of that capability, any other name only GPUs of the
measured one's name).

Usage: python3 bench/route_table.py [--quick] [--head-dims D,...] [--part I/N] [--out DIR]
                                    [--table PATH]
       python3 bench/route_table.py --merge DIR [DIR...] [--merge DIR...] [--over DIR]
                                    [--out DIR] [--table PATH]
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
import datetime
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import int8attn
from bench import log, time_fn

# Each padded head dim's kernel once at least: 32 and 40 (on Hopper the wgmma kernel's 64 instance
# on fresh K/V), 64, 80 (96), 128, 160, 192, and 256 (224 too); a call reads the smallest grid
# head dim not below its own.
HEAD_DIMS = (32, 40, 64, 80, 128, 160, 192, 256)
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
# The attention layers of the models bench/pipeline.py runs (and PixArt), measured at their own
# shapes: cuDNN's speed moves with how a length fills its tiles and the GPU's waves, so the
# nearest grid point can be off by 20% at one model's shape (Flux at 1024 px, 4608 tokens: 0.85×
# in the grid's 4096 cell, 1.06× in bench.py at its own length). A call of exactly one of these
# shapes (batch × heads, head dim, Nq, Nk) reads its cell instead of the grid.
# (model layer, batch, query heads, head dim, Nq, Nk)
MODEL_SHAPES = (
    ("sd15 4096-token self", 2, 8, 40, 4096, 4096),
    ("sd15 4096-token text", 2, 8, 40, 4096, 77),
    ("sd15 1024-token self", 2, 8, 80, 1024, 1024),
    ("sd15 1024-token text", 2, 8, 80, 1024, 77),
    ("sd15 256-token self", 2, 8, 160, 256, 256),
    ("sd15 256-token text", 2, 8, 160, 256, 77),
    ("sd15 64-token self", 2, 8, 160, 64, 64),
    ("sd15 64-token text", 2, 8, 160, 64, 77),
    ("sdxl 4096-token self", 2, 10, 64, 4096, 4096),
    ("sdxl 4096-token text", 2, 10, 64, 4096, 77),
    ("sdxl 1024-token self", 2, 20, 64, 1024, 1024),
    ("sdxl 1024-token text", 2, 20, 64, 1024, 77),
    ("pixart 1024px self", 2, 16, 72, 4096, 4096),
    ("pixart 1024px text", 2, 16, 72, 4096, 120),
    ("pixart-sigma 1024px text", 2, 16, 72, 4096, 300),
    ("sd3 1024px joint", 2, 24, 64, 4429, 4429),
    ("flux 1024px joint", 1, 24, 128, 4608, 4608),
    ("flux 2048px joint", 1, 24, 128, 16896, 16896),
    ("flux.2 1024px joint", 1, 48, 128, 4608, 4608),
    ("cogvideox 480p joint", 2, 30, 64, 17776, 17776),
    ("wan 480p self", 2, 12, 128, 32760, 32760),
    ("wan 480p text", 2, 12, 128, 32760, 512),
    ("sd3.5 1024px joint", 2, 38, 64, 4429, 4429),
    ("qwen-image 1024px joint", 1, 24, 128, 4224, 4224),
    ("qwen-image 1328px joint", 1, 24, 128, 7017, 7017),
    ("z-image 1024px joint", 1, 30, 128, 4224, 4224),
    ("z-image 1024px image refiner", 1, 30, 128, 4096, 4096),
    ("ltx-video 704x512 self", 2, 32, 64, 7392, 7392),
    ("mochi 848x480 85f joint", 1, 24, 128, 23898, 23898),
    ("hunyuanvideo-1.5 480p joint", 1, 16, 128, 51275, 51275),
)


@dataclass(frozen=True)
class Cell:
    """One measurement: lengths nq + offset and nk + offset (offset 0 or UNALIGNED) at batch ×
    heads; ``full`` times every method (the grid's first level), else the routed modes."""
    batch: int
    heads: int
    d: int
    nq: int
    nk: int
    offset: int = 0
    full: bool = False
    model: str = ""


def grid(quick: bool, head_dims=None):
    """The cells of a run: the grid, then the model shapes; with ``head_dims`` only the grid's
    cells of those head dims (a re-measure after a change to their kernels, see ``--over``)."""
    dims = (64, 128) if quick else head_dims or HEAD_DIMS
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
                        yield Cell(BATCH, heads, d, n_q, n_k, 0, heads == HEADS[0])
                    if level_cell:
                        yield Cell(BATCH, heads, d, n_q, n_k, UNALIGNED)
    if head_dims:
        return
    for name, b, heads, d, n_q, n_k in (MODEL_SHAPES[:1] if quick else MODEL_SHAPES):
        yield Cell(b, heads, d, n_q, n_k, model=name)


def measure(c: Cell) -> dict:
    """One cell's times and ratios."""
    seed = c.nq * 7 + c.nk * 3 + c.d + c.heads + c.offset
    g = torch.Generator(device="cuda").manual_seed(seed)
    lq, lk = c.nq + c.offset, c.nk + c.offset
    q = torch.randn(c.batch, c.heads, lq, c.d, device="cuda", dtype=torch.float16, generator=g)
    k = torch.randn(c.batch, c.heads, lk, c.d, device="cuda", dtype=torch.float16, generator=g)
    v = torch.randn(c.batch, c.heads, lk, c.d, device="cuda", dtype=torch.float16, generator=g)
    full = c.full
    row = {"batch_heads": c.batch * c.heads, "head_dim": c.d, "nq": c.nq, "nk": c.nk,
           "offset": c.offset, "ms": {}, "method": {}}
    if c.model:
        row.update(model=c.model, batch=c.batch)

    def sdpa(backend):
        def fn():
            if backend is None:  # PyTorch's own choice, what a routed call runs
                return F.scaled_dot_product_attention(q, k, v)
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v)
        return fn

    backends = (("cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa", None),
                ("flash", SDPBackend.FLASH_ATTENTION))
    for name, backend in backends if full else backends[:2]:
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
    if c.nk <= 512 and full:  # text K/V quantized once, then reused every step
        for mode in ("balanced", "fast"):
            with int8attn.KVCache(c.batch, c.heads, c.nk, c.d, device="cuda",
                                  mode=mode) as cache:
                cache.append(k, v)
                row["ms"][f"{mode}_cached"], row["method"][f"{mode}_cached"] = time_fn(
                    lambda: cache.forward(q, out=out))
    set_ratios(row)
    return row


def set_ratios(row: dict) -> None:
    """The row's stock time and its ratios, stock / each time, from its times."""
    row["ms"]["stock"] = stock_ms(row["ms"])
    base = row["ms"]["stock"]
    row["ratio"] = {m: (base / t if base and t else None) for m, t in row["ms"].items()}


def row_key(r: dict) -> tuple:
    """What identifies a cell among a run's rows."""
    return (r["batch_heads"], r["head_dim"], r["nq"], r["nk"], r["offset"], r.get("model", ""))


def stock_ms(ms: dict):
    """What int8attn is compared with: the faster of SDPA's cuDNN backend and PyTorch's default
    SDPA (what a routed call runs; PyTorch picks its backend per call, flash attention on most
    GPUs before Hopper), so a table measured on any GPU routes a call to int8attn only where
    it beats the stock path.
    Rows measured before the default was timed have cuDNN alone."""
    times = [t for t in (ms.get("cudnn"), ms.get("sdpa")) if t]
    return min(times) if times else None


def table_json(rows, dims, meta) -> dict:
    """The package's table: per mode, head dim and level of batch × heads, the [nq][nk] grid of
    ratios; a cell not measured at a level takes the first level's ratio; the model shapes'
    cells in ``shapes``."""
    shapes = [{"model": r["model"], "batch_heads": r["batch_heads"], "head_dim": r["head_dim"],
               "nq": r["nq"], "nk": r["nk"],
               "ratio": {m: round(x, 3) for m, x in r["ratio"].items()
                         if m in MODES and x is not None},
               "sdpa_ms": round(stock_ms(r["ms"]), 4)}
              for r in rows if r.get("model")]
    rows = [r for r in rows if not r.get("model")]
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

    def sdpa_ms(d, offset):  # cuDNN's times at the first level (the processors' host margin)
        def t(a, b):
            r = at.get((BATCH * HEADS[0], d, a, b, offset))
            ms = stock_ms(r["ms"]) if r else None
            return round(ms, 4) if ms else None
        return [[t(a, b) for b in nk] for a in nq]

    ratio, ratio_unaligned = {}, {}
    for mode in MODES:
        ratio[mode], ratio_unaligned[mode] = {}, {}
        for d in dims:
            ratio[mode][str(d)] = grids(mode, d, 0)
            ratio_unaligned[mode][str(d)] = grids(mode, d, UNALIGNED, ratio[mode][str(d)])
    return {"device": meta["gpu"], "capability": meta["capability"], "source": meta["source"],
            "measured": meta["date"], "runs": meta.get("runs", 1), "torch": meta["torch"],
            "cudnn": meta["cudnn"],
            "batch_heads": levels, "head_dims": list(dims), "nq": nq, "nk": nk,
            "ratio": ratio, "ratio_unaligned": ratio_unaligned, "unaligned_offset": UNALIGNED,
            "sdpa_ms_batch_heads": BATCH * HEADS[0],
            "sdpa_ms": {str(d): sdpa_ms(d, 0) for d in dims},
            "sdpa_ms_unaligned": {str(d): sdpa_ms(d, UNALIGNED) for d in dims},
            "shapes": shapes,
            "note": "stock time (the faster of SDPA's cuDNN backend and PyTorch's default "
                    "SDPA) / int8attn end-to-end time, fp16, batch "
                    f"{BATCH} x query heads per level; ratio_unaligned: at lengths + "
                    f"{UNALIGNED}, for calls whose lengths are not multiples of 128; cells not "
                    "measured take the aligned table's ratio, else the first level's; shapes: "
                    "cells at models' exact shapes (batch x heads, head dim, Nq, Nk), read "
                    "before the grid; sdpa_ms: the stock ms at the first level (the "
                    "processors' host margin); runs: the runs (machines) whose times were "
                    "averaged (geometric mean); made by bench/route_table.py"}


def markdown(rows, meta) -> str:
    runs = (f"; every time the geometric mean of {meta['runs']} runs (machines)"
            if meta.get("runs", 1) > 1 else "")
    lines = [f"# Routing table: int8attn vs PyTorch SDPA ({meta['gpu']}, {meta['date']})", "",
             f"torch {meta['torch']}, cuDNN {meta['cudnn']}, int8attn {meta['int8attn']}; "
             f"B={BATCH}, H = batch·heads / {BATCH}, fp16; ratio = stock ms / int8attn ms "
             f"(> 1: int8attn faster), stock = the faster of SDPA's cuDNN backend and PyTorch's "
             f"default SDPA (– where not timed); – = not measured at that level; "
             f"command: `{meta['command']}`{runs}", "",
             "| B·H | D | Nq | Nk | cuDNN ms | SDPA ms | flash ms | exact | balanced | fast | "
             "balanced cached | fast cached |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    # (Nq, Nk as run: + UNALIGNED in the rows of the unaligned table)

    def f(x):
        return "—" if x is None else f"{x:.2f}"

    def t(x):
        return "—" if x is None else round(x, 4)

    for r in (r for r in rows if not r.get("model")):
        ms, ra = r["ms"], r["ratio"]
        lines.append(
            f"| {r['batch_heads']} | {r['head_dim']} | {r['nq'] + r['offset']} | "
            f"{r['nk'] + r['offset']} | "
            f"{t(ms.get('cudnn'))} | {t(ms.get('sdpa'))} | {t(ms.get('flash'))} | "
            f"{f(ra.get('exact'))} | {f(ra.get('balanced'))} | {f(ra.get('fast'))} | "
            f"{f(ra.get('balanced_cached'))} | {f(ra.get('fast_cached'))} |")
    models = [r for r in rows if r.get("model")]
    if models:
        lines += ["", "## The models' attention shapes", "",
                  "Measured at each layer's own shape (B, H, lengths); a call of exactly this "
                  "shape reads this cell, not the grid. Routed: where the processors' FAST calls "
                  "go.", "",
                  "| layer | B·H | D | Nq | Nk | stock ms | balanced ms | fast ms | balanced | "
                  "fast | FAST routed to |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in models:
            ms, ra = r["ms"], r["ratio"]
            fast = ra.get("fast")
            lines.append(
                f"| {r['model']} | {r['batch_heads']} | {r['head_dim']} | {r['nq']} | "
                f"{r['nk']} | {t(stock_ms(ms))} | {t(ms.get('balanced'))} | "
                f"{t(ms.get('fast'))} | {f(ra.get('balanced'))} | {f(fast)} | "
                f"{'—' if fast is None else routed_to(fast, stock_ms(ms))} |")
    return "\n".join(lines) + "\n"


def routed_to(ratio: float, ms) -> str:
    """Where the processors' rule (``int8attn._routing.routes_to_sdpa``) sends such a call."""
    from int8attn import _routing

    return "SDPA" if _routing.routes_to_sdpa(ratio, ms) else "int8attn"


def parse_part(text: str):
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--part {text!r}: expected I/N, e.g. 1/2") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"--part {text!r}: I must be in 1..N")
    return i, n


def parse_head_dims(text: str):
    """--head-dims D,D...: head dims of the grid."""
    try:
        dims = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--head-dims {text!r}: expected D,D..., e.g. 32") \
            from None
    bad = [d for d in dims if d not in HEAD_DIMS]
    if bad:
        raise argparse.ArgumentTypeError(f"--head-dims: {bad} not in the grid {HEAD_DIMS}")
    return dims


def merged_rows(dirs, cells):
    """The parts' rows in one run's order (the grid's), refusing gaps and repeats."""
    order = {(c.batch * c.heads, c.d, c.nq, c.nk, c.offset, c.model): i
             for i, c in enumerate(cells)}
    found, meta = {}, None
    for d in dirs:
        path = os.path.join(d, "route_table.json")
        with open(path) as fh:
            part = json.load(fh)
        meta = meta or part["meta"]
        for r in part["rows"]:
            key = row_key(r)
            if key not in order:
                raise SystemExit(f"{path}: a row not in this script's grid: {key}")
            if key in found:
                raise SystemExit(f"{path}: row {key} measured twice (parts overlap)")
            found[key] = r
    missing = [k for k in order if k not in found]
    if missing:
        raise SystemExit(f"--merge: {len(missing)} cells not measured in {dirs}, e.g. "
                         f"{missing[0]} (give every part)")
    return [found[k] for k in sorted(found, key=order.get)], meta


def average_runs(runs):
    """Runs of the same cells (each a list of rows in one order) as one: every time the geometric
    mean of the runs that have it, the stock time and the ratios recomputed from those; each
    run's own times kept in ``ms_runs``."""
    first = runs[0]
    for run in runs[1:]:
        if [row_key(r) for r in run] != [row_key(r) for r in first]:
            raise SystemExit("--merge: the runs measured different cells (a --quick run beside "
                             "a full one, or another version of this script)")
    out = []
    for rows in zip(*runs):
        row = dict(rows[0], ms={}, runs=len(rows), ms_runs=[r["ms"] for r in rows])
        for m in rows[0]["ms"]:
            if m == "stock":
                continue
            ts = [r["ms"].get(m) for r in rows if r["ms"].get(m)]
            row["ms"][m] = math.exp(sum(math.log(t) for t in ts) / len(ts)) if ts else None
        set_ratios(row)
        out.append(row)
    return out


def merged_runs(groups, cells):
    """Each group's parts joined (merged_rows), then the runs averaged (average_runs); the meta
    of the first run, with every run's command and the latest date."""
    runs = [merged_rows(g, cells) for g in groups]
    metas = [m for _, m in runs]
    gpus = sorted({m["gpu"] for m in metas})
    if len(gpus) > 1:
        raise SystemExit(f"--merge: runs on different GPUs ({', '.join(gpus)}): one table is "
                         "one GPU model")
    meta = {k: v for k, v in metas[0].items() if k != "part"}
    if len(runs) == 1:
        return runs[0][0], meta
    meta["date"] = max(m["date"] for m in metas)
    meta["command"] = "; ".join(f"run {i + 1}: {m['command']}" for i, m in enumerate(metas))
    meta["runs"] = len(runs)
    return average_runs([rows for rows, _ in runs]), meta


def replace_cells(rows, meta, base_dir):
    """The rows of the table in ``base_dir`` with these rows in their places: a re-measure of
    some head dims over a full table, whose other cells stay as measured. A head dim the table
    has no cell of joins it (a head dim added to the grid); one it has must match cell for cell."""
    path = os.path.join(base_dir, "route_table.json")
    if not os.path.isfile(path):
        raise SystemExit(f"--over: no {path} (the folder of a full run's table)")
    with open(path) as fh:
        base = json.load(fh)
    if base["meta"]["gpu"] != meta["gpu"]:
        raise SystemExit(f"--over: {path} is of {base['meta']['gpu']}, these runs of "
                         f"{meta['gpu']}")
    new = {row_key(r): r for r in rows}
    keys = {row_key(r) for r in base["rows"]}
    had = {r["head_dim"] for r in base["rows"] if not r.get("model")}
    missing = {k for k in set(new) - keys if k[1] in had}
    if missing:
        raise SystemExit(f"--over: {path} has no cell {min(missing)}")
    added = [r for r in rows if row_key(r) not in keys]
    out_meta = dict(base["meta"])
    verb = "added" if added and len(added) == len(rows) else "replaced"
    out_meta["command"] = (f"{base['meta']['command']}; head dims "
                           f"{', '.join(map(str, meta['head_dims']))} {verb} by: "
                           f"{meta['command']}")
    out_meta["date"] = max(base["meta"]["date"], meta["date"])
    return [new.get(row_key(r), r) for r in base["rows"]] + added, out_meta


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small grid (smoke test)")
    ap.add_argument("--part", type=parse_part, default=None, metavar="I/N",
                    help="measure every N-th cell from the I-th (join the parts with --merge)")
    ap.add_argument("--merge", nargs="+", action="append", default=None, metavar="DIR",
                    help="join the route_table.json of these parts' folders (no GPU needed); "
                         "again for another run: times are averaged over the runs")
    ap.add_argument("--out", default=None, help="results folder (default bench/results/run-*)")
    ap.add_argument("--head-dims", type=parse_head_dims, default=None, metavar="D,D...",
                    help="measure only the grid's cells of these head dims (no model shapes)")
    ap.add_argument("--over", default=None, metavar="DIR",
                    help="with --merge: the merged cells replace the same cells of the table in "
                         "DIR (a --head-dims re-measure over a full run)")
    ap.add_argument("--table", default=None,
                    help="write the package's routing table here (e.g. "
                         "bindings/python/src/int8attn/routing/sm90-h200.json)")
    args = ap.parse_args()
    out_dir = args.out or os.path.join("bench", "results",
                                       "run-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out_dir, exist_ok=True)
    if (args.part or args.head_dims) and args.table:
        ap.error("--table with --part or --head-dims would write a partial table: give it to "
                 "--merge")
    if args.over and not args.merge:
        ap.error("--over replaces cells by merged runs: give --merge")
    head_dims = args.head_dims
    if args.merge:  # the runs' own head dims (a --head-dims run's meta names them)
        for d in (d for group in args.merge for d in group):
            if not os.path.isfile(os.path.join(d, "route_table.json")):
                ap.error(f"--merge: no route_table.json in {d}")
        with open(os.path.join(args.merge[0][0], "route_table.json")) as fh:
            head_dims = json.load(fh)["meta"].get("head_dims")
        if head_dims and not args.over:
            ap.error("runs of some head dims (--head-dims) make a table only --over a full one")
    cells = list(grid(args.quick, head_dims))
    if args.merge:
        rows, meta = merged_runs(args.merge, cells)
        meta["command"] = f"{meta['command']} (parts joined by: {' '.join(sys.argv)})"
        if args.over:
            rows, meta = replace_cells(rows, meta, args.over)
    else:
        meta = {"gpu": torch.cuda.get_device_name(),
                "capability": list(torch.cuda.get_device_capability()),
                "torch": torch.__version__,
                "cudnn": torch.backends.cudnn.version(), "int8attn": int8attn.version(),
                "date": datetime.date.today().isoformat(), "command": " ".join(sys.argv),
                "source": "bench/results/ (route_table.json of the run that wrote this table)"}
        if head_dims:
            meta["head_dims"] = list(head_dims)
        if args.part:
            i, n = args.part
            cells = cells[i - 1::n]
            meta["part"] = f"{i}/{n}"
        rows, t0 = [], time.time()
        for i, c in enumerate(cells):
            rows.append(measure(c))
            r = rows[-1]["ratio"]
            spent = time.time() - t0
            left = spent / (i + 1) * (len(cells) - i - 1)
            log(f"[{i + 1}/{len(cells)} {spent:.0f}s, ~{left:.0f}s left] {c.model + ': ' if c.model else ''}B*H={c.batch * c.heads} D={c.d} "
                f"Nq={c.nq + c.offset} Nk={c.nk + c.offset}: "
                + " ".join(f"{m} {r[m]:.2f}" for m in MODES if r.get(m)))
            torch.cuda.empty_cache()
    dims = sorted({r["head_dim"] for r in rows if not r.get("model")})
    with open(os.path.join(out_dir, "route_table.json"), "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1)
    md = markdown(rows, meta)
    with open(os.path.join(out_dir, "route_table.md"), "w") as fh:
        fh.write(md)
    if args.table:
        meta = dict(meta, source=os.path.relpath(os.path.join(out_dir, "route_table.json")))
        os.makedirs(os.path.dirname(os.path.abspath(args.table)), exist_ok=True)
        with open(args.table, "w") as fh:
            json.dump(table_json(rows, dims, meta), fh, indent=1)
            fh.write("\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
