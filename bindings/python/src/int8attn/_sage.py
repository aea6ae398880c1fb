"""``int8attn.sageattn``: SageAttention's entry point, so code written for it switches by import.

ComfyUI, diffusers forks and video pipelines patch attention with ``from sageattention import
sageattn``; ``from int8attn import sageattn`` is the one-line change. The arguments are
SageAttention's; its kernel-selection keywords are accepted and ignored (int8attn chooses its
kernels), any other keyword is an error, so a typo is not silently dropped.
"""

from __future__ import annotations

from typing import Any, Optional

from ._api import ModeLike, attention

#: SageAttention's tuning keywords, accepted for compatibility (int8attn picks its own kernels
#: and scale granularity).
SAGE_TUNING_KWARGS = frozenset({"qk_quant_gran", "pv_accum_dtype", "smooth_v"})


def sageattn(q: Any, k: Any, v: Any, tensor_layout: str = "HND", is_causal: bool = False,
             sm_scale: Optional[float] = None, return_lse: bool = False, *,
             smooth_k: bool = True, mode: ModeLike = "fast", k_granularity: str = "block",
             **kwargs: Any) -> Any:
    """Attention with SageAttention's signature, computed by :func:`int8attn.attention`.

    Args:
        q: Queries [B, Hq, Nq, D] (``tensor_layout="HND"``) or [B, Nq, Hq, D] ("NHD"); torch
            (fp16/bf16, CUDA or CPU) or numpy.
        k: Keys, same layout; Hq must be a multiple of Hkv (GQA).
        v: Values, same layout.
        tensor_layout: "HND" or "NHD".
        is_causal: Causal mask (bottom-right aligned when Nq ≠ Nk).
        sm_scale: Softmax scale; None = 1/sqrt(D).
        return_lse: Also return the float32 [B, Hq, Nq] log-sum-exp of the scaled scores
            (natural log).
        smooth_k: Subtract K's per-channel mean before quantizing (exact; SageAttention's
            default too).
        mode: int8attn's precision mode; "fast" (INT8 Q·Kᵀ, FP8 P·V) is SageAttention's own
            on sm89/sm90, "balanced" keeps P·V in fp16.
        k_granularity: K's INT8 scales: "block" (one per 64 keys, SageAttention's) or "token".
        **kwargs: ``qk_quant_gran``, ``pv_accum_dtype``, ``smooth_v`` (ignored).

    Returns:
        The output like ``q``, or ``(out, lse)`` with ``return_lse``.

    Raises:
        TypeError: an argument SageAttention does not have.
    """
    unknown = set(kwargs) - SAGE_TUNING_KWARGS
    if unknown:
        raise TypeError(f"sageattn: unexpected keyword argument(s) {sorted(unknown)}")
    layout = str(tensor_layout).upper()
    if layout not in ("HND", "NHD"):
        raise ValueError(f"tensor_layout: expected 'HND' or 'NHD', got {tensor_layout!r}")
    return attention(q, k, v, mode=mode, causal=is_causal, sm_scale=sm_scale, layout=layout,
                     return_lse=return_lse, smooth_k=smooth_k, k_granularity=k_granularity)
