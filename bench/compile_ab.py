#!/usr/bin/env python3
"""Compiled steps of one model, stock and int8attn configurations alternated, each compiled
afresh: separates a real difference from inductor's compile-to-compile variance.

``bench/pipeline.py`` compiles each configuration once; two compilations of the same graph can
differ by about 1% in step time (inductor picks reduction kernels by timing them). This script
compiles ``--rounds`` times per configuration, alternating (stock, int8attn, stock, ...), with
the FX graph cache off, times ``--steps`` compiled steps of each (CUDA events, median), and
checks that the graphs dynamo captured for the configurations hold the same operations in the
same order (then the processors add nothing to the compiled step).

Usage::

    python3 bench/compile_ab.py --model sd3 --configs sdpa,policy --rounds 2 --out OUT

Writes OUT/compile_ab.json and OUT/compile_ab.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any, Dict, List, Tuple

os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")  # before torch is imported
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipeline as P  # noqa: E402  (model building, processors, policy)
import pipeline_models as pm  # noqa: E402


def graph_ops(model: torch.nn.Module, inputs: Dict[str, Any], step: Any) -> List[Tuple[str, str]]:
    """The (op, target) sequence of every graph dynamo captures for one step (no compiling)."""
    ops: List[Tuple[str, str]] = []

    def record(gm: torch.fx.GraphModule, example: Any) -> Any:
        ops.extend((n.op, str(n.target)) for n in gm.graph.nodes)
        return gm.forward

    torch._dynamo.reset()
    step(torch.compile(model, backend=record))
    return ops


def time_compiled(model: torch.nn.Module, step: Any, warmup: int, steps: int) -> List[float]:
    torch._dynamo.reset()
    fn = torch.compile(model)
    for _ in range(warmup):
        step(fn)
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        step(fn)
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1))
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, choices=pm.MODEL_NAMES)
    ap.add_argument("--configs", default="sdpa,policy", help="comma list (default sdpa,policy)")
    ap.add_argument("--rounds", type=int, default=2, help="compilations per config (default 2)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per compilation")
    ap.add_argument("--warmup", type=int, default=4, help="steps before timing")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    configs = args.configs.split(",")
    unknown = [c for c in configs if c not in P.CONFIGS]
    if unknown or not configs:
        ap.error(f"--configs: unknown {', '.join(unknown)} (choose from {', '.join(P.CONFIGS)})")
    if args.rounds < 1 or args.steps < 1 or args.warmup < 0:
        ap.error("--rounds and --steps must be >= 1, --warmup >= 0")
    if not torch.cuda.is_available():
        ap.error("needs a CUDA GPU (compiled step times)")
    import int8attn

    spec = pm.FULL[args.model]
    dev = torch.device("cuda")
    model = P.build_model(spec, dev)
    inputs = pm.make_inputs(spec, dev)
    saved = dict(model.attn_processors)
    policy_steps = 6

    def stepper(config: str) -> Any:
        def step(fn: Any) -> Any:
            if config == "policy":  # an ordinary (FAST) step of the policy
                int8attn.set_timestep(model, 2)
            with torch.no_grad(), P.backend_context(config):
                return fn(**inputs)
        return step

    results: Dict[str, Any] = {"model": args.model, "torch": torch.__version__,
                               "gpu": torch.cuda.get_device_name(), "rounds": [],
                               "command": "python3 bench/compile_ab.py " + " ".join(sys.argv[1:])}
    graphs = {}
    for r in range(args.rounds):
        for config in configs:
            P.install(model, config, policy_steps)
            step = stepper(config)
            if r == 0:
                graphs[config] = graph_ops(model, inputs, step)
            times = time_compiled(model, step, args.warmup, args.steps)
            P.restore(model, saved)
            row = {"round": r, "config": config, "median_ms": statistics.median(times),
                   "min_ms": min(times), "max_ms": max(times)}
            results["rounds"].append(row)
            print(f"round {r} {config:10s} median {row['median_ms']:.2f} ms "
                  f"(min {row['min_ms']:.2f}, max {row['max_ms']:.2f})", flush=True)
    first = graphs[configs[0]]
    results["graphs"] = {c: {"nodes": len(g), "same_as_" + configs[0]: g == first}
                         for c, g in graphs.items()}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "compile_ab.json"), "w") as f:
        json.dump(results, f, indent=1)
    lines = [f"# Compiled steps, fresh compilations alternated: {args.model}", "",
             f"{results['gpu']}, torch {results['torch']}; command: `{results['command']}`", "",
             "| round | config | median ms | min | max |", "|---|---|---|---|---|"]
    lines += [f"| {x['round']} | {x['config']} | {x['median_ms']:.2f} | {x['min_ms']:.2f} | "
              f"{x['max_ms']:.2f} |" for x in results["rounds"]]
    lines += ["", "Captured graphs: " + "; ".join(
        f"{c} {g['nodes']} nodes" + (f", identical to {configs[0]}'s" if c != configs[0] and
                                     g["same_as_" + configs[0]] else "")
        for c, g in results["graphs"].items()), ""]
    with open(os.path.join(args.out, "compile_ab.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
