#!/usr/bin/env python3
"""diffusers' rotary embedding against int8attn's leaner one (what the wrapped Flux processors
call): device time per call (CUDA-graph replays), eager time per call (a loop of calls,
synchronised once: whichever of host and device binds), and whether every output bit is equal,
for Q/K shapes of Flux and one of HunyuanVideo's size (whose processor keeps diffusers' own).

    python3 bench/rotary.py --out bench/results/DIR

Writes DIR/rotary.json and DIR/rotary.md.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (CUDA-graph timer)
from diffusers.models.embeddings import apply_rotary_emb  # noqa: E402

from int8attn._rotary import lean_apply_rotary_emb  # noqa: E402

# name: (B, S, H, D), sequence_dim 1 ([B, S, H, D]) as the Flux and HunyuanVideo processors call it
SHAPES = {
    "flux_1024px": (1, 4608, 24, 128),
    "flux_2048px": (1, 16896, 24, 128),
    "hunyuan_720p_129f": (1, 119040, 24, 128),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    dtype = getattr(torch, args.dtype)
    lean = lean_apply_rotary_emb(apply_rotary_emb)
    rows = []
    for name, (B, S, H, D) in SHAPES.items():
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(B, S, H, D, device="cuda", generator=g).to(dtype)
        cos = torch.randn(S, D, device="cuda", generator=g)
        sin = torch.randn(S, D, device="cuda", generator=g)
        stock = lambda: apply_rotary_emb(x, (cos, sin), sequence_dim=1)  # noqa: E731
        ours = lambda: lean(x, (cos, sin), sequence_dim=1)  # noqa: E731
        equal = torch.equal(stock().view(torch.uint8), ours().view(torch.uint8))
        row = {"shape": name, "x": [B, S, H, D], "dtype": args.dtype, "bit_identical": equal}
        for label, fn in (("stock", stock), ("int8attn", ours)):
            row[f"{label}_device_ms"] = bench.time_fn(fn)[0]
            row[f"{label}_eager_ms"] = bench.eager_ms(fn)
        row["device_speedup"] = row["stock_device_ms"] / row["int8attn_device_ms"]
        row["eager_speedup"] = row["stock_eager_ms"] / row["int8attn_eager_ms"]
        rows.append(row)
        print(f"{name:20s} stock {row['stock_device_ms']:.3f} ms "
              f"(eager {row['stock_eager_ms']:.3f})  int8attn {row['int8attn_device_ms']:.3f} ms "
              f"(eager {row['int8attn_eager_ms']:.3f})  {row['device_speedup']:.2f}x  "
              f"bit-identical {equal}", flush=True)
        del x, cos, sin
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "command": "python3 bench/rotary.py " + " ".join(sys.argv[1:])}
    with open(os.path.join(args.out, "rotary.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    lines = [f"# Rotary embedding, diffusers against int8attn ({meta['gpu']}, "
             f"torch {meta['torch']})",
             "", f"`{meta['command']}`: one call on Q or K, sequence_dim=1, {args.dtype}.", "",
             "| shape | x | stock device ms | int8attn device ms | speedup | stock eager ms "
             "| int8attn eager ms | speedup | bit-identical |", "|---" * 9 + "|"]
    for r in rows:
        lines.append(f"| {r['shape']} | {'x'.join(map(str, r['x']))} | {r['stock_device_ms']:.3f} "
                     f"| {r['int8attn_device_ms']:.3f} | {r['device_speedup']:.2f}x "
                     f"| {r['stock_eager_ms']:.3f} | {r['int8attn_eager_ms']:.3f} "
                     f"| {r['eager_speedup']:.2f}x | {r['bit_identical']} |")
    with open(os.path.join(args.out, "rotary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
