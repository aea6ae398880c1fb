#!/usr/bin/env python3
"""Sequence-parallel attention: int8attn.distributed vs PyTorch SDPA distributed the same way.

Every variant (ring, ulysses, hybrid) runs twice per shape: with int8attn as the per-rank kernel
(each mode asked for) and with PyTorch SDPA as the per-rank kernel (cuDNN, else flash, else
efficient attention on CUDA, taking their LSE; an fp32 logsumexp reference on the CPU), through
the same ring / all-to-all code, so only the kernel differs. The same layer is also timed on one
device (rank 0, whole sequence, no communication) to give the scaling efficiency
``t(1 device) / (n · t(n devices))``.

Timing: each repetition starts after a barrier and ends after the device is synchronised; the
time of a repetition is the slowest rank's (all_reduce MAX), and the median of the repetitions is
reported. Accuracy: relative L1 of the distributed output against the one-device EXACT output
(rank 0's chunk), so a wrong exchange shows at once.

Usage:
  torchrun --nproc_per_node 2 bench/distributed.py --out bench/results/distributed
  python3 bench/distributed.py --quick --out /tmp/d          # world size 1 (smoke)
  torchrun --nproc_per_node 2 bench/distributed.py --device cpu --shapes tiny --out /tmp/d
Needs torch; int8attn from the package or PYTHONPATH=bindings/python/src with INT8ATTN_LIBRARY.
Progress goes to stderr; the table (markdown) and JSON go to --out.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist

import int8attn
import int8attn.distributed as idist

# name: (B, H, N, D). Video DiT shapes of shared/BENCHMARKS.md plus HunyuanVideo at 720p.
SHAPES = {
    "wan_480p_81f": (1, 40, 32760, 128),
    "hunyuanvideo_720p": (1, 24, 119040, 128),
    "cogvideox_cfg": (2, 48, 17776, 64),
    "flux_1024px": (1, 24, 4608, 128),
    "tiny": (1, 8, 301, 64),  # odd length: uneven shards; small enough for the CPU
}
DEFAULT_GPU = ("wan_480p_81f", "hunyuanvideo_720p", "cogvideox_cfg")


def log(msg: str) -> None:
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(msg, file=sys.stderr, flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init(device: str) -> torch.device:
    """Join torchrun's group, or make a world of one when run plainly."""
    backend = "nccl" if device == "cuda" else "gloo"
    if "RANK" not in os.environ:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(_free_port()))
    if device == "cuda":  # before the group, so NCCL binds each rank to its own GPU
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dist.init_process_group(backend, device_id=torch.device("cuda", local))
        return torch.device("cuda", local)
    dist.init_process_group(backend)
    # The library's CPU thread pool does the work; torch's own threads would only compete.
    torch.set_num_threads(1)
    return torch.device("cpu")


# ---- the SDPA kernel, with the library's (o, lse) conventions ----------------------------------
def _sdpa_cuda(q, k, v, causal, scale):
    """(o, lse [B,H,N] natural log) from cuDNN, flash or efficient attention, first that works."""
    ops = torch.ops.aten
    tries = []
    if hasattr(ops, "_scaled_dot_product_cudnn_attention"):
        tries.append(("cudnn", lambda: ops._scaled_dot_product_cudnn_attention(
            q, k, v, None, True, 0.0, causal, False, scale=scale)))
    tries.append(("flash", lambda: ops._scaled_dot_product_flash_attention(
        q, k, v, 0.0, causal, False, scale=scale)))
    tries.append(("efficient", lambda: ops._scaled_dot_product_efficient_attention(
        q, k, v, None, True, 0.0, causal, scale=scale)))
    for name, fn in tries:
        if name in _sdpa_failed:
            continue
        try:
            r = fn()
        except RuntimeError:
            _sdpa_failed.add(name)
            continue
        n = q.shape[2]
        lse = r[1].reshape(q.shape[0], q.shape[1], -1)[:, :, :n]  # efficient pads N to 32
        if name not in _sdpa_used:  # first use: is its LSE the library's convention?
            m = min(64, n)
            s = (q[:, :, :m].float() @ k.float().transpose(-1, -2)) * scale
            if causal:
                s = s.masked_fill(torch.ones(m, k.shape[2], dtype=torch.bool,
                                             device=q.device).triu(1), float("-inf"))
            want = torch.logsumexp(s, -1)
            if (lse[:, :, :m].float() - want).abs().max().item() > 1e-2:
                log(f"    SDPA {name}: its LSE is not the natural log of the scaled scores; "
                    "not used")
                _sdpa_failed.add(name)
                continue
            _sdpa_used.add(name)
        return r[0], lse.float()
    raise RuntimeError("no SDPA backend with an LSE output took these inputs")


_sdpa_failed: set = set()
_sdpa_used: set = set()


def sdpa_kernel(q, k, v, *, causal=False, k_lengths=None, return_lse=True, mode=None,
                sm_scale=None, **_options):
    """A kernel for int8attn.distributed.attention made of PyTorch SDPA (no key lengths: the
    benchmark has no padding)."""
    assert k_lengths is None, "the SDPA baseline takes no padding"
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    if k.shape[1] != q.shape[1]:
        g = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    if q.is_cuda:
        return _sdpa_cuda(q, k, v, causal, scale)
    _sdpa_used.add("cpu-fp32-logsumexp")
    s = (q.float() @ k.float().transpose(-1, -2)) * scale
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1),
                          float("-inf"))
    lse = torch.logsumexp(s, -1)
    return (torch.exp(s - lse.unsqueeze(-1)) @ v.float()).to(q.dtype), lse


# ---- timing ------------------------------------------------------------------------------------
def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def time_ms(fn, dev: torch.device, reps: int, group_wide: bool = True) -> float:
    """Median over repetitions of the slowest rank's milliseconds (group_wide), or this rank's."""
    for _ in range(2):
        fn()
    _sync(dev)
    times = []
    for _ in range(reps):
        if group_wide:
            dist.barrier()
        _sync(dev)
        t0 = time.perf_counter()
        fn()
        _sync(dev)
        ms = torch.tensor([(time.perf_counter() - t0) * 1e3], dtype=torch.float64)
        if group_wide:
            ms = ms.to(dev)
            dist.all_reduce(ms, op=dist.ReduceOp.MAX)
        times.append(float(ms.item()))
    return statistics.median(times)


def rel_l1(o: torch.Tensor, ref: torch.Tensor) -> float:
    return float((o.double() - ref.double()).abs().sum() / ref.double().abs().sum())


# ---- one shape ---------------------------------------------------------------------------------
def variants(world: int, heads: int, u_degree: int, causal: bool):
    """(name, SequenceParallel or None, reason, zigzag) for every variant at this world size;
    causal runs add the zigzag (load-balanced) split of the ring variants."""
    out = [("ring", idist.SequenceParallel(variant="ring"), "")]
    if heads % world == 0:
        out.append(("ulysses", idist.SequenceParallel(variant="ulysses"), ""))
    else:
        out.append(("ulysses", None, f"{heads} heads do not divide by {world} ranks"))
    if world >= 4 and world % u_degree == 0 and u_degree < world and heads % u_degree == 0:
        out.append((f"hybrid_u{u_degree}",
                    idist.SequenceParallel(variant="hybrid", ulysses_degree=u_degree), ""))
    else:
        out.append((f"hybrid_u{u_degree}", None, "needs a world of at least 4 ranks that "
                    "the Ulysses degree divides, and heads it divides"))
    rows = [(name, sp, reason, False) for name, sp, reason in out]
    if causal and world > 1:
        rows += [(name + "_zigzag", sp, reason, True) for name, sp, reason in out
                 if not name.startswith("ulysses")]
    return rows


def run_shape(name, shape, args, dev, dtype):
    b, h, n, d = shape
    world, rank = dist.get_world_size(), dist.get_rank()
    gen = torch.Generator(device=dev).manual_seed(0)  # same inputs on every rank
    q, k, v = (torch.randn(b, h, n, d, generator=gen, device=dev, dtype=dtype)
               for _ in range(3))
    extra = {}
    if dev.type == "cpu":  # share the cores between the ranks of this machine
        extra["context"] = int8attn.Context(num_threads=max(1, (os.cpu_count() or 1) // world))
    kernels = [(m, None, dict(extra, mode=m)) for m in args.modes]
    kernels.append(("sdpa", sdpa_kernel, {}))
    rows = []
    # One device, whole sequence: the reference for accuracy and the 1-device time.
    ref = int8attn.attention(q, k, v, mode="exact", causal=args.causal)
    single_ms = {}
    for kname, kern, opts in kernels:
        if kern is None:
            def one(opts=opts):
                return int8attn.attention(q, k, v, causal=args.causal, **opts)
        else:
            def one(kern=kern):
                return kern(q, k, v, causal=args.causal)[0]
        single_ms[kname] = time_ms(one, dev, args.reps, group_wide=False) if rank == 0 else 0.0
        log(f"  {name} 1 device {kname}: {single_ms[kname]:.3f} ms")
    dist.barrier()
    for vname, sp, reason, zigzag in variants(world, h, args.ulysses_degree, args.causal):
        if sp is None:
            log(f"  {name} {vname}: skipped ({reason})")
            rows.append({"shape": name, "variant": vname, "skipped": reason})
            continue
        index, lengths = idist.shard_sequence(n, sp, zigzag=zigzag, device=dev)
        local = [t.index_select(2, index) for t in (q, k, v)]
        ref_local = ref.index_select(2, index)
        for kname, kern, opts in kernels:
            def call(sp=sp, kern=kern, opts=opts, local=local, lengths=lengths, zigzag=zigzag):
                return idist.attention(*local, sp, causal=args.causal, shard_lengths=lengths,
                                       kernel=kern, zigzag=zigzag, **opts)
            o = call()
            err = torch.tensor([rel_l1(o, ref_local)], dtype=torch.float64, device=dev)
            dist.all_reduce(err, op=dist.ReduceOp.MAX)
            ms = time_ms(call, dev, args.reps)
            t1 = torch.tensor([single_ms[kname]], dtype=torch.float64, device=dev)
            dist.broadcast(t1, 0)
            eff = float(t1.item()) / (world * ms)
            rows.append({"shape": name, "B": b, "H": h, "N": n, "D": d, "variant": vname,
                         "kernel": kname, "ms": ms, "ms_1device": float(t1.item()),
                         "scaling_efficiency": eff, "rel_l1_vs_exact": float(err.item())})
            log(f"  {name} {vname} {kname}: {ms:.3f} ms, efficiency {eff:.2f}, "
                f"rel-L1 {err.item():.4f}")
    del ref
    return rows


def markdown(meta, rows) -> str:
    lines = [f"# int8attn.distributed benchmark ({meta['device_name']}, world size "
             f"{meta['world_size']}, {meta['dtype']}, causal={meta['causal']})", "",
             f"Command: `{meta['command']}`  ", f"torch {meta['torch']}, int8attn "
             f"{meta['int8attn']}, backend {meta['backend']}, SDPA kernel(s): "
             f"{', '.join(meta['sdpa_backends']) or '-'}, {meta['date']}", "",
             "Time: median over repetitions of the slowest rank. Efficiency: t(1 device) / "
             "(n · t(n devices)), same kernel. rel-L1 against one-device EXACT.", "",
             "| shape | variant | kernel | ms | ms on 1 device | efficiency | speed-up vs SDPA "
             "(same variant) | rel-L1 |", "|---|---|---|---|---|---|---|---|"]
    sdpa = {(r["shape"], r["variant"]): r["ms"] for r in rows if r.get("kernel") == "sdpa"}
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['shape']} | {r['variant']} | - | skipped: {r['skipped']} "
                         "| | | | |")
            continue
        base = sdpa.get((r["shape"], r["variant"]))
        speed = f"{base / r['ms']:.2f}×" if base and r["kernel"] != "sdpa" else ""
        lines.append(f"| {r['shape']} | {r['variant']} | {r['kernel']} | {r['ms']:.3f} | "
                     f"{r['ms_1device']:.3f} | {r['scaling_efficiency']:.2f} | {speed} | "
                     f"{r['rel_l1_vs_exact']:.4f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cuda", "cpu"),
                    default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shapes", help="comma-separated names: " + ", ".join(SHAPES))
    ap.add_argument("--modes", default="balanced,fast", help="int8attn modes (comma-separated)")
    ap.add_argument("--ulysses-degree", type=int, default=2, help="Ulysses degree of 'hybrid'")
    ap.add_argument("--causal", action="store_true", help="causal attention (default off, "
                    "as in diffusion models)")
    ap.add_argument("--dtype", choices=("float16", "bfloat16", "float32"), default=None,
                    help="default float16 on CUDA, float32 on the CPU")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default 20, quick 5)")
    ap.add_argument("--quick", action="store_true", help="first shape only, 5 repetitions")
    ap.add_argument("--out", default="bench/results/distributed", help="output directory")
    args = ap.parse_args()
    dev = init(args.device)
    dtype = getattr(torch, args.dtype or ("float16" if dev.type == "cuda" else "float32"))
    names = (args.shapes.split(",") if args.shapes
             else list(DEFAULT_GPU) if dev.type == "cuda" else ["tiny"])
    unknown = [s for s in names if s not in SHAPES]
    if unknown:
        ap.error(f"--shapes: unknown {unknown}; known: {', '.join(SHAPES)}")
    if args.quick:
        names = names[:1]
    args.reps = args.reps or (5 if args.quick else 20)
    args.modes = [m for m in args.modes.split(",") if m]
    world = dist.get_world_size()
    log(f"int8attn.distributed bench: world size {world}, {dev}, {dtype}, shapes {names}")
    rows = []
    for name in names:
        log(f"{name} {SHAPES[name]}")
        rows += run_shape(name, SHAPES[name], args, dev, dtype)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    if dist.get_rank() == 0:
        meta = {
            "command": " ".join(["torchrun --nproc_per_node", str(world)] if world > 1
                                else ["python3"]) + " " + " ".join(sys.argv),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "world_size": world, "device": dev.type,
            "device_name": (torch.cuda.get_device_name(dev) if dev.type == "cuda"
                            else platform.processor() or platform.machine()),
            "backend": dist.get_backend(), "dtype": str(dtype).replace("torch.", ""),
            "causal": args.causal, "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version() if dev.type == "cuda" else None,
            "int8attn": int8attn.version(), "sdpa_backends": sorted(_sdpa_used),
            "host": platform.node(),
        }
        os.makedirs(args.out, exist_ok=True)
        stem = os.path.join(args.out, f"distributed_{dev.type}_w{world}")
        with open(stem + ".json", "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
        with open(stem + ".md", "w") as f:
            f.write(markdown(meta, rows))
        log(f"wrote {stem}.json and {stem}.md")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
