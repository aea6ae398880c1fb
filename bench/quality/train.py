"""Train the quality report's models on scikit-learn's digits (1797 8x8 images shipped inside the
scikit-learn wheel; nothing is downloaded at run time):

  1. the DiT (model.py) with flow matching, 10% label dropout for classifier-free guidance, and an
     EMA of the weights (the EMA is what is saved: it samples much cleaner);
  2. the small CNN classifier whose features the report's Fréchet distance uses.

It writes weights/dit_digits.pt (fp16 state dict + config), weights/classifier_digits.pt and
weights/digits.npz (the data set itself, so the report, and a re-training where scikit-learn is
missing, need no scikit-learn). Attention is PyTorch SDPA: training does not depend on int8attn.

    python bench/quality/train.py --threads 1   # CUDA if available, else CPU (~15 min, 1 core)
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import model as M


def progress(i: int, n: int, t0: float, msg: str) -> None:
    done = (i + 1) / n
    bar = "#" * int(30 * done)
    eta = (time.time() - t0) / done * (1 - done)
    sys.stderr.write(f"\r[{bar:<30}] {i + 1}/{n} {msg} eta {eta:4.0f}s")
    if i + 1 == n:
        sys.stderr.write("\n")
    sys.stderr.flush()


def train_dit(x, y, args, dev):
    torch.manual_seed(args.seed)
    net = M.DiT(dim=args.dim, depth=args.depth, heads=args.heads).to(dev)
    ema = copy.deepcopy(net).eval()
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=0.0)
    # Linear warm-up, then cosine decay to 10% of lr.
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 200) * (
        0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * s / args.steps))))
    n_params = sum(p.numel() for p in net.parameters())
    print(f"DiT {net.config}: {n_params / 1e6:.2f} M parameters, {args.steps} steps of "
          f"batch {args.batch} on {dev}", file=sys.stderr)
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    t0, avg = time.time(), None
    for step in range(args.steps):
        idx = torch.randint(0, len(x), (args.batch,), generator=g)
        x0, lab = x[idx].to(dev), y[idx].to(dev)
        lab = torch.where(torch.rand(args.batch, generator=g).to(dev) < 0.1,
                          torch.full_like(lab, M.NUM_CLASSES), lab)
        noise = torch.randn(x0.shape, generator=g).to(dev)
        t = torch.rand(args.batch, generator=g).to(dev)
        xt = (1 - t[:, None, None, None]) * x0 + t[:, None, None, None] * noise
        loss = F.mse_loss(net(xt, t, lab), noise - x0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        sched.step()
        with torch.no_grad():
            d = min(args.ema, (1 + step) / (10 + step))  # short warm-up of the EMA
            for pe, pn in zip(ema.parameters(), net.parameters()):
                pe.lerp_(pn, 1 - d)
        avg = loss.item() if avg is None else 0.98 * avg + 0.02 * loss.item()
        progress(step, args.steps, t0, f"loss {avg:.4f}")
    return ema, avg, time.time() - t0


def train_classifier(x, y, args, dev):
    """A few epochs on a 90/10 split (the held-out accuracy is printed and saved); light
    shift augmentation so it judges shapes, not exact pixel positions."""
    torch.manual_seed(args.seed)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(args.seed))
    tr, te = perm[: int(0.9 * len(x))], perm[int(0.9 * len(x)):]
    clf = M.Classifier().to(dev)
    opt = torch.optim.Adam(clf.parameters(), lr=2e-3)
    epochs = 10
    t0 = time.time()
    for ep in range(epochs):
        clf.train()
        for b in tr[torch.randperm(len(tr))].split(64):
            xb = x[b].to(dev)
            sh = [int(s) for s in torch.randint(-1, 2, (2,))]
            xb = torch.roll(xb, shifts=sh, dims=(2, 3))
            loss = F.cross_entropy(clf(xb), y[b].to(dev))
            opt.zero_grad()
            loss.backward()
            opt.step()
        progress(ep, epochs, t0, f"classifier loss {loss.item():.3f}")
    clf.eval()
    with torch.no_grad():
        acc = (clf(x[te].to(dev)).argmax(-1).cpu() == y[te]).float().mean().item()
    print(f"classifier held-out accuracy {acc:.3f}", file=sys.stderr)
    return clf, acc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=2400)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--ema", type=float, default=0.999)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default=str(M.WEIGHTS))
    ap.add_argument("--threads", type=int, default=0,
                    help="torch CPU threads (0: torch's default); 1 is faster on a busy machine")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        from sklearn.datasets import load_digits
        digits = load_digits()
        images8 = digits.images.astype(np.uint8)  # values 0..16
        labels = digits.target.astype(np.int64)
        np.savez_compressed(out / "digits.npz", images=images8, labels=labels)
    except ImportError:  # e.g. the GPU machine: the committed copy is the same data
        print("no scikit-learn: using the saved weights/digits.npz", file=sys.stderr)
        images8, labels = M.load_digits_npz()

    x, y = M.to_images(images8), torch.from_numpy(labels)
    dev = torch.device(args.device)
    clf, acc = train_classifier(x, y, args, dev)
    torch.save({k: v.half().cpu() for k, v in clf.state_dict().items()},
               out / "classifier_digits.pt")
    ema, loss, secs = train_dit(x, y, args, dev)
    meta = dict(vars(args), final_loss=round(loss, 5), train_seconds=round(secs, 1),
                classifier_accuracy=round(acc, 4), torch=torch.__version__,
                device_name=(torch.cuda.get_device_name() if dev.type == "cuda"
                             else f"cpu x{torch.get_num_threads()} threads"))
    torch.save({"config": ema.config, "meta": json.dumps(meta),
                "state_dict": {k: v.half().cpu() for k, v in ema.state_dict().items()}},
               out / "dit_digits.pt")
    print(json.dumps(meta), file=sys.stderr)


if __name__ == "__main__":
    main()
