"""A small class-conditional diffusion transformer (DiT) on 16x16 digits, its sampler, and the
small classifier whose features the report's Fréchet distance uses.

Self-contained on purpose (torch and numpy only, no sibling imports): the CI test loads this one
file by path, and the report runs on a GPU machine without scikit-learn or matplotlib.

The model is trained with flow matching (rectified flow): x_t = (1 - t)·x0 + t·noise, the network
predicts the velocity noise - x0, and sampling integrates dx/dt from t = 1 (noise) to t = 0.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, List, Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
WEIGHTS = HERE / "weights"
IMG = 16          # scikit-learn's 8x8 digits, upsampled bilinearly (smoother, SSIM needs > 8 px)
NUM_CLASSES = 10  # label NUM_CLASSES is the "no label" of classifier-free guidance

# attn(q, k, v, step) -> out, with q, k, v [B, H, N, D]; `step` is the sampler's step index (the
# timestep policy's index), None during training.
AttnFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Optional[int]], torch.Tensor]


# ---- data --------------------------------------------------------------------------------------
def load_digits_npz(path: Path = WEIGHTS / "digits.npz"):
    """(images uint8 [1797, 8, 8] in 0..16, labels int64 [1797]) as saved by train.py."""
    d = np.load(path)
    return d["images"], d["labels"].astype(np.int64)


def to_images(digits8: np.ndarray) -> torch.Tensor:
    """uint8 8x8 digits (0..16) -> float32 [N, 1, 16, 16] in [-1, 1]."""
    x = torch.from_numpy(digits8.astype(np.float32) / 8.0 - 1.0)[:, None]
    return F.interpolate(x, size=(IMG, IMG), mode="bilinear", align_corners=False)


# ---- attention backends ------------------------------------------------------------------------
def sdpa_attention(q, k, v, step=None):
    """PyTorch's attention: training and the float reference (no int8attn needed)."""
    return F.scaled_dot_product_attention(q, k, v)


# The model attends over 64 tokens, and on at most 512 keys (of its head dim) every mode runs
# EXACT (the library's rule for fresh K/V, src/common/modes.h exact_for_keys: every row would
# read 100 dB and measure nothing). Each int8attn call therefore gets its K and V repeated 9
# times along the keys (576 keys): the same attention (each key's softmax weight splits into
# nine equal parts, and every 64-key block and the K mean are those of the original keys), run
# on the quantized paths. (Until 2026-11-29 the rule stopped at 128 keys and this was 3.)
KEY_REPEATS = 9


def int8attn_attention(mode: Optional[str] = None, policy=None,
                       key_repeats: int = KEY_REPEATS) -> AttnFn:
    """int8attn.attention with a fixed ``mode`` ("exact", "balanced", "fast"), or with a
    ``TimestepPolicy`` deciding the mode per sampler step (mode None). K and V are repeated
    ``key_repeats`` times along the keys (see KEY_REPEATS). On CUDA the inputs are cast to fp16,
    as a real fp16 pipeline would call it; on the CPU they stay fp32."""
    import int8attn

    def attn(q, k, v, step=None):
        dt = q.dtype
        if key_repeats > 1:
            k, v = k.repeat(1, 1, key_repeats, 1), v.repeat(1, 1, key_repeats, 1)
        if q.is_cuda:
            q, k, v = q.half(), k.half(), v.half()
        if policy is not None:
            o = int8attn.attention(q, k, v, policy=policy, timestep=int(step))
        else:
            o = int8attn.attention(q, k, v, mode=mode)
        return o.to(dt)
    return attn


# ---- the DiT -----------------------------------------------------------------------------------
def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding of t in [0, 1] (scaled to 0..1000 like DDPM timesteps)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device) / half)
    a = 1000.0 * t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(a), torch.sin(a)], dim=-1)


def modulate(x, shift, scale):
    return x * (1 + scale[:, None]) + shift[:, None]


class Block(nn.Module):
    """DiT block with adaLN-Zero: the conditioning regresses shift/scale/gate of both sublayers."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * dim, dim))
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        nn.init.zeros_(self.ada[1].weight)
        nn.init.zeros_(self.ada[1].bias)

    def forward(self, x, c, attn: AttnFn, step):
        b, n, d = x.shape
        s1, c1, g1, s2, c2, g2 = self.ada(c).chunk(6, dim=-1)
        qkv = self.qkv(modulate(self.norm1(x), s1, c1))
        q, k, v = qkv.view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        o = attn(q.contiguous(), k.contiguous(), v.contiguous(), step)  # [B, H, N, Dh]
        x = x + g1[:, None] * self.proj(o.transpose(1, 2).reshape(b, n, d))
        return x + g2[:, None] * self.mlp(modulate(self.norm2(x), s2, c2))


class DiT(nn.Module):
    """Patchified 16x16x1 image -> (16/patch)² tokens, learned position embedding, ``depth``
    adaLN blocks conditioned on timestep + class embedding, linear un-patchify."""

    def __init__(self, dim: int = 64, depth: int = 4, heads: int = 1, patch: int = 2):
        super().__init__()
        self.config = dict(dim=dim, depth=depth, heads=heads, patch=patch)
        self.patch = patch
        self.grid = IMG // patch
        self.embed = nn.Linear(patch * patch, dim)
        self.pos = nn.Parameter(torch.randn(1, self.grid ** 2, dim) * 0.02)
        self.t_mlp = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.y_emb = nn.Embedding(NUM_CLASSES + 1, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.final_ada = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))
        self.out = nn.Linear(dim, patch * patch)
        for m in (self.final_ada[1], self.out):
            nn.init.zeros_(m.weight)
            nn.init.zeros_(m.bias)

    def forward(self, x, t, y, attn: AttnFn = sdpa_attention, step: Optional[int] = None):
        b, p, g = x.shape[0], self.patch, self.grid
        tok = x.view(b, g, p, g, p).permute(0, 1, 3, 2, 4).reshape(b, g * g, p * p)
        h = self.embed(tok) + self.pos
        c = self.t_mlp(timestep_embedding(t, h.shape[-1])) + self.y_emb(y)
        for blk in self.blocks:
            h = blk(h, c, attn, step)
        shift, scale = self.final_ada(c).chunk(2, dim=-1)
        out = self.out(modulate(self.norm(h), shift, scale))
        return out.view(b, g, g, p, p).permute(0, 1, 3, 2, 4).reshape(b, 1, IMG, IMG)


def load_dit(path: Path = WEIGHTS / "dit_digits.pt", device="cpu") -> DiT:
    ck = torch.load(path, map_location="cpu", weights_only=True)
    model = DiT(**ck["config"])
    model.load_state_dict({k: v.float() for k, v in ck["state_dict"].items()})
    return model.to(device).eval()


# ---- sampling ----------------------------------------------------------------------------------
@torch.no_grad()
def sample(model: DiT, noise, labels, steps: int, sampler: str = "euler",
           attn: AttnFn = sdpa_attention, cfg: float = 2.0,
           trace: Optional[List[torch.Tensor]] = None) -> torch.Tensor:
    """Integrate the flow from t = 1 (``noise``) to t = 0 in ``steps`` steps.

    sampler: "euler" (one model call a step) or "heun" (two; the last step is Euler, as in
    Karras et al.). Step i of the policy is the i-th step, both of Heun's calls included.
    cfg: classifier-free guidance scale (1 = off); cond and uncond run as one batch of 2B, as
    diffusion pipelines do. ``trace`` collects the latent after every step.
    """
    x = noise.clone()
    null = torch.full_like(labels, NUM_CLASSES)
    ts = torch.linspace(1.0, 0.0, steps + 1, device=noise.device)

    def velocity(x, t, i):
        tt = t.expand(x.shape[0])
        if cfg == 1.0:
            return model(x, tt, labels, attn, i)
        v = model(torch.cat([x, x]), torch.cat([tt, tt]), torch.cat([labels, null]), attn, i)
        vc, vu = v.chunk(2)
        return vu + cfg * (vc - vu)

    for i in range(steps):
        t, t_next = ts[i], ts[i + 1]
        d = velocity(x, t, i)
        x_next = x + (t_next - t) * d
        if sampler == "heun" and i < steps - 1:
            x_next = x + (t_next - t) * 0.5 * (d + velocity(x_next, t_next, i))
        elif sampler not in ("euler", "heun"):
            raise ValueError(f"unknown sampler {sampler!r}")
        x = x_next
        if trace is not None:
            trace.append(x.detach().clone())
    return x


# ---- the feature classifier for the Fréchet distance -------------------------------------------
class Classifier(nn.Module):
    """A small CNN on 16x16 digits; ``features`` (64-d, penultimate layer) feed the FID-like
    score, as Inception's pool features do for FID."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 8x8
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 4x4
            nn.Flatten(), nn.Linear(64 * 16, 64), nn.ReLU())
        self.head = nn.Linear(64, NUM_CLASSES)

    def features(self, x):
        return self.conv(x)

    def forward(self, x):
        return self.head(self.features(x))


def load_classifier(path: Path = WEIGHTS / "classifier_digits.pt", device="cpu") -> Classifier:
    clf = Classifier()
    sd = torch.load(path, map_location="cpu", weights_only=True)
    clf.load_state_dict({k: v.float() for k, v in sd.items()})
    return clf.to(device).eval()
