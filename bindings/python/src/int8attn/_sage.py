"""``int8attn.sageattn``: SageAttention's entry point, so code written for it switches by import.

ComfyUI, diffusers forks and video pipelines patch attention with ``from sageattention import
sageattn``; ``from int8attn import sageattn`` is the one-line change. The arguments are
SageAttention's; its kernel-selection keywords are accepted and ignored (int8attn chooses its
kernels), any other keyword is an error, so a typo is not silently dropped.

Such patches send every attention call of a model through ``sageattn``, including the shapes
int8attn is measured slower on than PyTorch's SDPA (77-key text cross-attention, 1K-token
layers), so by default those calls run SDPA, as the diffusers processors do: a swapped model is
never slower for them. ``sageattn.stats`` counts where the calls went.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from ._api import ModeLike, attention, parse_mode

#: SageAttention's tuning keywords, accepted for compatibility (int8attn picks its own kernels
#: and scale granularity).
SAGE_TUNING_KWARGS = frozenset({"qk_quant_gran", "pv_accum_dtype", "smooth_v"})


def sageattn(q: Any, k: Any, v: Any, tensor_layout: str = "HND", is_causal: bool = False,
             sm_scale: Optional[float] = None, return_lse: bool = False, *,
             smooth_k: bool = True, mode: ModeLike = "fast", k_granularity: str = "block",
             route: str = "auto", **kwargs: Any) -> Any:
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
        route: "auto" (default): a CUDA call whose shape int8attn is measured slower on than
            SDPA (the routing table of ``int8attn.routing_tables()``, as for the diffusers
            processors; EXACT calls always) runs ``torch.nn.functional.scaled_dot_product_attention``
            instead, into an output laid out like ``q``. Calls with ``return_lse``, and causal
            calls with Nq ≠ Nk (SDPA aligns the mask differently), always run int8attn.
            "always": every call runs int8attn.
        **kwargs: ``qk_quant_gran``, ``pv_accum_dtype``, ``smooth_v`` (ignored).

    Returns:
        The output like ``q``, or ``(out, lse)`` with ``return_lse``.

    Raises:
        TypeError: an argument SageAttention does not have.
        ValueError: ``tensor_layout`` or ``route`` not one of the values above.
    """
    unknown = set(kwargs) - SAGE_TUNING_KWARGS
    if unknown:
        raise TypeError(f"sageattn: unexpected keyword argument(s) {sorted(unknown)}")
    layout = str(tensor_layout).upper()
    if layout not in ("HND", "NHD"):
        raise ValueError(f"tensor_layout: expected 'HND' or 'NHD', got {tensor_layout!r}")
    if route not in _ROUTES:
        raise ValueError(f"route: expected one of {_ROUTES}, got {route!r}")
    if route == "auto" and not return_lse and _prefers_sdpa(q, k, layout, is_causal, mode):
        stats["sdpa_routed"] += 1
        return _sdpa(q, k, v, layout, is_causal, sm_scale)
    stats["int8attn"] += 1
    return attention(q, k, v, mode=mode, causal=is_causal, sm_scale=sm_scale, layout=layout,
                     return_lse=return_lse, smooth_k=smooth_k, k_granularity=k_granularity)


_ROUTES = ("auto", "always")

#: Where ``sageattn``'s calls went: ``int8attn`` and ``sdpa_routed`` (the routing table, or an
#: EXACT call, sent it to SDPA). Reset in place: ``sageattn.stats.update(int8attn=0,
#: sdpa_routed=0)``.
stats: Dict[str, int] = {"int8attn": 0, "sdpa_routed": 0}
sageattn.stats = stats  # type: ignore[attr-defined]


# The processors' routing and the unpatched SDPA, bound on the first CUDA call (torch is there
# then; importing inside every call would cost microseconds of host time).
_torch_parts: Optional[Tuple[Callable[..., Any], Callable[..., bool], Callable[..., Any]]] = None


def _routing_parts() -> Tuple[Callable[..., Any], Callable[..., bool], Callable[..., Any]]:
    global _torch_parts
    if _torch_parts is None:
        from . import _processors

        _torch_parts = (_processors._call_shape, _processors._route, _processors._ORIGINAL_SDPA)
    return _torch_parts


def _prefers_sdpa(q: Any, k: Any, layout: str, causal: bool, mode: ModeLike) -> bool:
    """Whether the routing sends this call to SDPA: CUDA torch tensors only, the processors'
    rule (:func:`int8attn._processors._route`) on the same call shape."""
    if not getattr(q, "is_cuda", False) or type(q).__module__.split(".")[0] != "torch":
        return False
    call_shape, route, _ = _routing_parts()
    device, head_dim, nq, nk, batch_heads = call_shape(q, k, layout)
    if causal and nq != nk:
        return False
    return route("auto", device, int(parse_mode(mode)), head_dim, nq, nk, batch_heads)


def _sdpa(q: Any, k: Any, v: Any, layout: str, causal: bool, sm_scale: Optional[float]) -> Any:
    """SDPA on the call, its output laid out like ``q`` (int8attn's own output is)."""
    sdpa = _routing_parts()[2]
    if layout == "NHD":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    gqa = {"enable_gqa": True} if q.shape[1] != k.shape[1] else {}
    o = sdpa(q, k, v, is_causal=causal, scale=sm_scale, **gqa)
    return o.transpose(1, 2).contiguous() if layout == "NHD" else o
