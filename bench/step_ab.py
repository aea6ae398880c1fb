#!/usr/bin/env python3
"""Whole steps of one model, stock and int8attn configurations alternated: separates a real
difference from drift and from inductor's compile-to-compile variance.

``bench/pipeline.py`` measures each configuration once, one after another, so a slow drift of the
machine (clocks, temperature) reads as a difference between configurations: on SD3 at 1024 px it
put FAST 2.6% behind stock where alternated rounds put it 1.5% ahead. This script times
``--rounds`` rounds per mode, each round every configuration (the order reversed every other
round), and reports per configuration the median step of each round and the ratio to the first
configuration (geometric mean over rounds). Eager steps use the installed processors. Compiled
ones run each (round, configuration) in a fresh Python process that builds the model, compiles
it and times it (FX graph cache off: inductor picks reduction kernels by timing them, so two
compilations of one graph can differ by ~1%): in one process, a model compiled after another
ran its host side up to twice as slow, whichever configuration came second, which on host-bound
UNet steps read as a 0.54x "slowdown". Even in fresh processes the first compiled configuration
of a run measured 4-5% slower (SDXL), so read compiled steps over two or more rounds. The
graphs dynamo captures are compared (node counts, and whether the operations are identical to
the first configuration's). ``cudagraphs`` is ``compile`` with ``mode="reduce-overhead"``: every
step a CUDA-graph replay, so host time drops out (diffusers' recommended setting; a policy's
steps then all replay the mode of the step the graph recorded, see docs/diffusers.md).

Attention inside the step: with ``routed`` among the configurations (int8attn's processors, every
attention call in SDPA), each other int8attn configuration's step is compared with it round by
round, so the difference is what int8attn's attention alone saves a step (the rotary embedding
and norms are in both). With ``sdpa`` too, one more eager step of stock with CUDA events around
every SDPA call gives stock's attention time A, and int8attn's attention inside the step is read
as A / (A - saving) times faster. (Events around int8attn's own calls read them high, see
docs/diffusers.md; the step difference does not depend on them.)

Usage::

    python3 bench/step_ab.py --model sd3 --configs sdpa,fast,policy --modes eager,compile \
        --rounds 2 --out OUT
    python3 bench/step_ab.py --model flux1024 --configs sdpa,policy,routed --modes eager \
        --rounds 2 --out OUT

Writes OUT/step_ab.json and OUT/step_ab.md.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
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


def time_steps(fn: Any, step: Any, warmup: int, steps: int) -> List[float]:
    """Milliseconds of each of ``steps`` steps after ``warmup`` (CUDA events, synchronised)."""
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


def per_step_calls(proc: Any, steps: int) -> Dict[str, float]:
    """An int8attn configuration's call counters (int8attn, routed to SDPA, fallback) per step,
    so the table shows where each configuration's attention ran; {} for stock."""
    if proc is None:
        return {}
    return {k: proc.stats.get(k, 0) / steps for k in P.STAT_KEYS}


def stock_attention_ms(model: Any, inputs: Dict[str, Any], steps: int = 3) -> Dict[str, float]:
    """Stock's attention per eager step: CUDA events around every SDPA call (the model holds its
    original processors), the mean of ``steps`` steps."""
    rec = P.AttentionRecorder(True)
    with torch.no_grad(), P.recording_stock_attention(rec):
        for _ in range(steps):
            model(**inputs)
    return {"ms": rec.total_ms() / steps, "calls": rec.calls / steps}


def attention_ab(rounds: List[Dict[str, Any]], configs: List[str], n_rounds: int,
                 stock: Any) -> Dict[str, Any]:
    """Per int8attn configuration: routed's median eager step minus its own, round by round
    (both run the same processors, routed with every attention call in SDPA), and with stock's
    attention time A, its attention's speed-up inside the step, A / (A - saving)."""
    med = {(x["round"], x["config"]): x["median_ms"] for x in rounds if x["mode"] == "eager"}
    out: Dict[str, Any] = {"stock_attention_ms": stock["ms"] if stock else None,
                           "stock_attention_calls": stock["calls"] if stock else None,
                           "configs": {}}
    for c in configs:
        if c in P.STOCK or c == "routed":
            continue
        sav = [med[(r, "routed")] - med[(r, c)] for r in range(n_rounds)]
        a: Dict[str, Any] = {"saving_ms_rounds": sav, "saving_ms": statistics.fmean(sav)}
        if not any(x.get("calls_per_step", {}).get("int8attn") for x in rounds
                   if x["config"] == c and x["mode"] == "eager"):
            # the same SDPA calls as routed's: the difference is the method's noise
            a["note"] = "no call ran int8attn: the saving is noise"
        elif stock and stock["ms"] > a["saving_ms"]:
            a["attention_ms"] = stock["ms"] - a["saving_ms"]
            a["attention_speedup"] = stock["ms"] / a["attention_ms"]
        out["configs"][c] = a
    return out


# torch.compile's mode for each compiled --modes entry.
COMPILE_MODES = {"compile": None, "cudagraphs": "reduce-overhead"}


def compiled_in_child(args: argparse.Namespace, config: str, with_graph: bool,
                      mode: str) -> Dict[str, Any]:
    """One compiled configuration timed in a fresh process (``--child``); its JSON result."""
    cmd = [sys.executable, os.path.abspath(__file__), "--model", args.model, "--configs", config,
           "--steps", str(args.steps), "--warmup", str(args.warmup), "--out", args.out,
           "--child", "--child-mode", mode] + (["--child-graph"] if with_graph else []) + (
               ["--layers", str(args.layers)] if args.layers else [])
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"step_ab: the compiled {config} run failed (exit {proc.returncode}); "
                         "its error is above")
    return json.loads(lines[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, choices=pm.MODEL_NAMES)
    ap.add_argument("--configs", default="sdpa,policy",
                    help="comma list, the first the reference (default sdpa,policy)")
    ap.add_argument("--modes", default="eager,compile",
                    help="comma list of eager, compile (torch.compile's default mode) and "
                         "cudagraphs (mode='reduce-overhead'); default eager,compile")
    ap.add_argument("--rounds", type=int, default=2, help="rounds per mode (default 2)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per configuration")
    ap.add_argument("--warmup", type=int, default=4, help="steps before timing")
    ap.add_argument("--layers", type=int, default=None,
                    help="cut the transformer stacks to this many blocks (the main stack; others "
                         "keep their published ratio to it); default: full depth")
    ap.add_argument("--out", required=True)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child-graph", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child-mode", default="compile", help=argparse.SUPPRESS)
    args = ap.parse_args()
    configs = args.configs.split(",")
    modes = args.modes.split(",")
    unknown = [c for c in configs if c not in P.CONFIGS]
    if unknown or len(set(configs)) != len(configs):
        ap.error(f"--configs: unknown or repeated {', '.join(unknown) or args.configs} "
                 f"(choose from {', '.join(P.CONFIGS)})")
    if not modes or len(set(modes)) != len(modes) or any(
            m not in ("eager", *COMPILE_MODES) for m in modes):
        ap.error(f"--modes: expected eager, compile and/or cudagraphs, got {args.modes!r}")
    if args.rounds < 1 or args.steps < 1 or args.warmup < 0:
        ap.error("--rounds and --steps must be >= 1, --warmup >= 0")
    if not torch.cuda.is_available():
        ap.error("needs a CUDA GPU (step times)")
    import int8attn

    if args.layers is not None and args.layers < 1:
        ap.error("--layers must be >= 1")
    spec = pm.FULL[args.model].with_layers(args.layers)
    dev = torch.device("cuda")
    # The parent process builds the model only for eager steps: compiled ones build their own.
    model = P.build_model(spec, dev) if args.child or "eager" in modes else None
    inputs = pm.make_inputs(spec, dev)
    saved = P.attention_processors(model) if model is not None else {}
    policy_steps = 6

    def stepper(config: str) -> Any:
        def step(fn: Any) -> Any:
            if config == "policy":  # an ordinary (FAST) step of the policy
                int8attn.set_timestep(model, 2)
            with torch.no_grad(), P.backend_context(config):
                return fn(**inputs)
        return step

    if args.child:  # one compiled configuration, its result as one JSON line on stdout
        config = configs[0]
        step = stepper(config)
        P.install(model, config, policy_steps)
        child: Dict[str, Any] = {}
        if args.child_graph:
            ops = graph_ops(model, inputs, step)
            child["graph_nodes"] = len(ops)
            child["graph_sha1"] = hashlib.sha1(repr(ops).encode()).hexdigest()
        torch._dynamo.reset()
        compiled = torch.compile(model, mode=COMPILE_MODES[args.child_mode])
        child["times"] = time_steps(compiled, step, args.warmup, args.steps)
        print(json.dumps(child), flush=True)
        return 0

    results: Dict[str, Any] = {"model": args.model, "torch": torch.__version__,
                               "gpu": torch.cuda.get_device_name(),
                               "layers_cut": spec.layers_cut, "rounds": [],
                               "command": "python3 bench/step_ab.py " + " ".join(sys.argv[1:])}
    graphs: Dict[str, Dict[str, Any]] = {}
    for mode in modes:
        for r in range(args.rounds):
            for config in configs if r % 2 == 0 else configs[::-1]:
                if mode in COMPILE_MODES:
                    # dynamo's graphs are the same in either compile mode: recorded once
                    child = compiled_in_child(args, config, config not in graphs, mode)
                    if "graph_nodes" in child:
                        graphs[config] = {"nodes": child["graph_nodes"],
                                          "sha1": child["graph_sha1"]}
                    times = child["times"]
                    calls = None
                else:
                    proc = P.install(model, config, policy_steps)
                    times = time_steps(model, stepper(config), args.warmup, args.steps)
                    calls = per_step_calls(proc, args.warmup + args.steps)
                    P.restore(model, saved)
                row = {"mode": mode, "round": r, "config": config,
                       "median_ms": statistics.median(times), "min_ms": min(times),
                       "max_ms": max(times)}
                if calls:
                    row["calls_per_step"] = calls
                results["rounds"].append(row)
                print(f"{mode} round {r} {config:10s} median {row['median_ms']:.2f} ms "
                      f"(min {row['min_ms']:.2f}, max {row['max_ms']:.2f})", flush=True)
    # per mode and configuration: the reference's median step / the configuration's, per round
    results["ratios"] = {}
    for mode in modes:
        med = {(x["round"], x["config"]): x["median_ms"] for x in results["rounds"]
               if x["mode"] == mode}
        results["ratios"][mode] = {
            c: math.exp(statistics.fmean(math.log(med[(r, configs[0])] / med[(r, c)])
                                         for r in range(args.rounds))) for c in configs}
    if "eager" in modes and "routed" in configs:
        results["attention_ab"] = attention_ab(results["rounds"], configs, args.rounds,
                                               stock_attention_ms(model, inputs)
                                               if "sdpa" in configs else None)
    if graphs:
        first = graphs[configs[0]]["sha1"]
        results["graphs"] = {c: {"nodes": g["nodes"], "same_as_" + configs[0]: g["sha1"] == first}
                             for c, g in graphs.items()}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "step_ab.json"), "w") as f:
        json.dump(results, f, indent=1)
    lines = [f"# Whole steps, configurations alternated: {args.model}", "",
             f"{results['gpu']}, torch {results['torch']}; command: `{results['command']}`", "",
             f"Ratio: {configs[0]}'s median step / the configuration's (> 1: faster), geometric "
             "mean over the rounds.", "",
             "| mode | config | " + " | ".join(f"round {r} median ms" for r in range(args.rounds))
             + " | ratio |", "|---|---|" + "---|" * (args.rounds + 1)]
    for mode in modes:
        for c in configs:
            meds = [x["median_ms"] for x in results["rounds"]
                    if x["mode"] == mode and x["config"] == c]
            lines.append(f"| {mode} | {c} | " + " | ".join(f"{m:.2f}" for m in meds)
                         + f" | {results['ratios'][mode][c]:.3f} |")
    if graphs:
        lines += ["", "Captured graphs: " + "; ".join(
            f"{c} {g['nodes']} nodes" + (f", identical to {configs[0]}'s" if c != configs[0] and
                                         g["same_as_" + configs[0]] else "")
            for c, g in results["graphs"].items())]
    ab = results.get("attention_ab")
    if ab:
        lines += ["", "Attention inside the eager step (against `routed`, every attention call "
                  "in SDPA; the saving is the mean over rounds of routed's median step minus the "
                  "configuration's):", ""]
        if ab["stock_attention_ms"] is not None:
            lines.append(f"stock's attention: {ab['stock_attention_ms']:.2f} ms a step in "
                         f"{ab['stock_attention_calls']:g} calls (CUDA events around each SDPA "
                         "call)")
            lines.append("")
        lines += ["| config | saving per round (ms) | saving (ms) | attention x stock |",
                  "|---|---|---|---|"]
        for c, a in ab["configs"].items():
            x = a.get("attention_speedup")
            lines.append(f"| {c} | " + ", ".join(f"{v:.2f}" for v in a["saving_ms_rounds"])
                         + f" | {a['saving_ms']:.2f} | "
                         + (f"{x:.3f}" if x else a.get("note", "-")) + " |")
    calls = {x["config"]: x["calls_per_step"] for x in results["rounds"]
             if x["mode"] == "eager" and "calls_per_step" in x}
    if calls:
        lines += ["", "Attention calls per eager step (int8attn / routed to SDPA / fallback): "
                  + "; ".join(f"{c} " + "/".join(f"{v[k]:g}" for k in P.STAT_KEYS)
                              for c, v in calls.items())]
    lines.append("")
    with open(os.path.join(args.out, "step_ab.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
