#!/usr/bin/env python3
"""What the P·V number format alone costs in accuracy: a float64 simulation (numpy, no GPU).

FAST's rel-L1 floor (0.036-0.039 on Gaussian inputs against the bar's 0.03) comes from P·V, not
from Q·Kᵀ: BALANCED, with the same INT8 Q·Kᵀ and fp16 P·V, measures 0.008-0.0095. This script
takes the exact softmax probabilities P of a float64 reference and rounds only P and V, in the
formats a P·V tensor-core MMA can take, so the floor of each format and the candidates for
closing the gap can be compared before any kernel is written:

  fp16 P, fp16 V           BALANCED (P in [0, 1], V centred and scaled per channel)
  E4M3 P, E4M3 V           FAST as specified (P scaled by 448, V per-channel scales)
  E4M3 P, E4M3 V hi + lo   FAST with a second FP8 MMA on V's rounding residual
  u8 P per tile, s8 V      INT8 P·V (u8 x s8 -> s32 MMA), P rounded against each 128-key tile's
                           row maximum (the scale folded into the online softmax's rescale)
  u8 P global, s8 V        INT8 P·V with P rounded against the row's final maximum

Inputs: Gaussian Q, K, V ("gauss"); channel bias in K and V ("bias"); Q scaled by 3, a peaky
softmax ("peaky"); 0.5% of V's tokens scaled by 10 ("v-outlier tokens", the case a per-channel
INT8 V handles worst). Prints rel-L1 = Σ|o − ref| / Σ|ref| per case.

    python3 bench/sim_pv_formats.py [--rows 256] [--seed 0]
"""
from __future__ import annotations

import argparse

import numpy as np

E4M3_MAX = 448.0


def round_e4m3(x: np.ndarray) -> np.ndarray:
    """Round to the nearest E4M3 value (3 mantissa bits, subnormals below 2^-6, no overflow here)."""
    a = np.abs(x)
    e = np.maximum(np.floor(np.log2(np.maximum(a, 2.0**-9))), -6.0)
    ulp = 2.0 ** (e - 3)
    return np.sign(x) * np.minimum(np.round(a / ulp) * ulp, E4M3_MAX)


def round_fp16(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).astype(np.float64)


def make_inputs(rng, kind: str, rows: int, n: int, d: int):
    q = rng.standard_normal((rows, d))
    k = rng.standard_normal((n, d))
    v = rng.standard_normal((n, d))
    if kind == "bias":
        k += 3.0 * rng.standard_normal(d)
        v += 3.0 * rng.standard_normal(d)
    elif kind == "peaky":
        q *= 3.0
    elif kind == "v-outlier tokens":
        idx = rng.choice(n, size=max(1, n // 200), replace=False)
        v[idx] *= 10.0
    return q, k, v


def formats(p: np.ndarray, v: np.ndarray, tile: int) -> dict[str, np.ndarray]:
    """Each format's output for exact probabilities p [rows, n] and values v [n, d]."""
    mu = v.mean(0)
    vc = v - mu  # V smoothing: exact, the mean comes back after the normalisation
    out = {}

    def normalised(num, den):
        return num / den + mu

    # BALANCED: fp16 P, V scaled per channel into fp16 range (a no-op for these magnitudes).
    p16 = round_fp16(p)
    out["fp16 P, fp16 V"] = normalised(p16 @ round_fp16(vc), p16.sum(1, keepdims=True))
    # FAST as specified: P scaled by 448 into E4M3, V per channel by its absmax / 448.
    s8v = np.maximum(np.abs(vc).max(0), 1e-30) / E4M3_MAX
    pe = round_e4m3(p * E4M3_MAX) / E4M3_MAX
    ve = round_e4m3(vc / s8v) * s8v
    out["E4M3 P, E4M3 V"] = normalised(pe @ ve, pe.sum(1, keepdims=True))
    # A second FP8 MMA on V's residual (its own per-channel scale).
    res = vc - ve
    s8r = np.maximum(np.abs(res).max(0), 1e-30) / E4M3_MAX
    ve2 = ve + round_e4m3(res / s8r) * s8r
    out["E4M3 P, E4M3 V hi+lo"] = normalised(pe @ ve2, pe.sum(1, keepdims=True))
    # INT8 P·V: s8 V per channel; u8 P against each tile's row maximum (per-tile scale).
    si = np.maximum(np.abs(vc).max(0), 1e-30) / 127.0
    vi = np.clip(np.round(vc / si), -127, 127) * si
    acc = np.zeros((p.shape[0], v.shape[1]))
    den = np.zeros((p.shape[0], 1))
    for t in range(0, p.shape[1], tile):
        pt = p[:, t : t + tile]
        mt = np.maximum(pt.max(1, keepdims=True), 1e-300)
        pq = np.round(pt / mt * 255.0) * mt / 255.0
        acc += pq @ vi[t : t + tile]
        den += pq.sum(1, keepdims=True)
    out["u8 P per tile, s8 V"] = normalised(acc, den)
    pg = np.round(p * 255.0) / 255.0  # against the row's final maximum (p <= 1)
    out["u8 P global, s8 V"] = normalised(pg @ vi, pg.sum(1, keepdims=True))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=256, help="query rows per case")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tile", type=int, default=128, help="keys per P quantization tile (u8 P)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    cases = [(kind, n, d) for kind in ("gauss", "bias", "peaky", "v-outlier tokens")
             for n in (1024, 4096, 16384) for d in (64, 128)]
    names = None
    for kind, n, d in cases:
        q, k, v = make_inputs(rng, kind, args.rows, n, d)
        s = (q @ k.T) / np.sqrt(d)
        p = np.exp(s - s.max(1, keepdims=True))
        ref = (p @ v) / p.sum(1, keepdims=True)
        outs = formats(p, v, args.tile)
        if names is None:
            names = list(outs)
            print(f"{'inputs':<17} {'N':>6} {'D':>4} " + " ".join(f"{x:>22}" for x in names))
        rel = [np.abs(o - ref).sum() / np.abs(ref).sum() for o in outs.values()]
        print(f"{kind:<17} {n:>6} {d:>4} " + " ".join(f"{r:>22.4f}" for r in rel), flush=True)


if __name__ == "__main__":
    main()
