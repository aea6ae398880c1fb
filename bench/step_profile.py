#!/usr/bin/env python3
"""Where one model's denoising step spends its GPU time, stock attention against int8attn.

Each configuration's steps run under ``torch.profiler`` (CPU and CUDA activity); every GPU kernel
is attributed to the outermost ``aten::`` operation whose host call launched it (int8attn's
kernels, launched by the library itself, to ``int8attn``), and the kernels are summed per
(operation, kernel name). So the glue around attention (``aten::cat`` of Q/K/V, copies before
and after the call) shows next to the attention kernels themselves, and two configurations'
tables can be read side by side.

Usage::

    python3 bench/step_profile.py --model sd3 --configs sdpa,policy --out OUT

Writes OUT/step_profile.json (per configuration: GPU busy and kernel time per step, the
top entries) and OUT/step_profile.md.
"""
from __future__ import annotations

import argparse
import bisect
import collections
import json
import os
import sys
import tempfile
from typing import Any, Dict, List

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipeline as P  # noqa: E402  (model building, processors)
import pipeline_models as pm  # noqa: E402


def kernel_table(trace: Dict[str, Any], steps: int) -> Dict[str, Any]:
    """Kernels of a chrome trace summed per (launching aten op, kernel name), per step."""
    ev = trace["traceEvents"]
    launches = {e["args"].get("correlation"): e for e in ev
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "args" in e}
    ops: Dict[Any, List[Dict[str, Any]]] = collections.defaultdict(list)
    for e in ev:
        if e.get("cat") == "cpu_op" and e["name"].startswith("aten::"):
            ops[e["tid"]].append(e)
    starts = {}
    for tid, lst in ops.items():
        lst.sort(key=lambda o: o["ts"])
        starts[tid] = [o["ts"] for o in lst]
    total: Dict[str, float] = collections.Counter()
    count: Dict[str, int] = collections.Counter()
    spans = []
    for k in (e for e in ev if e.get("cat") == "kernel"):
        spans.append((k["ts"], k["ts"] + k["dur"]))
        launch = launches.get(k["args"].get("correlation"))
        op = "int8attn" if "int8attn" in k["name"] else "?"
        if launch is not None and op == "?":
            lst = ops.get(launch["tid"], [])
            hi = bisect.bisect_right(starts.get(launch["tid"], []), launch["ts"])
            # the op that launched it starts shortly before: its children and it are among the
            # last few ops started before the launch
            enclosing = [o for o in lst[max(0, hi - 64):hi]
                         if o["ts"] + o["dur"] >= launch["ts"] + launch["dur"]]
            if enclosing:
                op = max(enclosing, key=lambda o: o["dur"])["name"]
        key = f"{op} | {k['name'][:70]}"
        total[key] += k["dur"]
        count[key] += 1
    spans.sort()
    busy, cur = 0.0, None
    for a, b in spans:  # the union of kernel intervals: time the GPU ran anything
        if cur is None or a > cur[1]:
            busy += (cur[1] - cur[0]) if cur else 0.0
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    busy += (cur[1] - cur[0]) if cur else 0.0
    return {"kernel_ms_per_step": sum(total.values()) / 1e3 / steps,
            "busy_ms_per_step": busy / 1e3 / steps,
            "kernels_per_step": len(spans) / steps,
            "entries": [{"op_and_kernel": key, "ms_per_step": t / 1e3 / steps,
                         "calls_per_step": count[key] / steps}
                        for key, t in sorted(total.items(), key=lambda kv: -kv[1])]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, choices=pm.MODEL_NAMES)
    ap.add_argument("--configs", default="sdpa,policy",
                    help=f"comma list of {', '.join(P.CONFIGS)} (default sdpa,policy)")
    ap.add_argument("--steps", type=int, default=3, help="profiled steps (default 3)")
    ap.add_argument("--layers", type=int, default=None, help="cut the transformer to N blocks")
    ap.add_argument("--top", type=int, default=20, help="rows per configuration in the table")
    ap.add_argument("--compile", action="store_true",
                    help="profile torch.compile(model) (inductor, compiled afresh per config)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    configs = args.configs.split(",")
    if any(c not in P.CONFIGS for c in configs):
        ap.error(f"--configs: choose from {', '.join(P.CONFIGS)}")
    if args.steps < 1:
        ap.error("--steps must be >= 1")
    if not torch.cuda.is_available():
        ap.error("needs a CUDA GPU")
    import int8attn

    spec = pm.FULL[args.model].with_layers(args.layers)
    dev = torch.device("cuda")
    model = P.build_model(spec, dev)
    inputs = pm.make_inputs(spec, dev)
    saved = P.attention_processors(model)
    report: Dict[str, Any] = {"model": args.model, "gpu": torch.cuda.get_device_name(),
                              "compiled": args.compile,
                              "torch": torch.__version__, "steps": args.steps,
                              "command": "python3 bench/step_profile.py " + " ".join(sys.argv[1:]),
                              "configs": {}}
    for config in configs:
        P.install(model, config, 6)
        torch._dynamo.reset()
        fn = torch.compile(model) if args.compile else model

        def step() -> None:
            if config == "policy":  # an ordinary (FAST) step of the policy
                int8attn.set_timestep(model, 2)
            with torch.no_grad(), P.backend_context(config):
                fn(**inputs)

        for _ in range(3):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(args.steps):
                step()
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            prof.export_chrome_trace(path)
            with open(path) as f:
                report["configs"][config] = kernel_table(json.load(f), args.steps)
        P.restore(model, saved)
        r = report["configs"][config]
        print(f"{config}: kernels {r['kernel_ms_per_step']:.2f} ms a step, GPU busy "
              f"{r['busy_ms_per_step']:.2f} ms", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "step_profile.json"), "w") as f:
        json.dump(report, f, indent=1)
    lines = [f"# GPU time of one step by launching operation: {args.model}"
             + (" (torch.compile)" if args.compile else ""), "",
             f"{report['gpu']}, torch {report['torch']}; {args.steps} profiled steps; command: "
             f"`{report['command']}`", ""]
    for config, r in report["configs"].items():
        lines += [f"## {config}: {r['kernel_ms_per_step']:.2f} ms of kernels a step "
                  f"({r['kernels_per_step']:.0f} kernels), GPU busy {r['busy_ms_per_step']:.2f} ms",
                  "", "| ms a step | calls a step | operation \\| kernel |", "|---|---|---|"]
        lines += [f"| {e['ms_per_step']:.3f} | {e['calls_per_step']:.0f} | "
                  f"{e['op_and_kernel'].replace('|', chr(92) + '|')} |"
                  for e in r["entries"][:args.top]]
        lines.append("")
    with open(os.path.join(args.out, "step_profile.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
