#!/usr/bin/env python3
"""One denoiser step of a model, stock against int8attn's default policy: the processor's call
accounting (which calls ran int8attn, were routed to SDPA, fell back) and how far the step's
output moved (rel-L1 against stock, on an ordinary FAST step of the policy; with --math-sdpa,
beside it, how far stock's own output moves with PyTorch's math SDPA kernel instead of its
default), and whether the rotary stand-ins that check their first call against the original
kept int8attn. For HunyuanVideo, whose joint attention masks the text padding, also one
joint attention call of its shape: PyTorch SDPA with that key-padding mask (what stock runs),
SDPA without a mask (what it would cost unmasked), and int8attn FAST (K scales per block, as
the processors call it) with the mask as k_lengths (device time, CUDA graphs).

    python3 bench/step_check.py --model hunyuan --layers 2 --out bench/results/DIR

Writes DIR/step_check_MODEL.json.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipeline as P  # noqa: E402
import bench  # noqa: E402  (CUDA-graph timer)
import pipeline_models as pm  # noqa: E402


def masked_call_times(spec: pm.ModelSpec) -> dict:
    """One joint attention call of ``spec``'s shape with its text padding masked."""
    import int8attn
    import torch.nn.functional as F

    s, c = spec.inputs, spec.config
    h, w = s["latent"]
    pt, p = c.get("patch_size_t", 1), c["patch_size"]
    n = (s["frames"] // pt) * (h // p) * (w // p) + s["text_tokens"]
    valid = n - s["text_tokens"] + s["text_valid"]
    heads, d = c["num_attention_heads"], c["attention_head_dim"]
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(1, heads, n, d, device="cuda", generator=g, dtype=torch.bfloat16)
               for _ in range(3))
    mask = (torch.arange(n, device="cuda") < valid).view(1, 1, 1, n)
    lengths = torch.tensor([valid], device="cuda", dtype=torch.int32)
    calls = {
        "sdpa_masked": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        "sdpa_unmasked": lambda: F.scaled_dot_product_attention(q, k, v),
        # K scales per block, as the processors call FAST
        "int8attn_fast_k_lengths": lambda: int8attn.attention(q, k, v, mode="fast",
                                                              k_granularity="block",
                                                              k_lengths=lengths),
    }
    times = {name: bench.time_fn(fn)[0] for name, fn in calls.items()}
    return {"shape": [1, heads, n, d], "valid_keys": valid, "device_ms": times}


def checked_stand_ins(model: torch.nn.Module) -> dict:
    """The first-call checks of the rotary stand-ins in the wrapped processors' globals (Wan's
    nested function, Qwen-Image's complex product): name -> {"checked", "ok"}."""
    import int8attn

    found = {}
    for m in model.modules():
        proc = getattr(m, "processor", None)
        routed = getattr(proc, "_routed", None) if isinstance(proc, int8attn.Int8SDPAProcessor) \
            else None
        for name, value in (getattr(routed, "__globals__", None) or {}).items():
            if getattr(value, "__int8attn_lean__", False) and hasattr(value, "state"):
                found[name] = dict(value.state)
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, choices=pm.MODEL_NAMES)
    ap.add_argument("--layers", type=int, default=None, help="cut the transformer stacks")
    ap.add_argument("--out", required=True)
    ap.add_argument("--math-sdpa", action="store_true",
                    help="also run stock with PyTorch's math SDPA kernel (it materializes every "
                         "score: image sizes only)")
    args = ap.parse_args()
    import int8attn

    spec = pm.FULL[args.model].with_layers(args.layers)
    dev = torch.device("cuda")
    model = P.build_model(spec, dev)
    inputs = pm.make_inputs(spec, dev)
    with torch.no_grad():
        ref = P.prediction(model(**inputs)).float()
        math_sdpa = None
        if args.math_sdpa:
            # How far the step moves when only PyTorch's SDPA kernel changes: the model's own
            # sensitivity to rounding, the scale to read the rel-L1 below against.
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel(SDPBackend.MATH):
                math_sdpa = P.prediction(model(**inputs)).float()
    int8attn.replace_attention_with_int8(model, mode="fast", num_inference_steps=30)
    int8attn.set_timestep(model, 2)  # an ordinary (FAST) step
    with torch.no_grad():
        out = P.prediction(model(**inputs)).float()
    result = {"model": args.model, "layers_cut": spec.layers_cut,
              "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "stats": dict(model._int8attn_processor.stats),
              "rel_l1_vs_stock": float((out - ref).abs().sum() / ref.abs().sum()),
              "rel_l1_stock_math_sdpa_vs_stock": (
                  None if math_sdpa is None
                  else float((math_sdpa - ref).abs().sum() / ref.abs().sum())),
              "checked_stand_ins": checked_stand_ins(model),
              "command": "python3 bench/step_check.py " + " ".join(sys.argv[1:])}
    if spec.family == "hunyuan":  # its joint attention masks the text padding
        result["masked_call"] = masked_call_times(spec)
    print(json.dumps(result, indent=1))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"step_check_{args.model}.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
