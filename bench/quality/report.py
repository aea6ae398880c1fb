"""Image-quality report: the digits DiT sampled from the same noise and labels with every
precision mode, compared with EXACT.

For each sampler (flow-matching Euler 20 and 50 steps, Heun 10 steps; all with classifier-free
guidance 2.0) and each row (int8attn EXACT, BALANCED, FAST, the library's default timestep policy,
three candidate policies, and PyTorch SDPA as a float sanity row) it reports, against EXACT:
PSNR and SSIM of the final images, and the RMS latent difference after every step (plotted).
On the main sampler (Euler 20) it also samples --n-fid images per row and reports a Fréchet
distance on the features of a small digit classifier (weights/classifier_digits.pt), against the
real digits and against EXACT's samples, and the classifier's accuracy on the samples (does a
"3" look like a 3).

Every int8attn row (EXACT included) gets K and V repeated model.KEY_REPEATS times along the keys:
the model's 64 keys would otherwise run EXACT in every mode (see model.py).

Writes quality.json, quality.md, grid_<sampler>.png and error_<sampler>.png to --out.

    python bench/quality.py --device cuda --out bench/results/<date>-<gpu>-quality
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Dict, List

import numpy as np
import torch

import imaging
import metrics
import model as M

SAMPLERS = [("euler", 20), ("euler", 50), ("heun", 10)]
MAIN = ("euler", 20)

# Rows: name -> (mode, policy kwargs or None). "default policy" is TimestepPolicy(steps) with the
# library's defaults (first and last step EXACT, FAST otherwise); the other three are candidates.
ROWS = {
    "exact": ("exact", None),
    "balanced": ("balanced", None),
    "fast": ("fast", None),
    "default policy": (None, {}),
    "policy edges 0+1, fast": (None, dict(num_first_edge=0)),
    "policy edges 2+2, fast": (None, dict(num_first_edge=2, num_last_edge=2)),
    "policy edges 1+1, balanced": (None, dict(default_mode="balanced")),
    "sdpa (float)": ("sdpa", None),
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def attn_for(row: str, steps: int):
    mode, pol = ROWS[row]
    if mode == "sdpa":
        return M.sdpa_attention
    if pol is None:
        return M.int8attn_attention(mode)
    import int8attn
    return M.int8attn_attention(policy=int8attn.TimestepPolicy(steps, **pol))


def run(net, noise, labels, sampler, steps, row, cfg, batch, trace=None):
    """Sample all of ``noise`` in chunks of ``batch``; ``trace`` gets the first chunk's latents."""
    attn = attn_for(row, steps)
    outs = []
    for i, s in enumerate(range(0, len(noise), batch)):
        outs.append(M.sample(net, noise[s:s + batch], labels[s:s + batch], steps, sampler,
                             attn, cfg, trace if i == 0 else None).cpu())
    return torch.cat(outs)


@torch.no_grad()
def features(clf, x, dev):
    return torch.cat([clf.features(c.to(dev)).cpu() for c in x.split(500)]).numpy()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="Euler 20 only, 16 images, FID on 100")
    ap.add_argument("--n-img", type=int, default=64, help="images per sampler for PSNR/SSIM")
    ap.add_argument("--n-fid", type=int, default=1000, help="images per row for the FID")
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--cfg", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--weights", default=str(M.WEIGHTS))
    ap.add_argument("--threads", type=int, default=0,
                    help="torch CPU threads (0: torch's default); 1 is faster on a busy machine")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    samplers = [MAIN] if args.quick else SAMPLERS
    n_img, n_fid = (16, 100) if args.quick else (args.n_img, args.n_fid)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device(args.device)
    torch.manual_seed(args.seed)
    wdir = Path(args.weights)
    net = M.load_dit(wdir / "dit_digits.pt", dev)
    clf = M.load_classifier(wdir / "classifier_digits.pt", dev)
    digits8, real_labels = M.load_digits_npz(wdir / "digits.npz")
    real = M.to_images(digits8)

    import int8attn
    lib_info = int8attn.info()
    g = torch.Generator().manual_seed(args.seed)
    noise_all = torch.randn(max(n_img, n_fid), 1, M.IMG, M.IMG, generator=g)
    labels_all = torch.arange(len(noise_all)) % M.NUM_CLASSES
    res: Dict = {"command": " ".join(sys.argv), "device": str(dev),
                 "device_name": (torch.cuda.get_device_name(dev) if dev.type == "cuda"
                                 else platform.processor() or platform.machine()),
                 "torch": torch.__version__, "int8attn": lib_info["version"],
                 "int8attn_features": lib_info["features"], "cfg": args.cfg, "seed": args.seed,
                 "key_repeats": M.KEY_REPEATS,
                 "n_img": n_img, "n_fid": n_fid, "samplers": {}, "fid": {}}
    t_start = time.time()

    # 1. Same noise, every sampler and row: PSNR/SSIM vs EXACT, per-step latent error, grids.
    noise, labels = noise_all[:n_img].to(dev), labels_all[:n_img].to(dev)
    for sampler, steps in samplers:
        key = f"{sampler}-{steps}"
        imgs, traces = {}, {}
        for row in ROWS:
            t0, traces[row] = time.time(), []
            imgs[row] = run(net, noise, labels, sampler, steps, row, args.cfg, args.batch,
                            traces[row])
            log(f"{key:>9} {row:<28} {time.time() - t0:6.1f} s")
        ref, rows = imgs["exact"], {}
        for row in ROWS:
            p, s = metrics.psnr(imgs[row], ref), metrics.ssim(imgs[row], ref)
            err = [float((a - b).pow(2).mean().sqrt())
                   for a, b in zip(traces[row], traces["exact"])]
            rows[row] = {"psnr_mean": float(p.mean()), "psnr_min": float(p.min()),
                         "ssim_mean": float(s.mean()), "ssim_min": float(s.min()),
                         "latent_rms_per_step": err}
        res["samplers"][key] = rows
        shown = ["exact", "balanced", "fast", "default policy"]
        u8 = {r: imaging.to_uint8(imgs[r][:40]) for r in shown}
        diff = np.clip(np.abs(u8["fast"].astype(int) - u8["exact"]) * 50, 0, 255).astype(np.uint8)
        panels = [imaging.grid(u8[r], 10, scale=3) for r in shown]
        panels.append(imaging.grid(diff, 10, scale=3))
        imaging.write_png(out / f"grid_{key}.png", imaging.side_by_side(panels))
        res.setdefault("plots", {})[key] = imaging.line_plot(
            out / f"error_{key}.png",
            {r: rows[r]["latent_rms_per_step"] for r in ROWS if r != "exact"},
            f"latent RMS difference vs EXACT, {key}, same noise", "RMS")

    # 2. Distribution: Fréchet distance on classifier features, main sampler, n_fid per row.
    sampler, steps = MAIN
    f_real = features(clf, real, dev)
    half = len(f_real) // 2
    res["fid"]["real_half_vs_half"] = metrics.frechet_distance(f_real[:half], f_real[half:])
    noise, labels = noise_all[:n_fid].to(dev), labels_all[:n_fid]
    f_exact = None
    for row in ROWS:
        if row == "sdpa (float)":
            continue
        t0 = time.time()
        x = run(net, noise, labels.to(dev), sampler, steps, row, args.cfg, args.batch)
        f = features(clf, x, dev)
        with torch.no_grad():
            acc = (clf.head(torch.from_numpy(f).to(dev)).argmax(-1).cpu() == labels).float().mean()
        f_exact = f if row == "exact" else f_exact
        res["fid"][row] = {"vs_real": metrics.frechet_distance(f, f_real),
                           "vs_exact": metrics.frechet_distance(f, f_exact),
                           "class_accuracy": float(acc)}
        log(f"FID {row:<28} {res['fid'][row]['vs_real']:.3f} ({time.time() - t0:.1f} s)")
        if row == "exact":
            imaging.write_png(out / "samples_exact.png",
                              imaging.grid(imaging.to_uint8(x[:100]), 10, scale=3))
    res["seconds"] = round(time.time() - t_start, 1)
    (out / "quality.json").write_text(json.dumps(res, indent=1))
    (out / "quality.md").write_text(markdown(res))
    print(markdown(res))
    return 0


def markdown(res: Dict) -> str:
    lines: List[str] = [
        f"# int8attn image quality ({res['device_name']}, {res['device']}, torch {res['torch']}, "
        f"int8attn {res['int8attn']})", "",
        f"`{res['command']}`; CFG {res['cfg']}, seed {res['seed']}, {res['n_img']} images per "
        f"sampler for PSNR/SSIM (vs EXACT, same noise), {res['n_fid']} per row for the FID; "
        f"int8attn rows with K/V repeated {res.get('key_repeats', 1)}x along the keys.", "",
        "| sampler | row | PSNR mean (min) dB | SSIM mean (min) | final-step latent RMS |",
        "|---|---|---|---|---|"]
    for key, rows in res["samplers"].items():
        for row, r in rows.items():
            if row == "exact":
                continue
            lines.append(f"| {key} | {row} | {r['psnr_mean']:.2f} ({r['psnr_min']:.2f}) | "
                         f"{r['ssim_mean']:.5f} ({r['ssim_min']:.5f}) | "
                         f"{r['latent_rms_per_step'][-1]:.2e} |")
    f = res["fid"]
    lines += ["", f"Fréchet distance on classifier features, {MAIN[0]}-{MAIN[1]} "
              f"(real digits half vs half: {f['real_half_vs_half']:.3f}):", "",
              "| row | FID vs real | FID vs EXACT | class accuracy |", "|---|---|---|---|"]
    for row, r in f.items():
        if isinstance(r, dict):
            lines.append(f"| {row} | {r['vs_real']:.3f} | {r['vs_exact']:.4f} | "
                         f"{r['class_accuracy']:.3f} |")
    names = [r for r in ROWS if r != "exact"]
    legend = ", ".join(f"{c[0]} = {n}" for n, c in zip(names, imaging.COLOURS))
    plots = "; ".join(f"{k}: {v}" for k, v in res.get("plots", {}).items())
    lines += ["", "Grids (`grid_<sampler>.png`), left to right: EXACT, BALANCED, FAST, default "
              "policy, |FAST − EXACT| × 50. Per-step plots (`error_<sampler>.png`, RMS latent "
              f"difference vs EXACT after each step; {plots}): {legend}.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
