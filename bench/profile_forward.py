#!/usr/bin/env python3
"""One end-to-end int8attn forward per shape and mode, for `ncu` to time each kernel of it, or
(--kernel-times) each kernel's mean device time over repeated calls from torch's profiler.

    ncu --clock-control none -k regex:'kv_|attention|stats|combine|finalize|fill' \\
        python3 bench/profile_forward.py flux_1024px balanced
    python3 bench/profile_forward.py flux_1024px fast --k-granularity block --kernel-times

Shapes are the names of bench/bench.py. --kernel-times prints one line per kernel (mean device
microseconds per call) and the span of a call, first kernel start to last kernel end: with
programmatic dependent launch a kernel's time can include its wait for the one before it.
"""
import argparse
import collections
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import bench  # noqa: E402  (shape table)
import int8attn  # noqa: E402

SHAPES = {s[0]: s[1:] for s in bench.SQUARE + bench.DIFFUSION + bench.DECODE}


def kernel_device_times(call, calls: int = 50, warmup: int = 20):
    """Each kernel's device times over `calls` calls (torch profiler), by kernel name, and the
    span of a call (first kernel start to last kernel end) in microseconds."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if not events:
        sys.exit("no CUDA events recorded (is another profiler, such as ncu, attached?)")
    per_kernel = collections.defaultdict(list)
    for e in events:
        per_kernel[e.name].append(e.device_time)
    span = max(e.time_range.end for e in events) - min(e.time_range.start for e in events)
    return per_kernel, span / calls


def kernel_times(call, calls: int = 50) -> None:
    per_kernel, span = kernel_device_times(call, calls)
    for name, times in sorted(per_kernel.items(), key=lambda kv: -sum(kv[1])):
        print(f"{sum(times) / len(times):9.2f} us  x{len(times) / calls:g} per call  {name[:100]}")
    print(f"{span:9.2f} us  span per call (first kernel start to last kernel end)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shape", help="a name from bench.py (" + ", ".join(sorted(SHAPES))
                    + ") or NAME=B:Hq:Hkv:Nq:Nk:D")
    ap.add_argument("mode", choices=("exact", "balanced", "fast"))
    ap.add_argument("--k-granularity", choices=("token", "block"), default=None)
    ap.add_argument("--kernel-times", action="store_true",
                    help="mean device time per kernel over 50 calls (torch profiler)")
    args = ap.parse_args()
    try:
        _, (B, Hq, Hkv, Nq, Nk, D) = bench.named_shape(args.shape)
    except ValueError as e:
        ap.error(str(e))
    torch.manual_seed(0)
    q = torch.randn(B, Hq, Nq, D, device="cuda", dtype=torch.float16)
    k = torch.randn(B, Hkv, Nk, D, device="cuda", dtype=torch.float16)
    v = torch.randn(B, Hkv, Nk, D, device="cuda", dtype=torch.float16)
    out = torch.empty_like(q)
    ctx = int8attn.Context()

    def call():
        return int8attn.attention(q, k, v, mode=args.mode, out=out, context=ctx,
                                  k_granularity=args.k_granularity)

    if args.kernel_times:
        kernel_times(call)
        return
    call()  # grows the workspace
    torch.cuda.synchronize()
    call()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
