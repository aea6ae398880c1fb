#!/usr/bin/env python3
"""A/B timing of library builds: int8attn forward times for a few shapes, for the library named
by INT8ATTN_LIBRARY, end-to-end and (with --kernel) against a pre-quantized K/V cache, with
torch's cuDNN SDPA on the same inputs as the in-process yardstick. Run it once per build in one
device session and compare the printed lines (absolute times are comparable only within one
session; the cuDNN column shows how much the machine itself moved between the runs):

    INT8ATTN_LIBRARY=build-a/lib/libint8attn.so python3 bench/ab_time.py fast flux_1024px,square_8k_d128 --kernel
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(__file__))
import bench  # noqa: E402  (shape table and CUDA-graph timer)
import int8attn  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("exact", "balanced", "fast"))
    ap.add_argument("shapes", help="comma-separated names from bench.py, or NAME=B:Hq:Hkv:Nq:Nk:D")
    ap.add_argument("--kernel", action="store_true", help="also time attention against a cache")
    ap.add_argument("--k-granularity", choices=("token", "block"), default=None,
                    help="K scale granularity of the forward calls (default: the library's)")
    ap.add_argument("--json", metavar="FILE",
                    help="also append each result as one JSON object a line to FILE")
    args = ap.parse_args()
    ctx = int8attn.Context()
    label = os.path.basename(os.path.dirname(os.path.dirname(
        os.environ.get("INT8ATTN_LIBRARY", "default/lib/x"))))
    if args.k_granularity:
        label += f"/k-{args.k_granularity}"

    try:
        shapes = [bench.named_shape(spec) for spec in args.shapes.split(",")]
    except ValueError as e:
        ap.error(str(e))
    for name, (B, Hq, Hkv, Nq, Nk, D) in shapes:
        torch.manual_seed(0)
        q = torch.randn(B, Hq, Nq, D, device="cuda", dtype=torch.float16)
        k = torch.randn(B, Hkv, Nk, D, device="cuda", dtype=torch.float16)
        v = torch.randn(B, Hkv, Nk, D, device="cuda", dtype=torch.float16)
        out = torch.empty_like(q)
        ops = 4.0 * B * Hq * Nq * Nk * D

        def cudnn():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return F.scaled_dot_product_attention(q, k, v, enable_gqa=Hq != Hkv)
        ref_ms, _ = bench.time_fn(cudnn)
        ms, _ = bench.time_fn(lambda: int8attn.attention(q, k, v, mode=args.mode, out=out,
                                                         context=ctx,
                                                         k_granularity=args.k_granularity))
        # A sanity check, not the accuracy measurement (bench.py's float64 reference is): the
        # end-to-end output against cuDNN's, so a broken build shows in the A/B log at once.
        ref = cudnn().float()
        rel = ((out.float() - ref).abs().sum() / ref.abs().sum()).item()
        line = (f"{label:12s} {args.mode:8s} {name:18s} e2e {ms:9.4f} ms "
                f"{ops / (ms * 1e-3) / 1e12:7.1f} TOPS  cudnn {ref_ms:9.4f} ms  rel {rel:.4f}")
        record = {"library": label, "mode": args.mode, "shape": name,
                  "dims": [B, Hq, Hkv, Nq, Nk, D], "e2e_ms": ms, "cudnn_ms": ref_ms,
                  "rel_l1_vs_cudnn": rel}
        if args.kernel and args.mode != "exact":
            cache = int8attn.KVCache(B, Hkv, Nk, D, device="cuda", mode=args.mode, context=ctx)
            cache.append(k, v)
            kms, _ = bench.time_fn(lambda: cache.forward(q, out=out))
            line += f"  kernel {kms:9.4f} ms {ops / (kms * 1e-3) / 1e12:7.1f} TOPS"
            record["kernel_ms"] = kms
            cache.close()
        print(line, flush=True)
        if args.json:
            with open(args.json, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
