"""A float64 numpy reference of the library's attention semantics (include/int8attn.h)."""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np


def attention_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool = False,
                  sm_scale: Optional[float] = None, k_lengths=None, block_mask=None,
                  mask_block: Tuple[int, int] = (128, 64)) -> Tuple[np.ndarray, np.ndarray]:
    """O and LSE for q [B,Hq,Nq,D], k/v [B,Hkv,Nk,D] (HND), float64.

    Rows without a visible key give O = 0 and LSE = -inf.
    """
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    b, hq, nq, d = q.shape
    hkv, nk = k.shape[1], k.shape[2]
    g = hq // hkv
    k = np.repeat(k, g, axis=1)
    v = np.repeat(v, g, axis=1)
    scale = 1.0 / np.sqrt(d) if sm_scale is None else sm_scale
    s = scale * np.einsum("bhid,bhjd->bhij", q, k)
    visible = np.ones((b, hq, nq, nk), dtype=bool)
    lengths = np.full(b, nk) if k_lengths is None else np.asarray(k_lengths)
    j = np.arange(nk)[None, :]
    i = np.arange(nq)[:, None]
    for bi in range(b):
        L = int(lengths[bi])
        vis = j < L
        if causal:
            vis = vis & (j <= i + L - nq)
        visible[bi] &= vis
    if block_mask is not None:
        qb, kb = mask_block
        m = np.asarray(block_mask).astype(bool)
        m = np.broadcast_to(m, (b, hq) + m.shape[2:])
        full = np.repeat(np.repeat(m, qb, axis=2), kb, axis=3)[:, :, :nq, :nk]
        visible &= full
    s = np.where(visible, s, -np.inf)
    mx = s.max(-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    p = np.exp(s - mx)
    denom = p.sum(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        o = np.where(denom > 0, (p @ v) / np.where(denom > 0, denom, 1), 0.0)
        lse = np.where(denom[..., 0] > 0, np.log(np.where(denom[..., 0] > 0, denom[..., 0], 1))
                       + mx[..., 0], -np.inf)
    return o, lse


def rel_l1(o: np.ndarray, ref: np.ndarray) -> float:
    """Σ|o − ref| / Σ|ref|."""
    o = np.asarray(o, dtype=np.float64)
    return float(np.abs(o - ref).sum() / max(np.abs(ref).sum(), 1e-30))


def cosine(o: np.ndarray, ref: np.ndarray) -> float:
    """Cosine similarity of the flattened arrays."""
    a = np.asarray(o, dtype=np.float64).ravel()
    b = np.asarray(ref, dtype=np.float64).ravel()
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-30))


def randn(rng: np.random.Generator, *shape: int, dtype=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)
