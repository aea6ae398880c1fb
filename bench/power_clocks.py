#!/usr/bin/env python3
"""SM clock and board power while one attention configuration runs back to back: is a kernel
held below its clock by the board's power cap? Runs each method for a few seconds per shape,
sampling `nvidia-smi` every 100 ms (the first second dropped), and prints one line per
(shape, method): time per call, median SM clock against the maximum, median power against the
limit, and the active clock-event reasons (0x4: software power cap). Writes JSON with --out.

    python3 bench/power_clocks.py [--shapes square_8k_d128,flux_1024px] [--seconds 6] [--out DIR]

Needs torch with CUDA, nvidia-smi and the int8attn package (as bench/bench.py).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(__file__))
import bench  # noqa: E402  (shape table)
import int8attn  # noqa: E402

QUERY = ("clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,"
         "clocks_event_reasons.active")


def sample(fn, seconds: float) -> dict:
    """Run fn in batches of 20 calls for `seconds` while nvidia-smi samples the board."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    try:
        smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}",
                                "--format=csv,noheader,nounits", "-lms", "100"],
                               stdout=subprocess.PIPE, text=True)
    except FileNotFoundError:
        sys.exit("power_clocks: nvidia-smi not found (it samples the clocks and power)")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0, calls = time.time(), 0
    start.record()
    while time.time() - t0 < seconds:
        for _ in range(20):
            fn()
        calls += 20
        torch.cuda.synchronize()
    end.record()
    torch.cuda.synchronize()
    smi.terminate()
    rows = [line.split(", ") for line in smi.communicate()[0].strip().splitlines()[10:]]
    if not rows:
        raise RuntimeError("nvidia-smi returned no samples; run longer (--seconds)")

    def median(i: int) -> float:
        values = sorted(float(r[i]) for r in rows)
        return values[len(values) // 2]

    return {"ms_per_call": start.elapsed_time(end) / calls, "sm_clock_mhz": median(0),
            "sm_clock_max_mhz": float(rows[0][1]), "power_w": median(2),
            "power_limit_w": float(rows[0][3]), "temperature_c": float(rows[-1][4]),
            "clock_event_reasons": sorted({r[5] for r in rows}), "samples": len(rows)}


def methods_for(ctx, b: int, hq: int, hkv: int, nq: int, nk: int, d: int) -> dict:
    """cuDNN's fp16 SDPA and int8attn's modes on one set of random inputs."""
    q = torch.randn(b, hq, nq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, hkv, nk, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, hkv, nk, d, device="cuda", dtype=torch.float16)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=hq != hkv)

    return {
        "cudnn_fp16": cudnn,
        "int8attn_fast_kblock": lambda: int8attn.attention(
            q, k, v, mode="fast", k_granularity="block", context=ctx),
        "int8attn_fast": lambda: int8attn.attention(q, k, v, mode="fast", context=ctx),
        "int8attn_balanced": lambda: int8attn.attention(q, k, v, mode="balanced", context=ctx),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="square_8k_d128,flux_1024px")
    ap.add_argument("--seconds", type=float, default=6.0, help="run time per (shape, method)")
    ap.add_argument("--out", default=None, help="folder for power_clocks.json")
    args = ap.parse_args()
    table = {s[0]: s[1:] for s in bench.SQUARE + bench.DIFFUSION}
    ctx = int8attn.Context()
    results = []
    for name in args.shapes.split(","):
        if name not in table:
            sys.exit(f"unknown shape {name!r}; known: {', '.join(table)}")
        b, hq, hkv, nq, nk, d = table[name]
        methods = methods_for(ctx, b, hq, hkv, nq, nk, d)
        for method, fn in methods.items():
            r = {"shape": name, "method": method, **sample(fn, args.seconds)}
            r["tops"] = 4 * b * hq * nq * nk * d / (r["ms_per_call"] * 1e-3) / 1e12
            results.append(r)
            print(f"{name:16s} {method:22s} {r['ms_per_call']:8.3f} ms {r['tops']:7.1f} TOPS  "
                  f"SM {r['sm_clock_mhz']:.0f}/{r['sm_clock_max_mhz']:.0f} MHz  "
                  f"{r['power_w']:.0f}/{r['power_limit_w']:.0f} W  "
                  f"reasons {','.join(r['clock_event_reasons'])}", flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                "cudnn": torch.backends.cudnn.version(), "int8attn": int8attn.__version__,
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "command": "python3 bench/power_clocks.py " + " ".join(sys.argv[1:])}
        with open(os.path.join(args.out, "power_clocks.json"), "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
