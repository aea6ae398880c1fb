"""Image-quality metrics in torch/numpy only (the GPU machine has no scikit-image or scipy).

Images are float tensors [N, 1, H, W] in [-1, 1]; PSNR and SSIM map them to [0, 1] (data range 1).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def _unit(x: torch.Tensor) -> torch.Tensor:
    return ((x.double().clamp(-1, 1) + 1) / 2)


def psnr(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-image PSNR in dB (data range 1); identical images are capped at 100 dB."""
    mse = (_unit(a) - _unit(b)).pow(2).flatten(1).mean(1)
    return (10 * torch.log10(1.0 / mse.clamp_min(1e-10))).float()


def _gaussian_window(size: int = 11, sigma: float = 1.5) -> torch.Tensor:
    g = torch.exp(-(torch.arange(size, dtype=torch.float64) - size // 2) ** 2 / (2 * sigma ** 2))
    g = g / g.sum()
    return (g[:, None] * g[None, :])[None, None]


def ssim(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-image SSIM (Wang et al. 2004): 11x11 Gaussian window, sigma 1.5, K1 = 0.01,
    K2 = 0.03, data range 1, mean over the valid (unpadded) window positions."""
    x, y = _unit(a), _unit(b)
    w = _gaussian_window().to(x.device)
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    mx, my = F.conv2d(x, w), F.conv2d(y, w)
    sxx = F.conv2d(x * x, w) - mx * mx
    syy = F.conv2d(y * y, w) - my * my
    sxy = F.conv2d(x * y, w) - mx * my
    s = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sxx + syy + c2))
    return s.flatten(1).mean(1).float()


def _sqrtm_psd(m: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh((m + m.T) / 2)
    return (v * np.sqrt(np.clip(w, 0, None))) @ v.T


def frechet_distance(f1: np.ndarray, f2: np.ndarray) -> float:
    """FID's formula on feature sets [N, d]: |mu1 - mu2|² + tr(S1 + S2 - 2 (S1^½ S2 S1^½)^½)
    (the symmetric form of tr((S1 S2)^½), computable with eigh, no scipy)."""
    f1, f2 = f1.astype(np.float64), f2.astype(np.float64)
    mu1, mu2 = f1.mean(0), f2.mean(0)
    s1, s2 = np.cov(f1, rowvar=False), np.cov(f2, rowvar=False)
    r1 = _sqrtm_psd(s1)
    cross = _sqrtm_psd(r1 @ s2 @ r1)
    d = ((mu1 - mu2) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2 * np.trace(cross)
    return max(float(d), 0.0)  # identical sets give a tiny negative from rounding
