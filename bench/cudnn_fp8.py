#!/usr/bin/env python3
"""int8attn FAST against cuDNN's own FP8 attention (cudnn-frontend ``sdpa_fp8``), one run, one GPU.

Per shape, on the same random-normal fp16 inputs (seed 0) and with bench.py's timer (CUDA-graph
replays, median) and float64 reference rows:

- ``torch_cudnn``: torch SDPA pinned to cuDNN, fp16 (the yardstick of every ratio);
- ``cudnn_fp8``: cuDNN's FP8 forward on Q, K, V already in E4M3 with one scale per tensor (the
  kernel alone: the quantization is not timed), O written in E4M3 (what Hopper supports) and
  dequantized for the accuracy only;
- ``int8attn_fast_kernel``: FAST against a K/V cache (per-key K scales; the attention kernel
  alone, Q quantized inside it);
- ``int8attn_fast_kblock``: FAST end to end with K scales per 64 keys (K/V preparation included),
  the processors' FAST setting;
- device time per call from torch's profiler for cuDNN FP8's kernels and for FAST k-block's
  attention kernel without its K/V preparation: the two attention kernels side by side.

Usage: python3 bench/cudnn_fp8.py [--shapes a,b,...] [--out DIR]
Needs torch with CUDA, the int8attn package (PYTHONPATH=bindings/python/src,
INT8ATTN_LIBRARY=...), and cudnn-frontend's Python package (``pip install
nvidia-cudnn-frontend==1.12.0``, the version measured; it loads the cuDNN library torch uses). A shape cuDNN's FP8 graph does not support is reported
as such, not skipped silently.
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import bench  # noqa: E402  (shape table, timer, float64 reference rows, accuracy)
import int8attn  # noqa: E402
import profile_forward  # noqa: E402  (device time per kernel)

DEFAULT_SHAPES = ("square_8k_d128,square_32k_d128,square_8k_d64,flux_1024px,sd3_cfg,sdxl_l1_cfg,"
                  "sd15_l1_cfg,wan_480p_81f,cogvideox_cfg,n4k_d72=2:24:24:4096:4096:72,"
                  "n4k_d80=2:24:24:4096:4096:80,n4k_d88=2:24:24:4096:4096:88,"
                  "n4k_d96=2:24:24:4096:4096:96")
E4M3_MAX = 448.0


def import_cudnn():
    """cudnn-frontend's module. It dlopens libcudnn from site-packages' nvidia/cudnn/lib, else by
    the bare name libcudnn.so, which a wheel install does not provide; the fallback here points
    that name at the library torch has already loaded, so both use one cuDNN."""
    torch.backends.cudnn.version()  # loads torch's cuDNN
    loaded = []
    with open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            path = line.split()[-1]
            if "/libcudnn.so" in path and path not in loaded:
                loaded.append(path)
    original = ctypes.CDLL

    def cdll(name, *args, **kwargs):
        if name == "libcudnn.so" and loaded:
            name = loaded[0]
        return original(name, *args, **kwargs)

    ctypes.CDLL = cdll
    try:
        import cudnn  # noqa: PLC0415
    finally:
        ctypes.CDLL = original
    return cudnn


class CudnnFp8Attention:
    """One cuDNN FP8 SDPA graph for Q, K, V of one shape (BHND, E4M3, one scale per tensor)."""

    def __init__(self, cudnn, handle, q8, k8, v8, scales, sm_scale):
        self.cudnn, self.handle = cudnn, handle
        fp8, f32 = cudnn.data_type.FP8_E4M3, cudnn.data_type.FLOAT
        g = cudnn.pygraph(io_data_type=fp8, intermediate_data_type=f32, compute_data_type=f32,
                          handle=handle)

        def operand(name, t):
            return g.tensor(name=name, dim=list(t.shape), stride=list(t.stride()), data_type=fp8)

        def scalar(name):
            return g.tensor(name=name, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=f32)

        tq, tk, tv = operand("q", q8), operand("k", k8), operand("v", v8)
        names = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")
        ts = {n: scalar(n) for n in names}
        o, _, amax_s, amax_o = g.sdpa_fp8(q=tq, k=tk, v=tv, descale_q=ts["descale_q"],
                                          descale_k=ts["descale_k"], descale_v=ts["descale_v"],
                                          descale_s=ts["descale_s"], scale_s=ts["scale_s"],
                                          scale_o=ts["scale_o"], is_inference=True,
                                          attn_scale=sm_scale, use_causal_mask=False,
                                          name="sdpa_fp8")
        self.o8 = torch.empty_like(q8)
        o.set_output(True).set_dim(list(self.o8.shape)).set_stride(list(self.o8.stride()))
        o.set_data_type(fp8)
        self.amax = [torch.zeros(1, 1, 1, 1, device="cuda", dtype=torch.float32) for _ in range(2)]
        for t in (amax_s, amax_o):
            t.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(f32)
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        g.check_support()
        g.build_plans()
        self.graph = g
        self.workspace = torch.empty(max(1, g.get_workspace_size()), device="cuda",
                                     dtype=torch.uint8)
        self.scalars = {n: torch.full((1, 1, 1, 1), float(scales[n]), device="cuda",
                                      dtype=torch.float32) for n in names}
        self.pack = {tq: q8, tk: k8, tv: v8, o: self.o8, amax_s: self.amax[0],
                     amax_o: self.amax[1]}
        self.pack.update({ts[n]: self.scalars[n] for n in names})

    def __call__(self):
        # On torch's current stream, so bench.time_fn can capture the call into a CUDA graph.
        self.cudnn.set_stream(self.handle, torch.cuda.current_stream().cuda_stream)
        self.graph.execute(self.pack, self.workspace, handle=self.handle)
        return self.o8


def quantize_e4m3(x):
    """x in E4M3 with one scale for the tensor: (x / s) in E4M3 and s = amax / 448."""
    s = max(x.abs().max().item(), 1e-12) / E4M3_MAX
    return (x.float() / s).to(torch.float8_e4m3fn), s


def run_shape(cudnn, handle, ctx, name, B, Hq, Hkv, Nq, Nk, D):
    torch.manual_seed(0)
    q = torch.randn(B, Hq, Nq, D, device="cuda", dtype=torch.float16)
    k = torch.randn(B, Hkv, Nk, D, device="cuda", dtype=torch.float16)
    v = torch.randn(B, Hkv, Nk, D, device="cuda", dtype=torch.float16)
    ops = 4.0 * B * Hq * Nq * Nk * D
    rows = torch.randperm(Nq, device="cuda")[: min(Nq, 128)]
    heads = [0, Hq // 2] if Hq > 1 else [0]
    ref = bench.reference_rows(q, k, v, rows, heads)
    result = {"name": name, "dims": [B, Hq, Hkv, Nq, Nk, D], "methods": {}}

    def record(label, fn, out_fn):
        try:
            out = out_fn()
            torch.cuda.synchronize()
            acc = bench.accuracy(out, ref, rows, heads)
            ms, how = bench.time_fn(fn)
            result["methods"][label] = {"ms": ms, "tops": ops / (ms * 1e-3) / 1e12,
                                        "timing": how, **acc}
            bench.log(f"  {label:<22} {ms:9.4f} ms {ops / (ms * 1e-3) / 1e12:8.1f} TOPS  "
                      f"rel-L1 {acc['rel_l1']:.5f}")
        except Exception as exc:  # noqa: BLE001 - reported in the table, not hidden
            result["methods"][label] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            bench.log(f"  {label:<22} ERROR {type(exc).__name__}: {str(exc)[:200]}")

    sdpa = bench.sdpa(bench.SDPBackend.CUDNN_ATTENTION, q, k, v, Hq != Hkv)
    record("torch_cudnn", sdpa, sdpa)

    fp8 = None
    if Hq == Hkv:
        try:
            q8, sq = quantize_e4m3(q)
            k8, sk = quantize_e4m3(k)
            v8, sv = quantize_e4m3(v)
            # P lies in [0, 1]: scaled by 448 it fills E4M3; |O| <= max |V|.
            vmax = sv * E4M3_MAX
            scales = {"descale_q": sq, "descale_k": sk, "descale_v": sv,
                      "descale_s": 1.0 / E4M3_MAX, "scale_s": E4M3_MAX,
                      "scale_o": E4M3_MAX / vmax}
            fp8 = CudnnFp8Attention(cudnn, handle, q8, k8, v8, scales, 1.0 / math.sqrt(D))
            record("cudnn_fp8", fp8, lambda: fp8().float() * (vmax / E4M3_MAX))
        except Exception as exc:  # noqa: BLE001 - e.g. a head dim the FP8 graph does not support
            result["methods"]["cudnn_fp8"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            bench.log(f"  {'cudnn_fp8':<22} ERROR {type(exc).__name__}: {str(exc)[:200]}")
    else:
        result["methods"]["cudnn_fp8"] = {"error": "not run: GQA shape"}

    out = torch.empty_like(q)
    cache = int8attn.KVCache(B, Hkv, Nk, D, device="cuda", mode="fast", context=ctx)
    cache.append(k, v)
    kernel = lambda: cache.forward(q, out=out)  # noqa: E731
    record("int8attn_fast_kernel", kernel, kernel)
    cache.close()
    e2e = lambda: int8attn.attention(q, k, v, mode="fast", out=out, context=ctx,  # noqa: E731
                                     k_granularity="block")
    record("int8attn_fast_kblock", e2e, e2e)
    # Device time per kernel (torch profiler): FAST k-block's attention kernel alone, without its
    # K/V preparation, and cuDNN FP8's kernels, timed the same way.
    profiled = (("int8attn_fast_kblock", e2e, "attention"),
                ("cudnn_fp8", fp8, ""))
    for label, fn, part in profiled:
        if not fn or "ms" not in result["methods"][label]:
            continue
        try:
            per_kernel, span = profile_forward.kernel_device_times(fn, calls=20, warmup=5)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a profiler that cannot run
            bench.log(f"  {label:<22} profiler: {type(exc).__name__}: {exc}")
            continue
        us = sum(sum(t) for name, t in per_kernel.items() if part in name) / 20
        m = result["methods"][label]
        m["kernel_us"], m["span_us"] = us, span
        m["kernel_tops"] = ops / (us * 1e-6) / 1e12
        bench.log(f"  {label:<22} kernel{' (' + part + ')' if part else 's'} {us:9.1f} us "
                  f"(profiler), span {span:.1f} us")

    base = result["methods"]["torch_cudnn"].get("ms")
    for m in result["methods"].values():
        if "ms" in m and base:
            m["speedup_vs_cudnn"] = base / m["ms"]
    f8 = result["methods"].get("cudnn_fp8", {})
    for label in ("int8attn_fast_kernel", "int8attn_fast_kblock"):
        m = result["methods"][label]
        if "ms" in m and "ms" in f8:
            m["speedup_vs_cudnn_fp8"] = f8["ms"] / m["ms"]
    kb = result["methods"]["int8attn_fast_kblock"]
    if "kernel_us" in kb and "kernel_us" in f8:
        kb["kernel_speedup_vs_cudnn_fp8"] = f8["kernel_us"] / kb["kernel_us"]
    del q, k, v, out
    torch.cuda.empty_cache()
    return result


def cell(m, key="speedup_vs_cudnn"):
    if "ms" not in m:
        return "n/a (" + m.get("error", "?").split(":")[0] + ")"
    ratio = f" ({m[key]:.2f}x)" if key in m else ""
    return f"{m['ms']:.4f}{ratio}, {m['rel_l1']:.4f}"


def ratio(m, key):
    return f"{m[key]:.2f}x" if key in m else "-"


def markdown(results, meta):
    lines = [f"# int8attn FAST against cuDNN FP8 attention, {meta['gpu']}, {meta['date']}", "",
             f"torch {meta['torch']}, cuDNN {meta['cudnn']}, cudnn-frontend "
             f"{meta['cudnn_frontend']}; command: `{meta['command']}`.", "",
             "ms (median of CUDA-graph replays), (x) = torch cuDNN fp16 SDPA over this, then "
             "rel-L1 against float64 on sampled rows. cuDNN FP8 and FAST kernel (per-key K, "
             "against a cache): the attention kernel alone, inputs already quantized. FAST "
             "k-block: end to end, K/V preparation included. µs columns: device time per call "
             "from torch's profiler, cuDNN FP8's kernels and FAST k-block's attention kernel "
             "without its preparation (with programmatic dependent launch it includes its wait "
             "for the preparation's last CTAs). Ratio columns: cuDNN FP8's time over FAST's.", "",
             "| shape | B,H,Nq,Nk,D | cuDNN fp16 | cuDNN FP8 kernel | FAST kernel | FAST k-block "
             "e2e | FP8 µs | k-block attention µs | kernel / FP8 | k-block e2e / FP8 | "
             "k-block attention / FP8 µs |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        B, Hq, _, Nq, Nk, D = r["dims"]
        m = r["methods"]
        f8, fk, fe = m["cudnn_fp8"], m["int8attn_fast_kernel"], m["int8attn_fast_kblock"]
        us = [f"{x['kernel_us']:.1f}" if "kernel_us" in x else "-" for x in (f8, fe)]
        lines.append(
            f"| {r['name']} | {B},{Hq},{Nq},{Nk},{D} | {m['torch_cudnn'].get('ms', 0):.4f} | "
            f"{cell(f8)} | {cell(fk)} | {cell(fe)} | {us[0]} | {us[1]} | "
            f"{ratio(fk, 'speedup_vs_cudnn_fp8')} | {ratio(fe, 'speedup_vs_cudnn_fp8')} | "
            f"{ratio(fe, 'kernel_speedup_vs_cudnn_fp8')} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=DEFAULT_SHAPES,
                    help="comma-separated names from bench.py, or NAME=B:Hq:Hkv:Nq:Nk:D")
    ap.add_argument("--out", default=None, help="folder for cudnn_fp8.json and cudnn_fp8.md")
    args = ap.parse_args()
    try:
        shapes = [bench.named_shape(s) for s in args.shapes.split(",")]
    except ValueError as e:
        ap.error(str(e))
    if not torch.cuda.is_available():
        sys.exit("cudnn_fp8.py needs a CUDA GPU")
    cudnn = import_cudnn()
    handle = cudnn.create_handle()
    ctx = int8attn.Context()
    meta = {"gpu": torch.cuda.get_device_name(), "date": datetime.date.today().isoformat(),
            "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
            "cudnn_frontend": getattr(cudnn, "__version__", "?"),
            "command": "python3 bench/cudnn_fp8.py " + " ".join(sys.argv[1:])}
    results = []
    for i, (name, dims) in enumerate(shapes, 1):
        bench.log(f"[{i}/{len(shapes)}] {name} {dims}")
        results.append(run_shape(cudnn, handle, ctx, name, *dims))
    text = markdown(results, meta)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "cudnn_fp8.json"), "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
        with open(os.path.join(args.out, "cudnn_fp8.md"), "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
