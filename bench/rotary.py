#!/usr/bin/env python3
"""diffusers' rotary embedding against int8attn's leaner one (what the wrapped processors
call): device time per call (CUDA-graph replays), eager time per call (a loop of calls,
synchronised once: whichever of host and device binds), and whether every output bit is equal,
for Q/K shapes of Flux and HunyuanVideo (real cos/sin tables, diffusers' ``apply_rotary_emb``),
of Qwen-Image (the complex product of its ``apply_rotary_emb_qwen``) and of LTX-Video (its own
function over the flattened heads, [B, S, H*D] with per-batch tables).

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
from diffusers.models.transformers import transformer_ltx  # noqa: E402
from diffusers.models.transformers.transformer_qwenimage import (  # noqa: E402
    apply_rotary_emb_qwen)

from int8attn._rotary import (lean_apply_rotary_emb, lean_complex_rotary,  # noqa: E402
                              lean_flat_rotary)

# name: ((B, S, H, D), tables), [B, S, H, D] as the processors call it; tables "real" (cos, sin
# [S, D]), "complex" (freqs_cis [S, D/2]) or "flat" (LTX-Video: x [B, S, H*D], cos and sin
# [B, S, H*D])
SHAPES = {
    "flux_1024px": ((1, 4608, 24, 128), "real"),
    "flux_2048px": ((1, 16896, 24, 128), "real"),
    "hunyuan_720p_129f": ((1, 119040, 24, 128), "real"),
    "qwenimage_1024px": ((1, 4096, 24, 128), "complex"),
    "ltx_704x512_161f_cfg": ((2, 7392, 32, 64), "flat"),
}


def _calls(shape, tables, dtype, lean):
    """(stock, int8attn) zero-argument calls on fixed random inputs of ``shape``."""
    B, S, H, D = shape
    g = torch.Generator(device="cuda").manual_seed(0)
    if tables == "flat":
        x = torch.randn(B, S, H * D, device="cuda", generator=g).to(dtype)
        cs = tuple(torch.randn(B, S, H * D, device="cuda", generator=g) for _ in range(2))
        return (lambda: transformer_ltx.apply_rotary_emb(x, cs), lambda: lean["flat"](x, cs))
    x = torch.randn(B, S, H, D, device="cuda", generator=g).to(dtype)
    if tables == "complex":
        angles = torch.randn(S, D // 2, device="cuda", generator=g) * 40
        f = torch.polar(torch.ones_like(angles), angles)
        return (lambda: apply_rotary_emb_qwen(x, f, use_real=False),
                lambda: lean["complex"](x, f, use_real=False))
    cos = torch.randn(S, D, device="cuda", generator=g)
    sin = torch.randn(S, D, device="cuda", generator=g)
    return (lambda: apply_rotary_emb(x, (cos, sin), sequence_dim=1),
            lambda: lean["real"](x, (cos, sin), sequence_dim=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    dtype = getattr(torch, args.dtype)
    lean = {"real": lean_apply_rotary_emb(apply_rotary_emb),
            "complex": lean_complex_rotary(apply_rotary_emb_qwen),
            "flat": lean_flat_rotary(transformer_ltx.apply_rotary_emb)}
    rows = []
    for name, (shape, tables) in SHAPES.items():
        stock, ours = _calls(shape, tables, dtype, lean)
        equal = torch.equal(stock().view(torch.uint8), ours().view(torch.uint8))
        row = {"shape": name, "x": list(shape), "tables": tables, "dtype": args.dtype,
               "bit_identical": equal}
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
        del stock, ours
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "command": "python3 bench/rotary.py " + " ".join(sys.argv[1:])}
    with open(os.path.join(args.out, "rotary.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    lines = [f"# Rotary embedding, diffusers against int8attn ({meta['gpu']}, "
             f"torch {meta['torch']})",
             "", f"`{meta['command']}`: one call on Q or K ([B, S, H, D]), {args.dtype}; real "
             "tables: diffusers' `apply_rotary_emb`, complex: Qwen-Image's "
             "`apply_rotary_emb_qwen` (`use_real=False`), flat: LTX-Video's `apply_rotary_emb` "
             "([B, S, H*D], per-batch tables).", "",
             "| shape | x | tables | stock device ms | int8attn device ms | speedup "
             "| stock eager ms | int8attn eager ms | speedup | bit-identical |", "|---" * 10 + "|"]
    for r in rows:
        lines.append(f"| {r['shape']} | {'x'.join(map(str, r['x']))} | {r['tables']} "
                     f"| {r['stock_device_ms']:.3f} "
                     f"| {r['int8attn_device_ms']:.3f} | {r['device_speedup']:.2f}x "
                     f"| {r['stock_eager_ms']:.3f} | {r['int8attn_eager_ms']:.3f} "
                     f"| {r['eager_speedup']:.2f}x | {r['bit_identical']} |")
    with open(os.path.join(args.out, "rotary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
