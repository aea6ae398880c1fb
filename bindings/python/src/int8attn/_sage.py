"""``int8attn.sageattn``: SageAttention's entry point, so code written for it switches by import.

ComfyUI, diffusers forks and video pipelines patch attention with ``from sageattention import
sageattn``; ``from int8attn import sageattn`` is the one-line change. The arguments are
SageAttention's, with the ``attn_mask`` and ``dropout_p`` keywords such patches pass
(ComfyUI's ``attention_sage`` passes ``attn_mask=mask`` in every call); its kernel-selection
keywords are accepted and ignored (int8attn chooses its kernels), any other keyword is an error,
so a typo is not silently dropped.

Such patches send every attention call of a model through ``sageattn``, including the shapes
int8attn is measured slower on than PyTorch's SDPA (77-key text cross-attention, 1K-token
layers), so by default those calls run SDPA, as the diffusers processors do: a swapped model is
never slower for them. ``sageattn.stats`` counts where the calls went.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from ._api import ModeLike, attention, mode_int

#: SageAttention's tuning keywords, accepted for compatibility (int8attn picks its own kernels
#: and scale granularity).
SAGE_TUNING_KWARGS = frozenset({"qk_quant_gran", "pv_accum_dtype", "smooth_v"})


def sageattn(q: Any, k: Any, v: Any, tensor_layout: str = "HND", is_causal: bool = False,
             sm_scale: Optional[float] = None, return_lse: bool = False, *,
             attn_mask: Any = None, dropout_p: float = 0.0, smooth_k: bool = True,
             mode: ModeLike = "fast", k_granularity: str = "block",
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
        attn_mask: Optional mask with SDPA's meaning, [B|1, Hq|1, Nq|1, Nk] (bool: True keeps a
            key; float: added to the scaled scores), torch tensors only. SageAttention ignores
            it; int8attn computes it. A key-padding mask (one row for every query and head,
            float entries 0 or at most −1000, at least one kept key in each batch row) runs
            int8attn with valid key lengths, the kept keys moved to the front of K and V first
            where they are not a prefix of the row (checking it costs one host synchronisation
            per new mask tensor); any other mask runs SDPA with the mask
            (``stats["sdpa_masked"]``).
            A call routed to SDPA (``route``) takes its mask there unread. Not with
            ``is_causal`` (as SDPA).
        dropout_p: Must be 0 (inference only).
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
        TypeError: an argument SageAttention does not have; an ``attn_mask`` that is not a
            torch tensor, or with inputs that are not.
        ValueError: ``tensor_layout`` or ``route`` not one of the values above; a nonzero
            ``dropout_p``; ``attn_mask`` with ``is_causal``, or a mask other than a key-padding
            one with ``return_lse`` (SDPA, which computes it, returns no LSE).
    """
    # Every check below runs on each call of a patched pipeline: the common case first.
    if kwargs:
        unknown = set(kwargs) - SAGE_TUNING_KWARGS
        if unknown:
            raise TypeError(f"sageattn: unexpected keyword argument(s) {sorted(unknown)}")
    layout = tensor_layout if tensor_layout in _LAYOUTS else str(tensor_layout).upper()
    if layout not in _LAYOUTS:
        raise ValueError(f"tensor_layout: expected 'HND' or 'NHD', got {tensor_layout!r}")
    if route not in _ROUTES:
        raise ValueError(f"route: expected one of {_ROUTES}, got {route!r}")
    if dropout_p:
        raise ValueError(f"dropout_p: int8attn has no dropout (inference only), got {dropout_p!r}")
    if attn_mask is not None:
        _check_mask(q, attn_mask, is_causal)
    # The route first: a routed call runs SDPA with the mask as given, so its mask is not read
    # (that would cost a host synchronisation).
    if route == "auto" and not return_lse and _prefers_sdpa(q, k, layout, is_causal, mode):
        stats["sdpa_routed"] += 1
        return _sdpa(q, k, v, layout, is_causal, sm_scale, attn_mask)
    k_lengths = None
    if attn_mask is not None:
        padding = _mask_padding(q, k, attn_mask, layout)
        if padding is None:
            if return_lse:
                raise ValueError("attn_mask: with return_lse only a key-padding mask is "
                                 "supported (other masks run SDPA, which returns no LSE)")
            stats["sdpa_masked"] += 1
            return _sdpa(q, k, v, layout, is_causal, sm_scale, attn_mask)
        k, v = _routing_parts()[4](k, v, layout, padding.order)
        k_lengths = padding.lengths
    stats["int8attn"] += 1
    return attention(q, k, v, mode=mode, causal=is_causal, sm_scale=sm_scale, layout=layout,
                     return_lse=return_lse, smooth_k=smooth_k, k_granularity=k_granularity,
                     k_lengths=k_lengths)


_ROUTES = ("auto", "always")
_LAYOUTS = ("HND", "NHD")

#: Where ``sageattn``'s calls went: ``int8attn``, ``sdpa_routed`` (the routing table, or an
#: EXACT call, sent it to SDPA) and ``sdpa_masked`` (a mask other than a key-padding one). Reset
#: in place: ``sageattn.stats.update(int8attn=0, sdpa_routed=0, sdpa_masked=0)``.
stats: Dict[str, int] = {"int8attn": 0, "sdpa_routed": 0, "sdpa_masked": 0}
sageattn.stats = stats  # type: ignore[attr-defined]


# The processors' routing, the unpatched SDPA and a key-padding mask reader, bound on the first
# CUDA or masked call (torch is there then; importing inside every call would cost microseconds
# of host time).
_torch_parts: Optional[Tuple[Callable[..., Any], Callable[..., bool], Callable[..., Any],
                             Any, Callable[..., Any]]] = None


def _routing_parts() -> Tuple[Callable[..., Any], Callable[..., bool], Callable[..., Any], Any,
                              Callable[..., Any]]:
    global _torch_parts
    if _torch_parts is None:
        from . import _processors

        _torch_parts = (_processors._call_shape, _processors._route, _processors._ORIGINAL_SDPA,
                        _processors._KeyLengths(), _processors._kept_keys_first)
    return _torch_parts


def _check_mask(q: Any, mask: Any, causal: bool) -> None:
    """``attn_mask``'s errors, before any work."""
    if type(mask).__module__.split(".")[0] != "torch" or \
            type(q).__module__.split(".")[0] != "torch":
        raise TypeError("attn_mask: expected a torch tensor, with torch q, k and v; got "
                        f"{type(mask).__name__} (q: {type(q).__name__})")
    if causal:
        raise ValueError("attn_mask: not with is_causal=True (as torch's SDPA); fold the causal "
                         "mask into attn_mask")


def _mask_padding(q: Any, k: Any, mask: Any, layout: str) -> Any:
    """What ``mask`` amounts to as a key-padding mask (valid key lengths, and the kept keys'
    order where they are not a prefix), or None where it is not one (the processors' reading,
    :meth:`int8attn._processors._KeyLengths.padding`: the last mask's answer is kept, so a
    model passing every layer the same mask synchronises once)."""
    keys = k.shape[1] if layout == "NHD" else k.shape[2]
    return _routing_parts()[3].padding(mask, q.shape[0], keys, floats=True, holes=True)


def _prefers_sdpa(q: Any, k: Any, layout: str, causal: bool, mode: ModeLike) -> bool:
    """Whether the routing sends this call to SDPA: CUDA torch tensors only, the processors'
    rule (:func:`int8attn._processors._route`) on the same call shape."""
    if not getattr(q, "is_cuda", False) or type(q).__module__.split(".")[0] != "torch":
        return False
    call_shape, route = _routing_parts()[:2]
    device, head_dim, nq, nk, batch_heads = call_shape(q, k, layout)
    if causal and nq != nk:
        return False
    return route("auto", device, mode_int(mode), head_dim, nq, nk, batch_heads)


def _sdpa(q: Any, k: Any, v: Any, layout: str, causal: bool, sm_scale: Optional[float],
          mask: Any = None) -> Any:
    """SDPA on the call, its output laid out like ``q`` (int8attn's own output is)."""
    sdpa = _routing_parts()[2]
    if layout == "NHD":
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if q.size(1) != k.size(1):
        o = sdpa(q, k, v, attn_mask=mask, is_causal=causal, scale=sm_scale, enable_gqa=True)
    else:
        o = sdpa(q, k, v, attn_mask=mask, is_causal=causal, scale=sm_scale)
    return o.transpose(1, 2).contiguous() if layout == "NHD" else o
