#!/usr/bin/env python3
"""int8attn vs PyTorch SDPA (cuDNN and flash backends), one run, one GPU, same inputs and timer.

Shapes and method follow shared/BENCHMARKS.md: random-normal fp16 inputs, CUDA-event timing of
CUDA-graph replays (10 calls per replay; median of >= 20 replays; plain event-timed loops if a
method cannot be captured), TOPS = 4·B·Hq·Nq·Nk·D / time. End-to-end int8attn times include the
K/V statistics + quantization pass and the fused Q quantization; "kernel" times are attention
against a pre-quantized K/V cache (the attention kernel alone). Accuracy: cosine and relative L1
against a float64 reference on sampled query rows of two heads.

Usage: python3 bench/bench.py [--quick] [--shapes a,b,...] [--out bench/results]
(--shapes: names from the tables below, or NAME=B:Hq:Hkv:Nq:Nk:D, timed in the order given)
Needs: torch with CUDA, and the int8attn package (PYTHONPATH=bindings/python/src,
INT8ATTN_LIBRARY=build/lib/libint8attn.so).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import int8attn

SQUARE = [(f"square_{n // 1024}k_d{d}", 4, 32, 32, n, n, d)
          for d in (64, 128) for n in (1024, 2048, 4096, 8192, 16384, 32768)]
DIFFUSION = [
    ("flux_1024px", 1, 24, 24, 4608, 4608, 128),
    ("sd3_cfg", 2, 24, 24, 4250, 4250, 64),
    ("sdxl_l1_cfg", 2, 10, 10, 4096, 4096, 64),
    ("sd15_l1_cfg", 2, 8, 8, 4096, 4096, 40),
    ("sd15_l3_cfg", 2, 8, 8, 256, 256, 160),
    ("wan_480p_81f", 1, 40, 40, 32760, 32760, 128),
    ("cogvideox_cfg", 2, 48, 48, 17776, 17776, 64),
]
DECODE = [(f"decode_b{b}_nk{nk // 1024}k", b, 32, 8, 1, nk, 128)
          for b, nk in ((1, 32768), (16, 32768), (8, 131072), (32, 65536), (1, 4096), (64, 4096))]
MODES = ("exact", "balanced", "fast")


def named_shape(spec: str) -> tuple:
    """(name, (B, Hq, Hkv, Nq, Nk, D)) of a shape named in SQUARE, DIFFUSION or DECODE, or given
    as NAME=B:Hq:Hkv:Nq:Nk:D (the form bench/ab_time.py and bench/profile_forward.py take)."""
    if "=" in spec:
        name, dims = spec.split("=", 1)
        try:
            values = tuple(int(x) for x in dims.split(":"))
        except ValueError:
            values = ()
        if len(values) != 6:
            raise ValueError(f"shape {spec!r}: expected NAME=B:Hq:Hkv:Nq:Nk:D (six integers)")
        return name, values
    for s in SQUARE + DIFFUSION + DECODE:
        if s[0] == spec:
            return spec, tuple(s[1:])
    raise ValueError(f"unknown shape {spec!r}: a name from bench.py or NAME=B:Hq:Hkv:Nq:Nk:D")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def eager_ms(fn, calls: int = 30) -> float:
    """Milliseconds per call of a loop of ``calls`` calls synchronised once (after 3 warm-up
    calls): whichever of the host and the device binds, as in an eager step."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3 / calls


def time_fn(fn, reps: int = 20) -> tuple[float, str]:
    """Median milliseconds per call; CUDA-graph replays (of `inner` calls) when capturable.

    `inner` is 10 for calls under ~2 ms (launch gaps would dominate otherwise) and 1 for long
    calls, so a 100 ms shape costs seconds, not minutes."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    inner = 10 if start.elapsed_time(end) < 2.0 else 1
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream):
            fn()  # warm inside the side stream too
            torch.cuda.synchronize()
            with torch.cuda.graph(graph, stream=stream):
                for _ in range(inner):
                    fn()
        torch.cuda.current_stream().wait_stream(stream)
        method = "cuda-graph"
        run = graph.replay
    except Exception as exc:  # noqa: BLE001 - fall back to plain loops, and say so
        log(f"    (graph capture failed: {type(exc).__name__}: {exc}; timing plain loops)")
        torch.cuda.synchronize()
        method = "event-loop"

        def run() -> None:
            for _ in range(inner):
                fn()
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / inner)
    times.sort()
    return times[len(times) // 2], method


def device_copy_gbps() -> float:
    """The chip's measured copy bandwidth (bytes read + written / time, 1 GiB device-to-device
    copies, CUDA-graph timed like everything else): the yardstick for decode's GB/s."""
    src = torch.empty(1 << 29, device="cuda", dtype=torch.float16).normal_()
    dst = torch.empty_like(src)
    ms, _ = time_fn(lambda: dst.copy_(src))
    gbps = 2.0 * src.numel() * src.element_size() / (ms * 1e-3) / 1e9
    del src, dst
    torch.cuda.empty_cache()
    return gbps


def reference_rows(q, k, v, rows_idx, heads):
    """float64 attention for the sampled rows of batch 0 and the given q-heads."""
    G = q.shape[1] // k.shape[1]
    outs = []
    for h in heads:
        qs = q[0, h, rows_idx].double()
        ks, vs = k[0, h // G].double(), v[0, h // G].double()
        s = (qs @ ks.T) / math.sqrt(q.shape[-1])
        outs.append(torch.softmax(s, dim=-1) @ vs)
    return torch.stack(outs)


def accuracy(out, ref, rows_idx, heads):
    o = torch.stack([out[0, h, rows_idx].double() for h in heads])
    cos = torch.nn.functional.cosine_similarity(o.flatten(), ref.flatten(), dim=0).item()
    rel_l1 = ((o - ref).abs().sum() / ref.abs().sum()).item()
    finite = bool(torch.isfinite(o).all().item())
    return {"cos": cos, "rel_l1": rel_l1, "finite": finite}


def sdpa(backend, q, k, v, gqa: bool):
    def fn():
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
    return fn


def bench_shape(name, B, Hq, Hkv, Nq, Nk, D, ctx, decode: bool):
    torch.manual_seed(0)
    dev = "cuda"
    q = torch.randn(B, Hq, Nq, D, device=dev, dtype=torch.float16)
    k = torch.randn(B, Hkv, Nk, D, device=dev, dtype=torch.float16)
    v = torch.randn(B, Hkv, Nk, D, device=dev, dtype=torch.float16)
    flops = 4.0 * B * Hq * Nq * Nk * D
    rows_idx = torch.randperm(Nq, device=dev)[: min(Nq, 128)]
    heads = [0, Hq // 2] if Hq > 1 else [0]
    ref = reference_rows(q, k, v, rows_idx, heads)
    result = {"name": name, "B": B, "Hq": Hq, "Hkv": Hkv, "Nq": Nq, "Nk": Nk, "D": D, "methods": {}}
    gqa = Hq != Hkv

    def record(label, fn, out_fn, bytes_read=None):
        try:
            out = out_fn()
            torch.cuda.synchronize()
            acc = accuracy(out, ref, rows_idx, heads)
            ms, how = time_fn(fn)
            entry = {"ms": ms, "tops": flops / (ms * 1e-3) / 1e12, "timing": how, **acc}
            if bytes_read is not None:
                entry["gbps"] = bytes_read / (ms * 1e-3) / 1e9
            result["methods"][label] = entry
            log(f"  {label:<22} {ms:9.4f} ms {entry['tops']:8.1f} TOPS  cos {acc['cos']:.6f} "
                f"rel-L1 {acc['rel_l1']:.5f}")
        except Exception as exc:  # noqa: BLE001 - a method that cannot run is reported, not hidden
            result["methods"][label] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            log(f"  {label:<22} ERROR {type(exc).__name__}: {str(exc)[:200]}")

    fp16_kv_bytes = 2.0 * B * Hkv * Nk * D * 2
    for label, backend in (("torch_cudnn", SDPBackend.CUDNN_ATTENTION),
                           ("torch_flash", SDPBackend.FLASH_ATTENTION)):
        fn = sdpa(backend, q, k, v, gqa)
        record(label, fn, fn, fp16_kv_bytes if decode else None)

    out = torch.empty_like(q)
    for mode in MODES:
        def fn(mode=mode):
            return int8attn.attention(q, k, v, mode=mode, out=out, context=ctx)
        record(f"int8attn_{mode}", fn, fn, fp16_kv_bytes if decode else None)
    # FAST with K scales per 64 keys instead of per key: the faster, slightly less accurate
    # option (docs/precision-modes.md).
    def fn_kblock():
        return int8attn.attention(q, k, v, mode="fast", out=out, context=ctx,
                                  k_granularity="block")
    record("int8attn_fast_kblock", fn_kblock, fn_kblock, fp16_kv_bytes if decode else None)

    # Kernel only: attention against K/V quantized once into a cache.
    for mode in ("balanced", "fast"):
        try:
            cache = int8attn.KVCache(B, Hkv, Nk, D, device="cuda", mode=mode, context=ctx)
            cache.append(k, v)
        except Exception as exc:  # noqa: BLE001
            result["methods"][f"int8attn_{mode}_kernel"] = {"error": str(exc)[:300]}
            continue
        kv_bytes = B * Hkv * Nk * D * (1 + (1 if mode == "fast" else 2))

        def fn(cache=cache):
            return cache.forward(q, out=out)
        record(f"int8attn_{mode}_kernel", fn, fn, kv_bytes if decode else None)
        cache.close()

    base = result["methods"].get("torch_cudnn", {}).get("ms")
    flash = result["methods"].get("torch_flash", {}).get("ms")
    for m in result["methods"].values():
        if "ms" in m:
            if base:
                m["speedup_vs_cudnn"] = base / m["ms"]
            if flash:
                m["speedup_vs_flash"] = flash / m["ms"]
    del q, k, v, out
    torch.cuda.empty_cache()
    return result


def markdown(results, meta) -> str:
    lines = [f"# int8attn benchmark, {meta['gpu']}, {meta['date']}", "",
             f"torch {meta['torch']}, cuDNN {meta['cudnn']}, CUDA {meta['cuda']}; command: "
             f"`{meta['command']}`; device copy {meta.get('copy_gbps', 0):.0f} GB/s "
             "(read + write).", "",
             "Times in ms (median, CUDA events); x = speed-up over torch cuDNN SDPA in the same run;"
             " acc = rel-L1 vs float64 on sampled rows. FAST k-block: FAST with K scales per 64 keys"
             " (k_granularity \"block\"; the default is per key). Kernel columns: attention against"
             " a K/V cache (per-key K scales). Decode rows: GB/s of K and V read (fp16 for torch and"
             " EXACT, the cache's INT8 K + FP8/fp16 V for the kernel columns).", "",
             "| shape | B,Hq/Hkv,Nq,Nk,D | cuDNN | flash | EXACT | BALANCED | FAST | FAST k-block |"
             " BAL kernel | FAST kernel |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        def cell(key):
            m = r["methods"].get(key, {})
            if "ms" not in m:
                return "err" if "error" in m else "-"
            x = m.get("speedup_vs_cudnn")
            extra = f" ({x:.2f}x)" if x and not key.startswith("torch_cudnn") else ""
            acc = f", {m['rel_l1']:.4f}" if key.startswith("int8attn") else ""
            bw = f", {m['gbps']:.0f} GB/s" if "gbps" in m else ""
            return f"{m['ms']:.4f}{extra}{acc}{bw}"
        dims = f"{r['B']},{r['Hq']}/{r['Hkv']},{r['Nq']},{r['Nk']},{r['D']}"
        lines.append("| " + " | ".join([r["name"], dims] + [cell(k) for k in (
            "torch_cudnn", "torch_flash", "int8attn_exact", "int8attn_balanced", "int8attn_fast",
            "int8attn_fast_kblock", "int8attn_balanced_kernel", "int8attn_fast_kernel")]) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few representative shapes only")
    ap.add_argument("--shapes", default="",
                    help="comma-separated names from the tables, or NAME=B:Hq:Hkv:Nq:Nk:D")
    ap.add_argument("--out", default="bench/results")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench.py needs a CUDA GPU", file=sys.stderr)
        return 2
    shapes = [(s, False) for s in SQUARE + DIFFUSION] + [(s, True) for s in DECODE]
    if args.quick:
        keep = {"square_4k_d128", "flux_1024px", "sd15_l1_cfg", "decode_b16_nk32k"}
        shapes = [s for s in shapes if s[0][0] in keep]
    if args.shapes:
        # Named shapes and NAME=B:Hq:Hkv:Nq:Nk:D alike, in the order given; an unknown name is an
        # error, not a shape silently left out of the table.
        try:
            named = [named_shape(spec) for spec in args.shapes.split(",")]
        except ValueError as e:
            ap.error(str(e))
        shapes = [((name, *dims), dims[3] == 1)  # one query row: a decode call, GB/s too
                  for name, dims in named]
    ctx = int8attn.Context()
    gpu = torch.cuda.get_device_name()
    meta = {"gpu": gpu, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
            "cuda": torch.version.cuda, "python": platform.python_version(),
            "int8attn": int8attn.version(), "command": " ".join(["python3"] + sys.argv),
            "copy_gbps": device_copy_gbps()}
    log(f"device copy: {meta['copy_gbps']:.0f} GB/s (read + write)")
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"{datetime.date.today().isoformat()}-"
                                  f"{gpu.replace(' ', '_').replace('/', '_')}")
    results = []
    t0 = time.time()
    for i, (shape, decode) in enumerate(shapes):
        log(f"[{i + 1}/{len(shapes)}] {shape[0]} B={shape[1]} Hq={shape[2]} Hkv={shape[3]} "
            f"Nq={shape[4]} Nk={shape[5]} D={shape[6]} ({time.time() - t0:.0f}s elapsed)")
        results.append(bench_shape(*shape, ctx=ctx, decode=decode))
        with open(stem + ".json", "w") as f:  # after every shape: a cut-off run keeps its data
            json.dump({"meta": meta, "results": results, "complete": i + 1 == len(shapes)}, f,
                      indent=1)
    md = markdown(results, meta)
    with open(stem + ".md", "w") as f:
        f.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
