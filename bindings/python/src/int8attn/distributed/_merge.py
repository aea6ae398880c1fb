"""The log-sum-exp merge of partial attention results: the only place this maths lives.

Attention of a query row over the key set K = K1 ∪ K2 (disjoint) is, with
``lse_i = log Σ_{j∈Ki} exp(s_j)`` (natural log of the *scaled* scores, the library's LSE
convention, include/int8attn.h) and ``o_i`` the softmax-weighted mean of V over Ki::

    lse = log(exp(lse_1) + exp(lse_2))
    o   = exp(lse_1 − lse)·o_1 + exp(lse_2 − lse)·o_2

This is exact: no approximation beyond fp32 rounding. A part with no visible key has
``lse = −inf`` and ``o = 0`` (the library's convention for such rows); it gets weight 0, and a
row with no visible key in either part stays ``o = 0, lse = −inf`` (no NaN).
"""

from __future__ import annotations

from typing import Tuple

import torch


def merge_partials(o_a: torch.Tensor, lse_a: torch.Tensor, o_b: torch.Tensor,
                   lse_b: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Merge two partial attention results over disjoint key sets (in fp32).

    Args:
        o_a: Partial output [B, H, N, D] (any float dtype; computed in fp32).
        lse_a: Its natural-log log-sum-exp of the scaled scores, [B, H, N].
        o_b: The other partial output, same shape as ``o_a``.
        lse_b: Its log-sum-exp, same shape as ``lse_a``.

    Returns:
        ``(o, lse)`` in float32: the attention output and LSE over the union of both key sets.
    """
    if o_a.shape != o_b.shape:
        raise ValueError(f"o_b: shape {tuple(o_b.shape)} differs from o_a's {tuple(o_a.shape)}")
    if lse_a.shape != lse_b.shape or tuple(lse_a.shape) != tuple(o_a.shape[:-1]):
        raise ValueError(f"lse_a, lse_b: expected shape {tuple(o_a.shape[:-1])}, got "
                         f"{tuple(lse_a.shape)} and {tuple(lse_b.shape)}")
    lse_a = lse_a.float()
    lse_b = lse_b.float()
    m = torch.maximum(lse_a, lse_b)
    # Rows where both parts are empty have m = −inf; shifting by 0 there keeps exp() at 0
    # instead of exp(−inf − (−inf)) = NaN.
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    w_a = torch.exp(lse_a - m)
    w_b = torch.exp(lse_b - m)
    total = w_a + w_b
    lse = m + torch.log(total)  # log(0) = −inf: an empty row stays empty
    inv = torch.where(total > 0, 1.0 / total, torch.zeros_like(total))
    o = (o_a.float() * (w_a * inv).unsqueeze(-1)).add_(o_b.float() * (w_b * inv).unsqueeze(-1))
    return o, lse
