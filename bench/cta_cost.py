#!/usr/bin/env python3
"""What one CTA of the Hopper attention kernel costs beside its key tiles: the kernel's device time
(torch profiler, mean of 30 calls) over grids of whole waves (one CTA per SM), with 9 to 144
key tiles per CTA, fitted as kernel = W + waves · (c + t · tiles). c is the fixed cost of a CTA
(launch, Q prologue, pipeline ramp, epilogue), t the time of one 128-key tile in the steady
state, W what is left (the kernel's wait behind the K/V preparation, which programmatic launch
counts in its time). FAST with K scales per 64-key block, fp16, Nq = Nk, head dim 128 (two
consumer warpgroups, 128 rows a CTA) and 64 (three, 192 rows).

    PYTHONPATH=bindings/python/src INT8ATTN_LIBRARY=build/lib/libint8attn.so \\
        python3 bench/cta_cost.py [--out results.json]
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import int8attn  # noqa: E402
from profile_forward import kernel_device_times  # noqa: E402

# (head dim, tokens, rows per CTA): tokens are whole multiples of the CTA's rows.
SERIES = {128: (128, [1152, 2304, 4608, 9216, 18432]), 64: (192, [2112, 4224, 8448])}


def attention_us(call, calls: int = 30) -> float:
    per_kernel, _ = kernel_device_times(call, calls, warmup=5)
    times = [t for name, ts in per_kernel.items() if "attention" in name for t in ts]
    if not times:
        sys.exit("no attention kernel recorded")
    return sum(times) / calls


def fit(points):
    """Least squares of us = W + waves·c + waves·tiles·t over (waves, tiles, us)."""
    import numpy as np

    a = np.array([[1.0, w, w * n] for w, n, _ in points])
    b = np.array([u for _, _, u in points])
    (W, c, t), *_ = np.linalg.lstsq(a, b, rcond=None)
    return float(W), float(c), float(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the measurements and the fit as JSON")
    args = ap.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    ctx = int8attn.Context()
    result = {"device": torch.cuda.get_device_name(0), "sms": sms, "series": {}}
    for D, (rows, lengths) in SERIES.items():
        points = []
        for N in lengths:
            m_tiles = N // rows
            # The fewest whole waves (of at least 3) that the CTAs of whole heads fill.
            waves = next((w for w in range(3, 25) if w * sms % m_tiles == 0), 3)
            heads = max(1, round(waves * sms / m_tiles))
            torch.manual_seed(0)
            q, k, v = (torch.randn(1, heads, N, D, device="cuda", dtype=torch.float16)
                       for _ in range(3))
            out = torch.empty_like(q)
            us = attention_us(lambda: int8attn.attention(q, k, v, mode="fast", out=out,
                                                         context=ctx, k_granularity="block"))
            w = heads * m_tiles / sms
            tiles = -(-N // 128)
            points.append((w, tiles, us))
            print(f"D={D:3d} N={N:6d} heads={heads:4d} waves={w:5.2f} tiles/CTA={tiles:4d} "
                  f"kernel {us:9.1f} us  per wave {us / w:7.2f} us", flush=True)
        W, c, t = fit(points)
        print(f"D={D:3d}: c = {c:.2f} us per CTA, t = {t:.3f} us per 128-key tile, W = {W:.1f} us; "
              f"a CTA of 36 tiles (4608 keys, Flux at 1024 px) spends {100 * c / (c + 36 * t):.0f}% "
              f"of its time outside the steady-state loop", flush=True)
        result["series"][str(D)] = {"points": [{"waves": w, "tiles_per_cta": n, "kernel_us": u}
                                               for w, n, u in points],
                                    "c_us": c, "t_us": t, "w_us": W}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
