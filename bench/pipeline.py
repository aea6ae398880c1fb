#!/usr/bin/env python3
"""Whole denoising steps of real diffusers models: stock attention against int8attn.

Each model of ``pipeline_models.py`` (SD1.5, SDXL, PixArt-Sigma, SD3-medium, SD3.5-large,
FLUX.1-dev at 1024 and 2048 px, FLUX.2-dev, Qwen-Image, Z-Image, Wan2.1 1.3B and 14B,
HunyuanVideo and HunyuanVideo-1.5, LTX-Video, CogVideoX-2B, Mochi) is built once from its
published config with random weights (fixed
seed; nothing is downloaded) in the dtype users run it in, and one sampler step — one forward
call of the denoiser on the CFG batch — is timed under each configuration:

    sdpa        stock diffusers attention, PyTorch's default SDPA backend
    sdpa_cudnn  stock attention inside sdpa_kernel(SDPBackend.CUDNN_ATTENTION)
    balanced    int8attn.replace_attention_with_int8(model, mode="balanced")
    fast        int8attn.replace_attention_with_int8(model, mode="fast")
    policy      int8attn.replace_attention_with_int8(model, mode="fast", num_inference_steps=S):
                the first and last of S steps run EXACT; int8attn.set_timestep(model, i) before
                step i; the mean step time over the S steps is reported
    routed      int8attn.replace_attention_with_int8(model, mode="fast", route="sdpa"): the
                processors' other one-pass work (rotary embedding, Q/K norms) with every
                attention call in SDPA; its step against fast's is what int8attn's attention
                alone changes in the step (bench/step_ab.py reports it)

in eager mode and under ``torch.compile(model)``. Between configurations the model's original
processors are put back (``model.set_attn_processor``), so the weights are shared.

Per item: the median step time (CUDA events, warm-up first), the compile time, and in eager mode
a second pass with CUDA events around every attention call (``F.scaled_dot_product_attention``
for stock configs; for int8attn ones ``Int8AttnProcessor.attention`` and the calls routed to the
stock processor, each call once) giving the attention time, its share of the step and the step
with free attention ("ideal"); int8attn's call counters (int8attn / routed to SDPA / fallback);
the output's relative L1 distance to the stock output; peak memory. Compiled items also record
the graphs compiled, graph breaks, functions dynamo left eager, and timed steps that recompiled
(a guard failing on every call: such a step times the compiler; after two in a row the item
stops and is starred in the table). Speed-ups against ``sdpa`` and ``sdpa_cudnn`` are derived.

Usage::

    # everything (long: split it into calls, see "Splitting a run" below)
    python bench/pipeline.py --out results/pipeline
    # one model, eager only, shorter
    python bench/pipeline.py --models flux1024 --compile-modes eager --quick --out out/flux
    # cut DiTs to 8 blocks where time or memory is short (recorded in the output)
    python bench/pipeline.py --models wan --layers 8 --out out/wan
    # CPU smoke test of the script itself (tiny models, float32)
    INT8ATTN_LIBRARY=build-cpu/lib/libint8attn.so PYTHONPATH=bindings/python/src \\
        python bench/pipeline.py --device cpu --tiny --out /tmp/pipe-out
    # merge the pipeline.json of several runs into one table
    python bench/pipeline.py --merge out/flux out/wan --out results/pipeline

Output: ``OUT/pipeline.json`` (rewritten after every item, so a run killed by a time limit keeps
what it measured; a later run into the same OUT adds to it) and ``OUT/pipeline.md`` (the table,
likewise rewritten, and printed at the end). A progress bar goes to stderr, one line per
finished item to stdout.

Splitting a run: a model is built once per call, so split by model and mode, give every call
``--budget`` (no item starts after it, so the call ends with its table inside a time limit) and
its own OUT, then ``--merge`` the OUTs. Eager items cost ~50 steps per model (four configs of
2 warm-up + 6 timed + 1 attention-timing step, the policy 2 + 6 + 6); a compiled item costs one
inductor compile (about 1-3 min for these models) plus ~10 steps.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipeline_models as pm  # noqa: E402

STOCK = ("sdpa", "sdpa_cudnn")
INT8 = ("balanced", "fast", "policy", "routed")
CONFIGS = STOCK + INT8
MODES = ("eager", "compile")
SEED = 0
# Sampler steps of the generation the policy's headline step time stands for (its first and
# last step EXACT): a typical count for the models here.
POLICY_REF_STEPS = 30
STAT_KEYS = ("int8attn", "sdpa_routed", "fallback")


# ---- command line ------------------------------------------------------------------------------

def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(pm.MODEL_NAMES),
                   help=f"comma list of {', '.join(pm.MODEL_NAMES)} (default: all)")
    p.add_argument("--configs", default=",".join(c for c in CONFIGS if c != "routed"),
                   help=f"comma list of {', '.join(CONFIGS)} (default: all but routed)")
    p.add_argument("--compile-modes", default=",".join(MODES),
                   help="comma list of eager, compile (default: both)")
    p.add_argument("--steps", type=int, default=6,
                   help="timed steps per item, and S of the policy config (default 6)")
    p.add_argument("--warmup", type=int, default=2, help="warm-up steps (default 2)")
    p.add_argument("--quick", action="store_true", help="3 timed steps, 1 warm-up step")
    p.add_argument("--layers", type=int, default=None,
                   help="cut each transformer's main stack to N blocks (others keep their "
                        "ratio to it); UNets are not cut; default: full depth")
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    p.add_argument("--tiny", action="store_true",
                   help="tiny float32 versions of the models (a smoke test, e.g. on the CPU)")
    p.add_argument("--compile-backend", default=None,
                   help="torch.compile backend (default inductor; with --tiny 'eager': dynamo "
                        "traces, guards and graph breaks as with inductor, without minutes of "
                        "C++ compiling on a CPU)")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="start no item after this many seconds (the run then ends cleanly with "
                        "its table inside a time limit; items not run are left out)")
    p.add_argument("--out", default=None, help="write OUT/pipeline.json and OUT/pipeline.md")
    p.add_argument("--fresh", action="store_true",
                   help="start OUT/pipeline.json afresh instead of adding to it")
    p.add_argument("--merge", nargs="+", metavar="DIR", default=None,
                   help="measure nothing: merge DIR/pipeline.json of earlier runs into OUT")
    args = p.parse_args(argv)
    args.t_start = time.perf_counter()
    if args.quick:
        args.steps, args.warmup = 3, 1
    if args.compile_backend is None:
        args.compile_backend = "eager" if args.tiny else "inductor"
    args.models = _split(args.models, pm.MODEL_NAMES, "--models")
    args.configs = _split(args.configs, CONFIGS, "--configs")
    args.compile_modes = _split(args.compile_modes, MODES, "--compile-modes")
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    if "policy" in args.configs and args.steps < 3:
        p.error("the policy config needs --steps >= 3 (first and last steps are EXACT)")
    return args


def _split(text: str, allowed: tuple, flag: str) -> List[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if bad:
        raise SystemExit(f"{flag}: unknown {bad}; choose from {', '.join(allowed)}")
    return items


# ---- progress ------------------------------------------------------------------------------------

class Progress:
    """A bar over the (model, config, mode) items on stderr (tqdm when installed), and result
    lines on stdout that do not tear the bar."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.t0 = total, 0, time.perf_counter()
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
        self.bar = (tqdm(total=total, file=sys.stderr, unit="item", dynamic_ncols=True,
                         bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}]")
                    if tqdm is not None else None)

    def describe(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_description_str(text)
        else:
            el = time.perf_counter() - self.t0
            print(f"[{self.done}/{self.total} {int(el) // 60:02d}:{int(el) % 60:02d}] {text}",
                  file=sys.stderr, flush=True)

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)

    def write(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stdout)
        else:
            print(line, flush=True)
        sys.stdout.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ---- timing ------------------------------------------------------------------------------------

def timed(fn: Callable[[], Any], cuda: bool) -> tuple:
    """(fn(), milliseconds): CUDA events around the call and a wait for the end event on a GPU
    (the step's device time including any gaps the host leaves), wall time on the CPU."""
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn()
        end.record()
        end.synchronize()
        return out, start.elapsed_time(end)
    t0 = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t0) * 1e3


class AttentionRecorder:
    """Times each attention call of a pass (CUDA events, read after the pass so the step is not
    serialised) and counts the calls and their shapes. A call made inside a timed call (an
    int8attn processor's fallback reaching F.scaled_dot_product_attention) is part of it, not
    another call."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.events: List[tuple] = []
        self.cpu_ms = 0.0
        self.calls = 0
        self.shapes: Counter = Counter()
        self._depth = 0

    def call(self, fn: Callable[[], Any], q: torch.Tensor, k: torch.Tensor, layout: str) -> Any:
        if self._depth:
            return fn()
        self._depth += 1
        try:
            return self._timed(fn, q, k, layout)
        finally:
            self._depth -= 1

    def _timed(self, fn: Callable[[], Any], q: torch.Tensor, k: torch.Tensor, layout: str) -> Any:
        self.calls += 1
        self.shapes[_shape_key(q, k, layout)] += 1
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn()
            end.record()
            self.events.append((start, end))
            return out
        t0 = time.perf_counter()
        out = fn()
        self.cpu_ms += (time.perf_counter() - t0) * 1e3
        return out

    def total_ms(self) -> float:
        if not self.cuda:
            return self.cpu_ms
        torch.cuda.synchronize()
        return sum(s.elapsed_time(e) for s, e in self.events)


def _shape_key(q: torch.Tensor, k: torch.Tensor, layout: str) -> str:
    if q.dim() != 4:
        return f"q{tuple(q.shape)} k{tuple(k.shape)}"
    if layout == "NHD":  # [B, N, H, D]
        b, nq, h, d = q.shape
        nk = k.shape[1]
    else:  # [B, H, N, D]
        b, h, nq, d = q.shape
        nk = k.shape[2]
    return f"B{b} H{h} Nq{nq} Nk{nk} D{d}"


@contextlib.contextmanager
def recording_stock_attention(rec: AttentionRecorder) -> Iterator[None]:
    """``F.scaled_dot_product_attention`` timed: diffusers' processors and its native dispatch
    backend look the function up on the module at each call."""
    original = F.scaled_dot_product_attention

    def sdpa(*args: Any, **kwargs: Any) -> torch.Tensor:
        q = args[0] if args else kwargs["query"]
        k = args[1] if len(args) > 1 else kwargs["key"]
        return rec.call(lambda: original(*args, **kwargs), q, k, "HND")

    F.scaled_dot_product_attention = sdpa
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original


@contextlib.contextmanager
def recording_int8attn_attention(rec: AttentionRecorder) -> Iterator[None]:
    """``Int8AttnProcessor.attention`` and ``._masked`` timed (class attributes: the int8attn
    call, masked calls, the calls the routing table sends to SDPA and the fallbacks of
    unsupported calls pass through them), and
    ``F.scaled_dot_product_attention`` too: a UNet call the table routes is handed to diffusers'
    stock processor before any projection, and only that function sees it. A fallback that
    reaches it from inside a timed call is not counted again (AttentionRecorder)."""
    from int8attn.torch_integration import Int8AttnProcessor

    own = "attention" in Int8AttnProcessor.__dict__
    original = Int8AttnProcessor.attention  # a plain function, looked up on the class

    def attention(self: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  *args: Any, **kwargs: Any) -> torch.Tensor:
        return rec.call(lambda: original(self, query, key, value, *args, **kwargs), query, key,
                        kwargs.get("layout", "HND"))

    # Calls with a mask (a key-padding mask runs int8attn with k_lengths) go through _masked.
    original_masked = Int8AttnProcessor._masked

    def masked(self: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               mask: Any, layout: str, *args: Any, **kwargs: Any) -> torch.Tensor:
        return rec.call(lambda: original_masked(self, query, key, value, mask, layout, *args,
                                                **kwargs), query, key, layout)

    Int8AttnProcessor.attention = attention
    Int8AttnProcessor._masked = masked
    try:
        with recording_stock_attention(rec):
            yield
    finally:
        Int8AttnProcessor._masked = original_masked
        if own:
            Int8AttnProcessor.attention = original
        else:  # inherited: uncover the base class's again
            del Int8AttnProcessor.attention


# ---- the model -----------------------------------------------------------------------------------

def build_model(spec: pm.ModelSpec, device: torch.device) -> torch.nn.Module:
    """``spec.cls(**spec.config)`` with seeded random weights, made on ``device`` (initialising
    Flux's 12B parameters on the CPU would take minutes), cast like ``from_pretrained(...,
    torch_dtype=spec.dtype)`` would leave it, in eval mode without gradients."""
    import diffusers

    cls = getattr(diffusers, spec.cls)
    torch.manual_seed(SEED)
    with torch.device(device):
        model = cls(**spec.config)
    model.to(device)  # buffers built from numpy arrays start on the CPU
    cast_like_from_pretrained(model, spec.torch_dtype)
    model.eval().requires_grad_(False)
    return model


def cast_like_from_pretrained(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """Floating parameters and persistent buffers to ``dtype`` except those under the class's
    ``_keep_in_fp32_modules`` (Wan keeps its time embedder, norms, modulation table and RoPE in
    float32); non-persistent buffers (computed at construction, not in a checkpoint) keep their
    dtype. That is the state diffusers' loader leaves a model in. One tensor at a time, so the
    float32 copy is freed as it goes."""
    keep = list(getattr(model, "_keep_in_fp32_modules", None) or [])
    persistent = set(model.state_dict().keys())
    for mod_name, mod in model.named_modules():
        for kind in ("_parameters", "_buffers"):
            for name, t in list(getattr(mod, kind).items()):
                if t is None or not t.is_floating_point() or t.dtype == dtype:
                    continue
                full = f"{mod_name}.{name}" if mod_name else name
                if kind == "_buffers" and full not in persistent:
                    continue
                if any(k in full.split(".") for k in keep):
                    continue
                if kind == "_parameters":
                    t.data = t.data.to(dtype)
                else:
                    mod._buffers[name] = t.to(dtype)


def install(model: torch.nn.Module, config: str, steps: int) -> Any:
    """Put ``config``'s attention processors in; returns int8attn's shared processor (or None
    for stock configs)."""
    if config in STOCK:
        return None
    import int8attn

    if config == "policy":
        int8attn.replace_attention_with_int8(model, mode="fast", num_inference_steps=steps)
    elif config == "routed":
        int8attn.replace_attention_with_int8(model, mode="fast", route="sdpa")
    else:
        int8attn.replace_attention_with_int8(model, mode=config)
    return model._int8attn_processor


def prediction(output: Any) -> torch.Tensor:
    """A denoiser's ``return_dict=False`` output as one tensor (Z-Image's is a list per
    sample)."""
    first = output[0]
    return torch.stack(list(first)) if isinstance(first, (list, tuple)) else first


def attention_processors(model: torch.nn.Module) -> Dict[str, Any]:
    """Every attention module's processor under ``"<module name>.processor"``: diffusers'
    ``attn_processors``, also for models without that property (Z-Image) and for attention
    modules without ``set_processor`` (Mochi), as ``replace_attention_with_int8`` finds them."""
    from int8attn._processors import _processor_setter

    return {f"{name}.processor": mod.processor for name, mod in model.named_modules()
            if _processor_setter(mod) is not None}


def restore(model: torch.nn.Module, saved: Dict[str, Any]) -> None:
    """Put the original processors (``attention_processors``' dict) back, module by module,
    and check that every one is back."""
    from int8attn._processors import _processor_setter

    for name, mod in model.named_modules():
        key = f"{name}.processor"
        setter = _processor_setter(mod) if key in saved else None
        if setter is not None:
            setter(saved[key])
    if attention_processors(model) != saved:
        raise RuntimeError("could not restore the original attention processors")
    if "_int8attn_processor" in model.__dict__:
        del model.__dict__["_int8attn_processor"]  # or set_timestep would find a stale one


def backend_context(config: str) -> Any:
    if config == "sdpa_cudnn":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel(SDPBackend.CUDNN_ATTENTION)
    return contextlib.nullcontext()


def _dynamo_counts() -> Dict[str, Optional[int]]:
    """Dynamo's counters so far (they survive ``reset()``, so callers take differences):
    graphs compiled, graph breaks (including the unsupported constructs that make dynamo give
    up on a whole function), and functions it skipped, which then run eagerly."""
    try:
        from torch._dynamo.utils import counters

        frames = counters["frames"]
        return {"graphs": int(counters["stats"]["unique_graphs"]),
                "breaks": int(sum(counters["graph_break"].values())
                              + sum(counters["unimplemented"].values())),
                "skipped": int(frames["total"] - frames["ok"])}
    except Exception:  # noqa: BLE001 - a diagnostic only
        return {"graphs": None, "breaks": None, "skipped": None}


def _diff(a: Optional[int], b: Optional[int]) -> Optional[int]:
    return a - b if a is not None and b is not None else None


def _stats(proc: Any) -> Optional[Dict[str, int]]:
    return dict(proc.stats) if proc is not None else None


def _stats_diff(after: Optional[Dict[str, int]],
                before: Optional[Dict[str, int]]) -> Optional[Dict[str, int]]:
    if after is None or before is None:
        return None
    return {k: after.get(k, 0) - before.get(k, 0) for k in STAT_KEYS}


# ---- one item ----------------------------------------------------------------------------------

class RecompileWatch:
    """Counts the steps on which dynamo compiled a new graph. A guard that fails on every call
    (a counter or the sampler step traced as a constant) makes each step recompile: such steps
    time the compiler, not the compiled model, so after ``limit`` of them in a row the caller
    stops stepping (with inductor each can cost minutes on a large model)."""

    def __init__(self, active: bool, limit: int = 2) -> None:
        self.active, self.limit = active, limit
        self.steps = self.streak = 0

    def __call__(self, fn: Callable[[], Any]) -> Any:
        if not self.active:
            return fn()
        before = _dynamo_counts()["graphs"]
        out = fn()
        grew = _diff(_dynamo_counts()["graphs"], before)
        if grew:
            self.steps += 1
            self.streak += 1
        else:
            self.streak = 0
        return out

    @property
    def give_up(self) -> bool:
        return self.active and self.streak >= self.limit


def measure(model: torch.nn.Module, inputs: Dict[str, Any], config: str, mode: str,
            proc: Any, args: argparse.Namespace, cuda: bool) -> Dict[str, Any]:
    """Time one (config, mode) item on a model whose processors are already installed."""
    import int8attn

    policy_steps = args.steps if config == "policy" else 0
    compiled = mode == "compile"
    res: Dict[str, Any] = {}
    fn: Callable[..., Any] = model

    def step(i: int) -> torch.Tensor:
        if policy_steps:
            int8attn.set_timestep(model, i % policy_steps)
        return prediction(fn(**inputs))

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    stats0 = _stats(proc)
    with torch.no_grad(), backend_context(config):
        if compiled:
            torch._dynamo.reset()
            dyn0 = _dynamo_counts()
            fn = torch.compile(model, backend=args.compile_backend)
            t0 = time.perf_counter()
            step(0)
            if cuda:
                torch.cuda.synchronize()
            res["compile_s"] = time.perf_counter() - t0
            # a policy is warmed up on every step index, so that a graph specialised per
            # sampler step shows up here rather than in the timed steps
            warm = range(1, 1 + max(args.warmup, policy_steps))
        else:
            # the policy's warm-up reaches its first ordinary (FAST) step: else, with one
            # warm-up step (--quick), the timed step 1 is the process's first FAST step and
            # carries its one-time costs (first launches of the FAST kernels)
            warm = range(max(args.warmup, 2) if policy_steps else args.warmup)
        watch = RecompileWatch(compiled)
        for i in warm:
            watch(lambda: step(i))
            if watch.give_up:
                res["warmup_stopped"] = f"recompiled on {watch.streak} warm-up steps in a row"
                break
        if cuda:
            torch.cuda.synchronize()
        if compiled:
            dyn1 = _dynamo_counts()
            # more than one graph: graph breaks split the model, or the warm-up recompiled
            res["graphs_compiled"] = _diff(dyn1["graphs"], dyn0["graphs"])
            res["graph_breaks"] = _diff(dyn1["breaks"], dyn0["breaks"])
            res["frames_run_eagerly"] = _diff(dyn1["skipped"], dyn0["skipped"])
            res["recompiled_warmup_steps"] = watch.steps

        n = policy_steps or args.steps
        capture = 1 if policy_steps else n - 1  # policy: step 1 is an ordinary (FAST) step
        times: List[float] = []
        out = None
        # after a warm-up that recompiled on every step, the first recompiling timed step is
        # enough to say so
        watch = RecompileWatch(compiled, limit=1 if "warmup_stopped" in res else 2)
        for i in range(n):
            o, ms = watch(lambda: timed(lambda: step(i), cuda))
            times.append(ms)
            if i == capture or out is None:
                out = o.detach().float().cpu()
            del o
            if watch.give_up:
                res["timing_stopped"] = (f"recompiled on {watch.streak} timed steps in a row; "
                                         f"{len(times)} of {n} steps timed")
                break
        if compiled:
            # the timed steps that compiled a new graph: their times include the compiler
            res["recompiles_while_timed"] = watch.steps
        res["step_ms_all"] = [round(t, 4) for t in times]
        res["step_ms_median"] = statistics.median(times)
        res["step_ms_mean"] = statistics.fmean(times)
        # the headline: the median step; for the policy, the mean over its S steps (what a
        # generation of S steps costs per step)
        res["step_ms"] = res["step_ms_mean"] if policy_steps else res["step_ms_median"]
        res["output_finite"] = bool(torch.isfinite(out).all())
        if not compiled:
            res.update(attention_pass(step, config, proc, policy_steps, cuda))
    res["int8attn_stats_total"] = _stats_diff(_stats(proc), stats0)
    if cuda:
        res["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    res["_output"] = out  # for the comparison with the stock output; not written
    return res


def attention_pass(step: Callable[[int], torch.Tensor], config: str, proc: Any,
                   policy_steps: int, cuda: bool) -> Dict[str, Any]:
    """One more step (all S for the policy) with every attention call timed. The policy's
    attention ms and call counts are a generation's mean step, weighed as its step time is
    (``policy_step_ms``): over S = 3 a plain mean would count the two EXACT steps as 2/3 of
    the generation instead of 2/30, and set their attention beside a step time that does not."""
    rec = AttentionRecorder(cuda)
    recording = recording_stock_attention if config in STOCK else recording_int8attn_attention
    n = policy_steps or 1
    step_ms, attn_steps, stat_steps = [], [], []
    with recording(rec):
        for i in range(n):
            before, stats0 = rec.total_ms(), _stats(proc)
            _, ms = timed(lambda: step(i), cuda)
            step_ms.append(ms)
            attn_steps.append(rec.total_ms() - before)
            stat_steps.append(_stats_diff(_stats(proc), stats0))

    def per_step(values: List[float]) -> float:
        weighed = policy_step_ms(values) if policy_steps else None
        return weighed if weighed is not None else statistics.fmean(values)

    res = {"attn_ms": per_step(attn_steps), "attn_ms_all": [round(t, 4) for t in attn_steps],
           "attn_calls": rec.calls / n,
           "attn_shapes": {k: v / n for k, v in sorted(rec.shapes.items(),
                                                        key=lambda kv: -kv[1])},
           "attn_pass_step_ms": statistics.fmean(step_ms),
           "int8attn_stats_step": ({k: per_step([float(st[k]) for st in stat_steps])
                                    for k in STAT_KEYS} if stat_steps[0] is not None else None)}
    total = sum(sum(st.values()) for st in stat_steps) if stat_steps[0] is not None else None
    if total is not None and total > rec.calls:
        # a processor path that does not pass through Int8AttnProcessor.attention (the masked
        # fallbacks count but bypass it): its time is missing from attn_ms. (Fewer counted
        # than timed: attention outside the processors, Mochi's text pooling.)
        res["attn_calls_untimed"] = (total - rec.calls) / n
    return res


def run_item(model: torch.nn.Module, inputs: Dict[str, Any], config: str, mode: str,
             proc: Any, args: argparse.Namespace, cuda: bool) -> Dict[str, Any]:
    """``measure`` with failures (OOM, cuDNN refusing a shape, a binding error) recorded
    instead of raised, and the compiled graph and cached memory released afterwards."""
    t0 = time.perf_counter()
    try:
        res = measure(model, inputs, config, mode, proc, args, cuda)
    except Exception as e:  # noqa: BLE001 - one failed item must not end the run
        res = {"error": f"{type(e).__name__}: {e}"[:1000],
               "traceback": traceback.format_exc()[-4000:]}
    finally:
        if mode == "compile":
            torch._dynamo.reset()
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
    res["wall_s"] = time.perf_counter() - t0
    return res


# ---- one model -----------------------------------------------------------------------------------

def spec_record(spec: pm.ModelSpec) -> Dict[str, Any]:
    return {"class": spec.cls, "config": _jsonable(spec.config), "dtype": spec.dtype,
            "inputs": _jsonable(spec.inputs), "description": spec.description,
            "source": spec.source, "attention": spec.attention,
            "layers_cut": spec.layers_cut}


def run_model(spec: pm.ModelSpec, args: argparse.Namespace, device: torch.device,
              report: Dict[str, Any], progress: Progress, save: Callable[[], None]) -> None:
    cuda = device.type == "cuda"
    entry = report["models"].get(spec.name)
    record = spec_record(spec)
    if entry is None or entry.get("spec") != record:  # other architecture/size: start over
        entry = report["models"][spec.name] = {"spec": record, "results": {}}
    results = entry["results"]
    n_items = len(args.configs) * len(args.compile_modes)
    if out_of_budget(args):
        progress.write(f"{spec.name}: not run: --budget {args.budget:g} s reached")
        progress.advance(n_items)
        return
    progress.describe(f"{spec.name}: building")
    model = None
    try:
        t0 = time.perf_counter()
        model = build_model(spec, device)
        entry["build"] = {"seconds": time.perf_counter() - t0,
                          "parameters": sum(p.numel() for p in model.parameters()),
                          "attention_modules": len(attention_processors(model)),
                          "processors": sorted({type(p).__name__
                                                for p in attention_processors(model).values()})}
        if cuda:
            entry["build"]["weights_gib"] = torch.cuda.memory_allocated() / 2**30
        inputs = pm.make_inputs(spec, device, SEED)
    except Exception as e:  # noqa: BLE001
        err = f"model build failed: {type(e).__name__}: {e}"[:1000]
        entry["error"] = err
        for config in args.configs:
            for mode in args.compile_modes:
                results.setdefault(config, {})[mode] = {"error": err}
        progress.write(f"{spec.name}: {err}")
        progress.advance(n_items)
        model = None  # a half-built model's memory goes with it
        _free(cuda)
        save()
        return
    entry.pop("error", None)
    progress.write(f"{spec.name}: {spec.description}; "
                   f"{entry['build']['parameters'] / 1e6:,.1f}M parameters, built in "
                   f"{entry['build']['seconds']:.1f} s"
                   + (f"; layers cut: {spec.layers_cut}" if spec.layers_cut else ""))
    saved = attention_processors(model)
    reference: Optional[torch.Tensor] = None
    try:
        for i, config in enumerate(args.configs):
            try:
                reference = run_config(model, inputs, spec, config, saved, reference, results,
                                       args, cuda, progress, save)
            except Exception as e:  # noqa: BLE001 - processors not restorable: model unusable
                entry["error"] = f"{config}: {type(e).__name__}: {e}"[:1000]
                progress.write(f"{spec.name}: giving up on this model: {entry['error']}")
                progress.advance(len(args.compile_modes) * (len(args.configs) - i - 1))
                save()
                break
    finally:
        del model, inputs, saved
        _free(cuda)


def run_config(model: torch.nn.Module, inputs: Dict[str, Any], spec: pm.ModelSpec, config: str,
               saved: Dict[str, Any], reference: Optional[torch.Tensor],
               results: Dict[str, Any], args: argparse.Namespace, cuda: bool,
               progress: Progress, save: Callable[[], None]) -> Optional[torch.Tensor]:
    """Both modes of one config; returns the stock eager output (the reference) once known."""
    per_mode = results.setdefault(config, {})
    try:
        proc = install(model, config, args.steps)
    except Exception as e:  # noqa: BLE001
        for mode in args.compile_modes:
            per_mode[mode] = {"error": f"installing processors: {type(e).__name__}: {e}"}
        progress.advance(len(args.compile_modes))
        restore(model, saved)
        save()
        return reference
    try:
        eager_error = None
        for mode in args.compile_modes:
            progress.describe(f"{spec.name} {config} {mode}")
            if out_of_budget(args):
                progress.write(f"{spec.name:10s} {config:10s} {mode:7s} not run: --budget "
                               f"{args.budget:g} s reached")
                progress.advance()
                continue
            if mode == "compile" and eager_error is not None:
                res = {"error": f"skipped: the eager run failed ({eager_error})"}
            else:
                res = run_item(model, inputs, config, mode, proc, args, cuda)
            out = res.pop("_output", None)
            if mode == "eager":
                eager_error = res.get("error")
            if config == "sdpa" and out is not None and (reference is None or mode == "eager"):
                reference = out  # stock eager output; stock compiled in a compile-only run
            res["rel_l1_vs_sdpa"] = _rel_l1(out, reference)
            per_mode[mode] = res
            derive(results)
            progress.advance()
            progress.write(item_line(spec.name, config, mode, res))
            save()
    finally:
        restore(model, saved)
    return reference


def out_of_budget(args: argparse.Namespace) -> bool:
    return args.budget is not None and time.perf_counter() - args.t_start > args.budget


def _rel_l1(out: Optional[torch.Tensor], ref: Optional[torch.Tensor]) -> Optional[float]:
    if out is None or ref is None or out.shape != ref.shape:
        return None
    if not (torch.isfinite(out).all() and torch.isfinite(ref).all()):
        return None
    den = ref.abs().sum().item()
    return (out - ref).abs().sum().item() / den if den else None


def _free(cuda: bool) -> None:
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()


# ---- derived numbers -----------------------------------------------------------------------------

def policy_step_ms(times: List[float]) -> Optional[float]:
    """A POLICY_REF_STEPS-step generation's mean step under the default policy, from one timed
    pass over its S steps: the first and last (EXACT) steps as timed, every other step at the
    median of the ordinary steps. The plain mean over S = 6 would weigh the EXACT steps 1/3,
    not the 2/30 of a generation users run."""
    if len(times) < 3:
        return None
    edge = (times[0] + times[-1]) / 2.0
    ordinary = statistics.median(times[1:-1])
    return (2.0 * edge + (POLICY_REF_STEPS - 2) * ordinary) / POLICY_REF_STEPS


def derive(results: Dict[str, Any]) -> None:
    """Attention share, ideal step and speed-ups of every item against the stock configs
    (recomputed as items arrive)."""
    for mode, r in results.get("policy", {}).items():
        ref = (policy_step_ms(r.get("step_ms_all") or [])
               if "timing_stopped" not in r else None)
        if ref is not None:
            r["step_ms"] = ref
            r["policy_ref_steps"] = POLICY_REF_STEPS
    for config, per_mode in results.items():
        for mode, r in per_mode.items():
            if "step_ms" not in r:
                continue
            if r.get("attn_ms") is not None:
                r["attn_share"] = r["attn_ms"] / r["step_ms"]
                r["ideal_ms"] = r["step_ms"] - r["attn_ms"]
            for stock in STOCK:
                s = results.get(stock, {}).get(mode, {})
                r[f"speedup_vs_{stock}"] = (s["step_ms"] / r["step_ms"]
                                            if "step_ms" in s else None)
                se = results.get(stock, {}).get("eager", {})
                if mode == "eager":
                    r[f"attn_speedup_vs_{stock}"] = (
                        se["attn_ms"] / r["attn_ms"]
                        if se.get("attn_ms") and r.get("attn_ms") else None)


def item_line(model: str, config: str, mode: str, r: Dict[str, Any]) -> str:
    head = f"{model:10s} {config:10s} {mode:7s}"
    if "error" in r:
        return f"{head} ERROR {r['error'].splitlines()[0][:200]}"
    parts = []
    if "compile_s" in r:
        parts.append(f"compile {r['compile_s']:.1f} s ({r.get('graphs_compiled')} graphs, "
                     f"{r.get('graph_breaks')} breaks, {r.get('frames_run_eagerly')} functions "
                     f"left eager)")
    what = f"mean of a {POLICY_REF_STEPS}-step generation" if config == "policy" else "median"
    parts.append(f"step {r['step_ms']:.2f} ms ({what})")
    for stock in STOCK:
        if config != stock and r.get(f"speedup_vs_{stock}"):
            parts.append(f"x{r[f'speedup_vs_{stock}']:.3f} vs {stock}")
    if r.get("attn_ms") is not None:
        parts.append(f"attn {r['attn_ms']:.2f} ms in {r['attn_calls']:g} calls "
                     f"({100 * r['attn_share']:.1f}%), ideal {r['ideal_ms']:.2f} ms")
    st = r.get("int8attn_stats_step")
    if st:
        parts.append("int8attn/routed/fallback " + "/".join(f"{st[k]:g}" for k in STAT_KEYS))
    if r.get("recompiles_while_timed"):
        parts.append(f"RECOMPILED on {r['recompiles_while_timed']} timed steps (not a compiled "
                     f"step's time)" + (", timing stopped" if r.get("timing_stopped") else ""))
    if r.get("rel_l1_vs_sdpa") is not None and config != "sdpa":
        parts.append(f"rel-L1 {r['rel_l1_vs_sdpa']:.4f}")
    if not r.get("output_finite", True):
        parts.append("output not finite")
    return f"{head} " + ", ".join(parts)


# ---- report -----------------------------------------------------------------------------------

def collect_meta(args: argparse.Namespace, device: torch.device) -> Dict[str, Any]:
    import diffusers
    import int8attn

    meta: Dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join([os.path.basename(sys.executable)] + sys.argv),
        "host": platform.node(), "python": platform.python_version(),
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "diffusers": diffusers.__version__, "int8attn": int8attn.version(),
        "int8attn_library": int8attn.library_path(), "int8attn_features": int8attn.features(),
        "git": _git_revision(), "device": str(device),
        "steps": args.steps, "warmup": args.warmup, "layers": args.layers, "tiny": args.tiny,
        "compile_backend": args.compile_backend,
    }
    if device.type == "cuda":
        meta["gpu"] = torch.cuda.get_device_name(device)
        meta["capability"] = list(torch.cuda.get_device_capability(device))
    try:
        meta["routing_tables"] = [{k: t[k] for k in ("device", "capability", "source", "general")}
                                  for t in int8attn.routing_tables()]
        if device.type == "cuda":  # the one this GPU reads (its own, else its capability's)
            from int8attn import _routing

            table = _routing.table_for(tuple(meta["capability"]), meta["gpu"])
            meta["routing_table"] = table.source if table is not None else None
    except Exception as e:  # noqa: BLE001 - informational
        meta["routing_tables"] = f"unavailable: {e}"
    return meta


def _git_revision() -> Optional[str]:
    root = Path(__file__).resolve().parent.parent
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001 - no git on the machine
        return None
    return (rev + ("+dirty" if dirty else "")) if rev else None


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float):
        return x if x == x and abs(x) != float("inf") else None
    if x is None or isinstance(x, (bool, int, str)):
        return x
    return str(x)


def write_report(out_dir: Path, report: Dict[str, Any]) -> str:
    """OUT/pipeline.json and OUT/pipeline.md; returns the markdown."""
    md = render_markdown(report)
    _write_atomic(out_dir / "pipeline.json", json.dumps(_jsonable(report), indent=1))
    _write_atomic(out_dir / "pipeline.md", md)
    return md


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # a run killed mid-write leaves the previous complete file


def load_report(path: Path) -> Optional[Dict[str, Any]]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def merge_reports(reports: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Later reports win per (model, config, mode); a model measured with another spec (tiny,
    layers cut) replaces the earlier one's entry."""
    out: Dict[str, Any] = {"meta": {}, "runs": [], "models": {}}
    for rep in reports:
        out["meta"] = rep.get("meta", {})
        out["runs"].extend(rep.get("runs") or [rep.get("meta", {})])
        for name, entry in rep.get("models", {}).items():
            cur = out["models"].get(name)
            if cur is None or cur.get("spec") != entry.get("spec"):
                out["models"][name] = json.loads(json.dumps(entry))
                continue
            for key in ("build", "error"):
                if key in entry:
                    cur[key] = entry[key]
            for config, per_mode in entry.get("results", {}).items():
                cur["results"].setdefault(config, {}).update(per_mode)
    for entry in out["models"].values():
        derive(entry.get("results", {}))
    return out


def _fmt(x: Any, spec: str = ".2f", suffix: str = "") -> str:
    return "–" if x is None else f"{x:{spec}}{suffix}"


_COLUMNS = ("model", "config", "eager ms", "compiled ms", "× sdpa eager", "× sdpa compiled",
            "× cudnn eager", "× cudnn compiled", "attn ms (calls)", "attn share", "ideal ms",
            "attn × sdpa", "calls i8/routed/fb")


def _table_row(label: str, config: str, e: Dict[str, Any], c: Dict[str, Any]) -> List[str]:
    """One row: ``e``/``c`` are the eager and compiled results of a config."""
    comp = _fmt(c.get("step_ms")) + ("*" if c.get("recompiles_while_timed") else "")
    attn = _fmt(e.get("attn_ms"))
    if e.get("attn_calls") is not None:
        attn += f" ({e['attn_calls']:g})"
    share = None if e.get("attn_share") is None else 100 * e["attn_share"]
    st = e.get("int8attn_stats_step")
    calls = "/".join(f"{st[k]:g}" for k in STAT_KEYS) if st else "–"
    return [label, config, _fmt(e.get("step_ms")), comp,
            _fmt(e.get("speedup_vs_sdpa"), ".3f"), _fmt(c.get("speedup_vs_sdpa"), ".3f"),
            _fmt(e.get("speedup_vs_sdpa_cudnn"), ".3f"),
            _fmt(c.get("speedup_vs_sdpa_cudnn"), ".3f"), attn, _fmt(share, ".1f", "%"),
            _fmt(e.get("ideal_ms")), _fmt(e.get("attn_speedup_vs_sdpa"), ".3f"), calls]


def render_markdown(report: Dict[str, Any]) -> str:
    meta = report.get("meta", {})
    lines = ["# Whole denoising step: stock attention vs int8attn", ""]
    lines.append(
        f"{meta.get('gpu', meta.get('device', '?'))}, torch {meta.get('torch')}, "
        f"cuDNN {meta.get('cudnn')}, diffusers {meta.get('diffusers')}, "
        f"int8attn {meta.get('int8attn')} ({meta.get('git')}), {meta.get('date')}. "
        f"Random weights, published configs; one step = one denoiser forward on the CFG batch; "
        f"median of {meta.get('steps')} steps after {meta.get('warmup')} warm-up "
        f"(policy: the mean step of a {POLICY_REF_STEPS}-step generation, its first and last "
        f"steps EXACT: the first and last of {meta.get('steps')} timed steps as timed, the "
        f"other {POLICY_REF_STEPS - 2} at the median of the timed ordinary steps). "
        f"Attention ms, share and ideal (step − attention) from an eager pass timing every "
        f"attention call (the policy's weighed as its step is); int8attn calls per step: "
        f"int8attn/routed to SDPA/fallback.")
    runs = report.get("runs") or [meta]
    lines += ["", "Commands: " + "; ".join(f"`{r.get('command')}`" for r in runs), ""]
    lines.append("| " + " | ".join(_COLUMNS) + " |")
    lines.append("|" + "---|" * len(_COLUMNS))
    errors, starred = [], False
    for name, entry in report.get("models", {}).items():
        label = name + (" (cut)" if entry.get("spec", {}).get("layers_cut") else "")
        for config, per_mode in entry.get("results", {}).items():
            for mode, r in per_mode.items():
                if "error" in r:
                    errors.append(f"- {name} {config} {mode}: {r['error'].splitlines()[0]}")
            e, c = per_mode.get("eager", {}), per_mode.get("compile", {})
            starred = starred or bool(c.get("recompiles_while_timed"))
            lines.append("| " + " | ".join(_table_row(label, config, e, c)) + " |")
    lines.append("")
    if starred:
        lines += ["\\* recompiled on timed steps (a guard failing on every call): the time "
                  "includes the compiler and is not a compiled step's; see the JSON's "
                  "recompiles_while_timed / timing_stopped.", ""]
    for name, entry in report.get("models", {}).items():
        spec = entry.get("spec", {})
        cut = spec.get("layers_cut")
        lines.append(f"- **{name}**: {spec.get('description')}; {spec.get('attention')}"
                     + (f"; **layers cut**: {cut}" if cut else ""))
    if errors:
        lines += ["", "Errors:", ""] + errors
    return "\n".join(lines) + "\n"


# ---- main --------------------------------------------------------------------------------------

def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    out_dir = Path(args.out) if args.out else None
    if args.merge:
        if out_dir is None:
            raise SystemExit("--merge needs --out")
        reps = [r for r in (load_report(Path(d) / "pipeline.json") for d in args.merge) if r]
        report = merge_reports(reps)
        out_dir.mkdir(parents=True, exist_ok=True)
        print(write_report(out_dir, report))
        return 0

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device (use --device cpu --tiny for a smoke test)")
    import int8attn  # noqa: F401 - fails early and clearly if the library is missing
    import int8attn.torch_integration  # noqa: F401

    table = pm.TINY if args.tiny else pm.FULL
    specs = [table[name].with_layers(args.layers) for name in args.models]
    meta = collect_meta(args, device)
    report: Dict[str, Any] = {"meta": meta, "runs": [meta], "models": {}}
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        old = None if args.fresh else load_report(out_dir / "pipeline.json")
        if old:
            report = merge_reports([old, {"meta": meta, "models": {}}])

    def save() -> None:
        # both files after every item: a run killed by a time limit leaves a complete table of
        # what it measured
        if out_dir is not None:
            write_report(out_dir, report)

    save()
    print(f"{meta.get('gpu', device)}; torch {meta['torch']}, cuDNN {meta['cudnn']}, "
          f"diffusers {meta['diffusers']}, int8attn {meta['int8attn']}; "
          f"{len(specs)} models x {len(args.configs)} configs x {len(args.compile_modes)} modes",
          flush=True)
    progress = Progress(len(specs) * len(args.configs) * len(args.compile_modes))
    t0 = time.perf_counter()
    try:
        for spec in specs:
            run_model(spec, args, device, report, progress, save)
    finally:
        progress.close()
        report["meta"]["total_s"] = time.perf_counter() - t0
        save()
    print()
    print(render_markdown(report))
    print(f"total {time.perf_counter() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
