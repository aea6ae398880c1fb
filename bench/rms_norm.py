#!/usr/bin/env python3
"""The query/key RMS normalization: diffusers' ``RMSNorm`` (eight eager kernels; SD3.5,
HunyuanVideo, Qwen-Image, …), ``torch.nn.RMSNorm`` (PyTorch's fused kernel; Flux, Wan) and
int8attn's one-pass forward (what ``replace_attention_with_int8`` gives both classes; the torch
class only over rows of at most 256 channels):
device time per call (CUDA-graph replays), eager time per call (a loop of calls synchronised
once), and how far int8attn's result is from each (units in the last place of bf16).

    python3 bench/rms_norm.py --out bench/results/DIR

Writes DIR/rms_norm.json and DIR/rms_norm.md.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (CUDA-graph timer)
from diffusers.models.normalization import RMSNorm  # noqa: E402

from int8attn import Int8AttnProcessor, _norms  # noqa: E402

# name: x's shape as the processor normalizes it (rows along the last dimension)
SHAPES = {
    "sd35_large_1024px_cfg (38 heads x 64)": (2, 4096, 38, 64),
    "flux_1024px (24 x 128)": (1, 4608, 24, 128),
    "hunyuan_720p_129f (24 x 128)": (1, 119040, 24, 128),
    "wan_480p_81f (across 12 heads: 1536)": (1, 32760, 1536),
}


def ulps(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.view(torch.int16).to(torch.int32) - b.view(torch.int16).to(torch.int32)).abs()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for name, shape in SHAPES.items():
        D = shape[-1]
        g = torch.Generator(device="cuda").manual_seed(0)
        x = (torch.randn(*shape, device="cuda", generator=g) * 3).to(torch.bfloat16)
        weight = (1 + 0.3 * torch.randn(D, device="cuda", generator=g)).to(torch.bfloat16)
        stock = RMSNorm(D, eps=1e-6).to("cuda", torch.bfloat16)
        stock.weight.data.copy_(weight)
        fused = torch.nn.RMSNorm(D, eps=1e-6).to("cuda", torch.bfloat16)
        fused.weight.data.copy_(weight)
        lean = RMSNorm(D, eps=1e-6).to("cuda", torch.bfloat16)
        lean.weight.data.copy_(weight)
        owner = torch.nn.Module()  # the attention module: its processor is int8attn's
        owner.processor = Int8AttnProcessor()
        assert _norms.install(lean, owner)
        # torch.nn.RMSNorm with the lean forward (torch's rounding), where it is given one
        fused_lean = torch.nn.RMSNorm(D, eps=1e-6).to("cuda", torch.bfloat16)
        fused_lean.weight.data.copy_(weight)
        has_fused_lean = _norms.install(fused_lean, owner)
        with torch.no_grad():
            o_stock, o_fused, o_lean = stock(x), fused(x), lean(x)
            row = {"shape": name, "x": list(shape), "dtype": "bfloat16"}
            for label, ref in (("diffusers", o_stock), ("torch_fused", o_fused)):
                u = ulps(o_lean, ref)
                row[f"max_ulps_vs_{label}"] = int(u.max())
                row[f"share_differing_vs_{label}"] = float((u > 0).float().mean())
            mods = [("diffusers", stock), ("torch_fused", fused), ("int8attn", lean)]
            row["torch_class_lean"] = has_fused_lean
            if has_fused_lean:
                u = ulps(fused_lean(x), o_fused)
                row["torch_class_max_ulps_vs_torch_fused"] = int(u.max())
                row["torch_class_share_differing"] = float((u > 0).float().mean())
                mods.append(("int8attn_torch_class", fused_lean))
            for label, mod in mods:
                fn = lambda m=mod: m(x)  # noqa: E731
                row[f"{label}_device_ms"] = bench.time_fn(fn)[0]
                row[f"{label}_eager_ms"] = bench.eager_ms(fn)
        row["speedup_vs_diffusers"] = row["diffusers_device_ms"] / row["int8attn_device_ms"]
        row["speedup_vs_torch_fused"] = row["torch_fused_device_ms"] / row["int8attn_device_ms"]
        gbytes = 2 * x.numel() * x.element_size() / 1e9
        row["int8attn_tb_per_s"] = gbytes / row["int8attn_device_ms"]
        rows.append(row)
        print(f"{name:40s} diffusers {row['diffusers_device_ms']:.3f} ms  torch fused "
              f"{row['torch_fused_device_ms']:.3f} ms  int8attn {row['int8attn_device_ms']:.3f} ms "
              f"({row['int8attn_tb_per_s']:.2f} TB/s; eager {row['int8attn_eager_ms']:.3f} ms)  "
              f"ulps vs diffusers max {row['max_ulps_vs_diffusers']} "
              f"({100 * row['share_differing_vs_diffusers']:.3f}% differ)"
              + (f"; torch class lean {row['int8attn_torch_class_device_ms']:.3f} ms, ulps vs "
                 f"torch max {row['torch_class_max_ulps_vs_torch_fused']} "
                 f"({100 * row['torch_class_share_differing']:.3f}%)" if has_fused_lean else
                 "; torch class: torch's kernel"), flush=True)
        del x, o_stock, o_fused, o_lean
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "command": "python3 bench/rms_norm.py " + " ".join(sys.argv[1:])}
    with open(os.path.join(args.out, "rms_norm.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    lines = [f"# Query/key RMS normalization ({meta['gpu']}, torch {meta['torch']})", "",
             f"`{meta['command']}`: one call on Q or K, bf16 with a bf16 weight. Device ms from "
             "CUDA-graph replays; eager ms from a loop synchronised once.", "",
             "| shape | diffusers RMSNorm | torch.nn.RMSNorm (fused) | int8attn | vs diffusers "
             "| vs torch | int8attn eager | TB/s | bf16 ulps vs diffusers (share differing) "
             "| torch.nn.RMSNorm given the lean forward: ms, ulps vs torch's (share) |",
             "|---" * 10 + "|"]
    for r in rows:
        lines.append(f"| {r['shape']} | {r['diffusers_device_ms']:.3f} "
                     f"| {r['torch_fused_device_ms']:.3f} | {r['int8attn_device_ms']:.3f} "
                     f"| {r['speedup_vs_diffusers']:.2f}x | {r['speedup_vs_torch_fused']:.2f}x "
                     f"| {r['int8attn_eager_ms']:.3f} | {r['int8attn_tb_per_s']:.2f} "
                     f"| {r['max_ulps_vs_diffusers']} "
                     f"({100 * r['share_differing_vs_diffusers']:.3f}%) | "
                     + (f"{r['int8attn_torch_class_device_ms']:.3f}, "
                        f"{r['torch_class_max_ulps_vs_torch_fused']} "
                        f"({100 * r['torch_class_share_differing']:.3f}%) |"
                        if r["torch_class_lean"] else "not given (torch's kernel) |"))
    with open(os.path.join(args.out, "rms_norm.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
