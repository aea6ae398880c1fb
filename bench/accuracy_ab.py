#!/usr/bin/env python3
"""A/B accuracy of library builds: int8attn's relative L1 error against float64 (bench.py's
reference on 128 sampled query rows of two heads) at a few Gaussian shapes whose sequence
length grows to 32K keys, for the library named by INT8ATTN_LIBRARY. Run it once per build in
one session and compare the lines; `bench/ab_time.py` is its timing twin. A preparation change
can pass short shapes and still move FAST past its bar at long ones, where the output is a mean
over many keys and a bias in V's rounding no longer averages out.

    INT8ATTN_LIBRARY=build-a/lib/libint8attn.so python3 bench/accuracy_ab.py [--json OUT.json]
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import bench  # noqa: E402  (float64 reference and metrics)
import int8attn  # noqa: E402

SHAPES = {"n32k_h8": (1, 8, 32760, 128), "n16k_h8": (1, 8, 16384, 128),
          "flux_1024px": (1, 24, 4608, 128), "n4k_d64": (2, 8, 4096, 64)}
MODES = (("fast", "block"), ("fast", "token"), ("balanced", "token"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    label = os.path.basename(os.path.dirname(os.path.dirname(
        os.environ.get("INT8ATTN_LIBRARY", "default/lib/x"))))
    ctx = int8attn.Context()
    rows_out = []
    for name, (B, H, N, D) in SHAPES.items():
        torch.manual_seed(0)
        q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
        rows = torch.randperm(N, device="cuda")[:128]
        heads = [0, H // 2]
        ref = bench.reference_rows(q, k, v, rows, heads)
        for mode, gran in MODES:
            out = int8attn.attention(q, k, v, mode=mode, context=ctx, k_granularity=gran)
            acc = bench.accuracy(out, ref, rows, heads)
            rows_out.append({"library": label, "shape": name, "B": B, "H": H, "N": N, "D": D,
                             "mode": mode, "k_granularity": gran, **acc})
            print(f"{label:8s} {name:12s} {mode:8s} K per {gran:5s} rel-L1 {acc['rel_l1']:.5f} "
                  f"cos {acc['cos']:.6f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "results": rows_out}, f, indent=1)


if __name__ == "__main__":
    main()
