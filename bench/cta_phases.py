#!/usr/bin/env python3
"""Where a CTA of the sm90a attention kernel spends its time: per-phase clocks of every CTA.

Needs a profiling build (cmake -DINT8ATTN_CTA_CLOCKS=ON: cuda/sm90/cta_clocks.cuh), whose
kernel records SM cycles at its phase boundaries. For each shape and mode this times the call
end to end and torch SDPA (CUDA events, 20 calls each), then runs one call with the clocks
reset and reads back every CTA's row. Per CTA (medians and means over the grid):

- ``prepared``: entry to past the wait for the preparation's kernels (the barrier set-up and,
  for the first wave, the wait itself);
- ``q_ready``: from there to Q quantized into shared memory (the consumers' named barrier);
  where Q comes by TMA, also ``q_landed`` (entry to the first consumer warp's raw rows landed)
  and ``q_quantize`` (from there to the named barrier);
- ``first_tile``: from there to the first K/V stage landed;
- ``loop``: the key loop (every tile but the first's wait), also per tile;
- ``epilogue``: O's normalisation and stores;
- ``launch_gap``: on one SM, a CTA's entry after the previous CTA's end (globaltimer).

Usage: python3 bench/cta_phases.py [--modes fast,balanced] [--shapes NAME=B:Hq:Hkv:Nq:Nk:D,...]
       [--k-granularity block] [--out DIR]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
import bench  # noqa: E402  (shape parsing)
import int8attn  # noqa: E402
from int8attn import _lib  # noqa: E402

# The image, mid-size, short-key and long shapes the per-CTA fixed cost matters at.
DEFAULT_SHAPES = ("flux=1:24:24:4608:4608:128,sd3=2:24:24:4429:4429:64,"
                  "sdxl_4k=2:10:10:4096:4096:64,mid_1k_d64=2:20:20:1024:1024:64,"
                  "mid_1k_d128=1:24:24:1024:1024:128,mid_2k_d128=1:24:24:2048:2048:128,"
                  "wan_text=2:12:12:32760:512:128,square_8k_d128=1:16:16:8192:8192:128")
MAX_CTAS, SLOTS = 65536, 16
(ENTRY_NS, ENTRY, SM, PREPARED, TILES, Q_READY, FIRST_TILE, LOOP_DONE, DONE,
 DONE_NS, Q_LANDED) = range(11)


def clocks_fn():
    fn = getattr(_lib.lib(), "int8attn_debug_cta_clocks", None)
    if fn is None:
        sys.exit("cta_phases: this libint8attn has no CTA clocks; build it with "
                 "cmake -DINT8ATTN_CTA_CLOCKS=ON and point INT8ATTN_LIBRARY at it")
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def event_ms(fn, calls: int = 20) -> float:
    for _ in range(3):
        fn()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(calls):
        fn()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) / calls


def summarise(rows: np.ndarray) -> dict:
    rows = rows[(rows[:, ENTRY_NS] != 0) & (rows[:, DONE] != 0)]
    ns = (rows[:, DONE_NS] - rows[:, ENTRY_NS]).astype(float)
    cycles = (rows[:, DONE] - rows[:, ENTRY]).astype(float)
    ghz = float(np.median(cycles[ns > 0] / ns[ns > 0]))

    def us(a, b):
        return (rows[:, b] - rows[:, a]).astype(float) / ghz / 1e3
    phases = {"prepared": us(ENTRY, PREPARED), "q_ready": us(PREPARED, Q_READY),
              "q_landed": us(ENTRY, Q_LANDED), "q_quantize": us(Q_LANDED, Q_READY),
              "first_tile": us(Q_READY, FIRST_TILE), "loop": us(FIRST_TILE, LOOP_DONE),
              "epilogue": us(LOOP_DONE, DONE), "cta": us(ENTRY, DONE)}
    tiles = rows[:, TILES]
    gaps = []
    for sm in np.unique(rows[:, SM]):
        r = rows[rows[:, SM] == sm]
        r = r[np.argsort(r[:, ENTRY_NS])]
        gaps += list((r[1:, ENTRY_NS] - r[:-1, DONE_NS]).astype(float) / 1e3)
    many = tiles > 1
    res = {"ctas": int(len(rows)), "sms": int(len(np.unique(rows[:, SM]))), "sm_ghz": ghz,
           "kernel_span_us": float((rows[:, DONE_NS].max() - rows[:, ENTRY_NS].min()) / 1e3),
           "tiles_median": float(np.median(tiles)),
           "loop_us_per_tile": (float(np.median(phases["loop"][many] / (tiles[many] - 1)))
                                if many.any() else None),
           "launch_gap_us_median": float(np.median(gaps)) if gaps else None}
    if not (rows[:, Q_LANDED] != 0).all():  # Q by lanes, not by TMA: no landing stamp
        del phases["q_landed"], phases["q_quantize"]
    for name, x in phases.items():
        res[f"{name}_us_median"] = float(np.median(x))
        res[f"{name}_us_mean"] = float(np.mean(x))
    loop_part = phases["loop"].sum() / phases["cta"].sum()
    res["fixed_share"] = float(1.0 - loop_part)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=DEFAULT_SHAPES,
                    help="comma-separated names from bench.py, or NAME=B:Hq:Hkv:Nq:Nk:D")
    ap.add_argument("--modes", default="fast,balanced")
    ap.add_argument("--k-granularity", choices=("token", "block"), default="block",
                    help="K scales of the calls (default: block, as the processors run)")
    ap.add_argument("--out", default=None, help="folder for cta_phases.json and .md")
    args = ap.parse_args()
    modes = args.modes.split(",")
    bad = [m for m in modes if m not in ("fast", "balanced")]
    if bad:
        ap.error(f"--modes: {bad} (the sm90a kernel runs fast and balanced)")
    try:
        shapes = [bench.named_shape(spec) for spec in args.shapes.split(",")]
    except ValueError as e:
        ap.error(str(e))
    clocks = clocks_fn()
    buf = np.zeros(MAX_CTAS * SLOTS, dtype=np.uint64)
    results = {}
    for name, (B, Hq, Hkv, Nq, Nk, D) in shapes:
        torch.manual_seed(0)
        q = torch.randn(B, Hq, Nq, D, device="cuda", dtype=torch.float16)
        k = torch.randn(B, Hkv, Nk, D, device="cuda", dtype=torch.float16)
        v = torch.randn_like(k)
        sdpa_ms = event_ms(lambda: F.scaled_dot_product_attention(q, k, v,
                                                                  enable_gqa=Hq != Hkv))
        for mode in modes:
            def call():
                return int8attn.attention(q, k, v, mode=mode, k_granularity=args.k_granularity)
            call_ms = event_ms(call)
            torch.cuda.synchronize()
            if clocks(None, 1) != 0:
                sys.exit("cta_phases: resetting the clocks failed")
            call()
            torch.cuda.synchronize()
            if clocks(buf.ctypes.data, 0) != 0:
                sys.exit("cta_phases: reading the clocks failed")
            res = summarise(buf.reshape(MAX_CTAS, SLOTS).astype(np.int64))
            res.update(shape=[B, Hq, Hkv, Nq, Nk, D], call_ms=call_ms, sdpa_ms=sdpa_ms)
            results[f"{name}/{mode}"] = res
            print(f"{name} {mode}: call {call_ms:.4f} ms (SDPA {sdpa_ms:.4f}), "
                  f"{res['ctas']} CTAs, CTA {res['cta_us_median']:.2f} µs = prepared "
                  f"{res['prepared_us_median']:.2f} + Q {res['q_ready_us_median']:.2f} + "
                  f"first tile {res['first_tile_us_median']:.2f} + loop "
                  f"{res['loop_us_median']:.2f} + epilogue {res['epilogue_us_median']:.2f}; "
                  f"gap {res['launch_gap_us_median'] or 0:.2f}", flush=True)
    cols = ["ctas", "tiles_median", "cta_us_median", "prepared_us_median", "q_ready_us_median",
            "q_landed_us_median", "q_quantize_us_median",
            "first_tile_us_median", "loop_us_median", "loop_us_per_tile", "epilogue_us_median",
            "launch_gap_us_median", "fixed_share", "call_ms", "sdpa_ms"]
    lines = [f"# Per-CTA phases ({torch.cuda.get_device_name()}, K scales per "
             f"{args.k_granularity}; medians over the grid, µs)", "",
             "| shape/mode | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for key, r in results.items():
        cells = [f"{r[c]:.3f}" if isinstance(r.get(c), float) else str(r.get(c, "")) for c in cols]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    md = "\n".join(lines) + "\n"
    print(md)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                "cudnn": torch.backends.cudnn.version(), "command": " ".join(sys.argv)}
        with open(os.path.join(args.out, "cta_phases.json"), "w") as fh:
            json.dump({"meta": meta, "results": results}, fh, indent=1)
        with open(os.path.join(args.out, "cta_phases.md"), "w") as fh:
            fh.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
