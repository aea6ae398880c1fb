"""diffusers' rotary embedding in one pass over memory, with bit-identical results.

``diffusers.models.embeddings.apply_rotary_emb`` (interleaved pairs, ``use_real=True``: Flux,
HunyuanVideo, …) computes ``(x.float() * cos + x_rotated.float() * sin).to(x.dtype)`` with
``x_rotated`` the pairs (−x₂ᵢ₊₁, x₂ᵢ) built by a negation and a stack: eight eager kernels.
In Flux's eager step at 1024 px on an H100 they take 40 of 186 ms, more than its attention.
:func:`lean_apply_rotary_emb` computes the same float32 products, sums and final rounding with
:func:`int8attn.rotary` (``int8attn_rotary``: one read and one write of Q or K, on either
backend). The wrapped processors (:class:`~int8attn.Int8SDPAProcessor`) whose module imports
diffusers' function (Flux) call it in its place, and so do those that import it inside their
call (HunyuanVideo, CogVideoX-5B: :func:`lean_builtins`); under ``torch.compile`` and where
gradients are needed the original runs (inductor fuses it into one kernel anyway).

Wan's nested function (:func:`lean_wan_rotary`) and the complex products of Qwen-Image and
Z-Image (:func:`lean_complex_rotary`: ``view_as_complex(x) * freqs_cis``, which PyTorch's CUDA
kernels evaluate with fused multiply-adds, ``int8attn_rotary``'s
``INT8ATTN_ROTARY_COMPLEX_FMA``) get stand-ins whose first call also runs the original and keeps
int8attn only if every bit agrees.
"""
from __future__ import annotations

import functools
import types
import weakref
from typing import Any, Callable, Dict, Optional, Sequence

import torch

from . import _api, _fastpath
from . import _lib as L

# Input dtypes whose ``.float()`` is the exact widening a mixed multiply by float32 also does.
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 sequence_dim: int) -> torch.Tensor:
    """diffusers' ``apply_rotary_emb(x, (cos, sin), sequence_dim=...)`` (``use_real=True``,
    ``use_real_unbind_dim=-1``) by :func:`int8attn.rotary`, bit for bit.

    Args:
        x: ``[B, H, S, D]`` (``sequence_dim=2``) or ``[B, S, H, D]`` (``sequence_dim=1``),
            fp16, bf16 or fp32, D even.
        cos, sin: ``[S, D]`` float32 tables on ``x``'s device.
        sequence_dim: 1 or 2.
    """
    return _rotate(x, cos, sin, sequence_dim == 1)


_ARITHMETIC_NAMES = {L.ROTARY_ROUNDED: "rounded", L.ROTARY_COMPLEX_FMA: "complex_fma"}


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, nhd: bool,
            arithmetic: int = L.ROTARY_ROUNDED, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """int8attn.rotary into ``out`` (a new tensor like ``x`` when None), by the per-call fast
    path where it applies."""
    out = torch.empty_like(x) if out is None else out
    if _fastpath.rotary(x, cos, sin, out, nhd, arithmetic):
        return out
    return _api.rotary(x, cos, sin, layout="NHD" if nhd else "HND", out=out,
                       arithmetic=_ARITHMETIC_NAMES[arithmetic])


def _rotatable(x: Any, tables: Sequence[Any]) -> bool:
    """Whether int8attn.rotary can stand in for a float32 rotation of ``x`` (a 4-D fp16, bf16 or
    fp32 tensor, D even) by float32 ``tables`` on its device, with no gradient needed."""
    if (not isinstance(x, torch.Tensor) or x.dtype not in _DTYPES or x.dim() != 4
            or x.numel() == 0 or x.shape[-1] % 2):
        return False
    if not all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.device == x.device
               for t in tables):
        return False
    # int8attn.rotary has no backward
    return not (torch.is_grad_enabled() and any(t.requires_grad for t in (x, *tables)))


def _takes(x: Any, freqs_cis: Any, use_real: bool, use_real_unbind_dim: int,
           sequence_dim: int) -> bool:
    """Whether rotate_pairs gives diffusers' result for these arguments."""
    if not (use_real and use_real_unbind_dim == -1 and sequence_dim in (1, 2)):
        return False
    if not isinstance(freqs_cis, Sequence) or len(freqs_cis) != 2:
        return False
    if not _rotatable(x, freqs_cis):
        return False
    want = (x.shape[sequence_dim], x.shape[-1])
    return all(tuple(t.shape) == want for t in freqs_cis)


def lean_apply_rotary_emb(original: Callable[..., Any]) -> Callable[..., Any]:
    """A drop-in for diffusers' ``apply_rotary_emb`` (``original``): :func:`rotate_pairs` where
    it gives the same result in eager mode, ``original`` otherwise (other variants and dtypes,
    complex tables, gradients, ``torch.compile``)."""

    @functools.wraps(original)
    def apply_rotary_emb(x: torch.Tensor, freqs_cis: Any, use_real: bool = True,
                         use_real_unbind_dim: int = -1, sequence_dim: int = 2) -> Any:
        if (not torch.compiler.is_compiling()
                and _takes(x, freqs_cis, use_real, use_real_unbind_dim, sequence_dim)):
            return rotate_pairs(x, freqs_cis[0], freqs_cis[1], sequence_dim)
        return original(x, freqs_cis, use_real=use_real,
                        use_real_unbind_dim=use_real_unbind_dim, sequence_dim=sequence_dim)

    apply_rotary_emb.__int8attn_lean__ = True  # type: ignore[attr-defined]
    return apply_rotary_emb


# ---- processors that import diffusers' function inside ``__call__`` --------------------------
# (HunyuanVideo, CogVideoX-5B, …: ``from ..embeddings import apply_rotary_emb``)

_EMBEDDINGS = "diffusers.models.embeddings"


def lean_builtins(builtins: Any) -> Dict[str, Any]:
    """A copy of ``builtins`` (a module or its dict) whose ``__import__`` hands a
    ``from …embeddings import apply_rotary_emb`` of diffusers a stand-in module holding
    :func:`lean_apply_rotary_emb`'s version, for the globals of a wrapped processor whose code
    imports it inside its call (every other import is the original's)."""
    table = dict(builtins if isinstance(builtins, dict) else vars(builtins))
    original = table["__import__"]
    proxies: Dict[int, types.ModuleType] = {}

    def __import__(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002, ANN001, ANN202
        module = original(name, globals, locals, fromlist, level)
        if (fromlist and "apply_rotary_emb" in fromlist
                and getattr(module, "__name__", None) == _EMBEDDINGS):
            proxy = proxies.get(id(module))
            if proxy is None:
                proxy = types.ModuleType(_EMBEDDINGS)
                proxy.__dict__.update(module.__dict__)
                proxy.apply_rotary_emb = lean_apply_rotary_emb(module.apply_rotary_emb)
                proxies[id(module)] = proxy
            return proxy
        return module

    table["__import__"] = __import__
    return table


# ---- rotary functions a processor defines inside ``__call__`` (Wan, Z-Image) ----------------

# The names the stand-ins look up in the wrapped processor's (rebound) globals.
WAN_ROTARY_GLOBAL = "_int8attn_wan_rotary"
COMPLEX_ROTARY_GLOBAL = "_int8attn_complex_rotary"


def _wan_stand_in(hidden_states, freqs_cos, freqs_sin):  # noqa: ANN001, ANN202
    return _int8attn_wan_rotary(hidden_states, freqs_cos, freqs_sin)  # noqa: F821


def _complex_stand_in(x_in, freqs_cis):  # noqa: ANN001, ANN202
    return _int8attn_complex_rotary(x_in, freqs_cis)  # noqa: F821


# A nested ``apply_rotary_emb``'s argument names -> (its stand-in, the global the stand-in calls)
_NESTED = {
    # Wan: real tables [1, S, 1, D], its own pairing
    ("hidden_states", "freqs_cos", "freqs_sin"): (_wan_stand_in, WAN_ROTARY_GLOBAL),
    # Z-Image: view_as_complex(x) * freqs_cis[:, :, None], freqs_cis [B, S, D/2]
    ("x_in", "freqs_cis"): (_complex_stand_in, COMPLEX_ROTARY_GLOBAL),
}


def nested_rotary_code(code: types.CodeType) -> Optional[tuple]:
    """``code`` (a processor's ``__call__``) with its nested ``apply_rotary_emb`` of one of the
    known signatures (:data:`_NESTED`) replaced by a stand-in that calls a global, the nested
    function's original code and that global's name; None when it has none."""
    consts = list(code.co_consts)
    for i, c in enumerate(consts):
        if not (isinstance(c, types.CodeType) and c.co_name == "apply_rotary_emb"
                and not c.co_freevars):
            continue
        known = _NESTED.get(c.co_varnames[:c.co_argcount])
        if known is not None:
            consts[i] = known[0].__code__.replace(co_name=c.co_name)
            return code.replace(co_consts=tuple(consts)), c, known[1]
    return None


def lean_nested_rotary(global_name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """The stand-in the global ``global_name`` (of :func:`nested_rotary_code`) holds for the
    nested function ``original``."""
    if global_name == WAN_ROTARY_GLOBAL:
        return lean_wan_rotary(original)
    return lean_complex_rotary(original, batched_freqs=True)


class _TableCache:
    """int8attn_rotary's [S, D] tables derived from a model's own rotary tensors, kept for the
    last few sources: a transformer step passes every layer the same tensors (Qwen-Image two,
    image and text, in turn), so each table is built once a step."""

    _SIZE = 4

    def __init__(self) -> None:
        self.entries: Dict[tuple, tuple] = {}

    def get(self, source: torch.Tensor, key: tuple,
            build: Callable[[], tuple]) -> tuple:
        """The tables ``build()`` makes from ``source``; ``key`` holds what else they depend on."""
        key = (source.data_ptr(), source._version, source.device) + key
        hit = self.entries.get(key)
        # The weak reference makes a new tensor at a freed one's address miss the cache.
        if hit is None or hit[2]() is not source:
            if len(self.entries) >= self._SIZE:
                self.entries.pop(next(iter(self.entries)))
            hit = self.entries[key] = (*build(), weakref.ref(source))
        return hit[0], hit[1]


def _first_call_checked(state: Dict[str, bool], out: torch.Tensor,
                        reference: Callable[[], Any]) -> Any:
    """``out`` if it equals ``reference()`` bit for bit on the stand-in's first call (then
    always), else the reference's result, and ``state["ok"]`` turns False for good. Inside a
    CUDA-graph capture the comparison (a host synchronisation) cannot run: such a call
    returns the reference's result unchecked, and the first call outside checks."""
    if state["checked"]:
        return out
    ref = reference()
    if out.is_cuda and torch.cuda.is_current_stream_capturing():
        return ref
    state["checked"] = True
    state["ok"] = (isinstance(ref, torch.Tensor) and ref.dtype == out.dtype
                   and ref.shape == out.shape
                   and torch.equal(ref.view(torch.uint8), out.view(torch.uint8)))
    return out if state["ok"] else ref


def _wan_tables(cache: _TableCache, x: Any, freqs_cos: Any, freqs_sin: Any) -> Optional[tuple]:
    """int8attn_rotary's [S, D] tables for Wan's pairing (pair i: cos of channel 2i, sin of
    channel 2i+1, for both of its outputs), or None where the arguments are not Wan's layout
    ([B, S, H, D] input, S·D float32 entries per table)."""
    if not _rotatable(x, (freqs_cos, freqs_sin)):
        return None
    S, D = x.shape[1], x.shape[-1]
    if any(t.numel() != S * D or t.shape[-1] != D for t in (freqs_cos, freqs_sin)):
        return None

    def build() -> tuple:
        return (freqs_cos.reshape(S, D)[:, 0::2].repeat_interleave(2, dim=-1),
                freqs_sin.reshape(S, D)[:, 1::2].repeat_interleave(2, dim=-1))

    return cache.get(freqs_cos, (freqs_sin.data_ptr(), freqs_sin._version, S, D), build)


def lean_wan_rotary(original: Callable[..., Any]) -> Callable[..., Any]:
    """A drop-in for Wan's nested ``apply_rotary_emb`` (``original``, [B, S, H, D] input and
    [1, S, 1, D] float32 tables): :func:`int8attn.rotary` with tables that reproduce its pairing,
    in eager mode. Its first call also runs ``original`` and keeps the int8attn path only if
    every output bit agrees (a diffusers version whose function differs falls back for good)."""
    state = {"checked": False, "ok": True}
    cache = _TableCache()

    def apply_rotary_emb(hidden_states: torch.Tensor, freqs_cos: Any, freqs_sin: Any) -> Any:
        tables = None
        if state["ok"] and not torch.compiler.is_compiling():
            tables = _wan_tables(cache, hidden_states, freqs_cos, freqs_sin)
        if tables is None:
            return original(hidden_states, freqs_cos, freqs_sin)
        out = _rotate(hidden_states, tables[0], tables[1], True)
        return _first_call_checked(state, out,
                                   lambda: original(hidden_states, freqs_cos, freqs_sin))

    apply_rotary_emb.__int8attn_lean__ = True  # type: ignore[attr-defined]
    apply_rotary_emb.state = state  # type: ignore[attr-defined]  # whether the check passed
    return apply_rotary_emb


# ---- Qwen-Image: the complex product ``view_as_complex(x) * freqs_cis`` ---------------------

QWEN_ROTARY_NAME = "apply_rotary_emb_qwen"


def _complex_tables(cache: _TableCache, x: Any, freqs: Any, batched: bool) -> Optional[tuple]:
    """int8attn_rotary's [S, D] tables (both channels of pair i: Re f[s, i], Im f[s, i]) for a
    CUDA ``x`` [B, S, H, D] and complex64 ``freqs`` on its device, [S, D/2] (or, ``batched``,
    [1, S, D/2]), or None otherwise. CUDA only: the fused multiply-adds are how PyTorch's CUDA
    kernels evaluate the product."""
    if not (_rotatable(x, ()) and x.is_cuda and isinstance(freqs, torch.Tensor)
            and freqs.dtype == torch.complex64 and freqs.device == x.device
            and tuple(freqs.shape) == (1,) * batched + (x.shape[1], x.shape[-1] // 2)
            and not (torch.is_grad_enabled() and freqs.requires_grad)):
        return None

    def build() -> tuple:
        f = freqs[0] if batched else freqs
        return (f.real.repeat_interleave(2, dim=-1).contiguous(),
                f.imag.repeat_interleave(2, dim=-1).contiguous())

    return cache.get(freqs, tuple(freqs.shape), build)


def lean_complex_rotary(original: Callable[..., Any], *,
                        batched_freqs: bool = False) -> Callable[..., Any]:
    """A drop-in for a complex-product rotary function ``original(x, freqs_cis, ...)``:
    :func:`int8attn.rotary` in its ``complex_fma`` arithmetic for [B, S, H, D] CUDA input and
    complex64 tables, in eager mode. Two signatures: Qwen-Image's ``apply_rotary_emb_qwen(x,
    freqs_cis, use_real=True, use_real_unbind_dim=-1)``, complex with ``use_real=False`` and
    tables [S, D/2]; and (``batched_freqs``) Z-Image's nested ``apply_rotary_emb(x_in,
    freqs_cis)``, always complex, tables [B, S, D/2] (taken at B = 1). Its first call also runs
    ``original`` and keeps the int8attn path only if every output bit agrees (a PyTorch build
    that evaluates the product otherwise falls back for good)."""
    state = {"checked": False, "ok": True}
    cache = _TableCache()

    @functools.wraps(original)
    def stand_in(x: torch.Tensor, freqs_cis: Any, *args: Any, **kwargs: Any) -> Any:
        tables = None
        complex_product = batched_freqs or not kwargs.get("use_real", args[0] if args else True)
        if complex_product and state["ok"] and not torch.compiler.is_compiling():
            tables = _complex_tables(cache, x, freqs_cis, batched_freqs)
        if tables is None:
            return original(x, freqs_cis, *args, **kwargs)
        out = _rotate(x, tables[0], tables[1], True, L.ROTARY_COMPLEX_FMA)
        return _first_call_checked(state, out, lambda: original(x, freqs_cis, *args, **kwargs))

    stand_in.__int8attn_lean__ = True  # type: ignore[attr-defined]
    stand_in.state = state  # type: ignore[attr-defined]  # whether the first-call check passed
    return stand_in


# ---- LTX-Video: its own ``apply_rotary_emb(x, freqs)`` over the flattened heads --------------

# (module, function name) of LTX-Video's and LTX-2's copies of that function
FLAT_ROTARY_FUNCTIONS = (
    ("diffusers.models.transformers.transformer_ltx", "apply_rotary_emb"),
    ("diffusers.models.transformers.transformer_ltx2", "apply_interleaved_rotary_emb"),
)


def lean_flat_rotary(original: Callable[..., Any]) -> Callable[..., Any]:
    """A drop-in for LTX-Video's ``apply_rotary_emb(x, (cos, sin))`` and LTX-2's
    ``apply_interleaved_rotary_emb`` (``original``): x [B, S, C] with the heads flattened into
    C, float32 tables [B, S, C], diffusers' interleaved real-table formula.
    :func:`int8attn.rotary` rotates each batch row with its own tables (x
    described as [1, S, 1, C]), in eager mode; its first call also runs ``original`` and keeps
    the int8attn path only if every output bit agrees."""
    state = {"checked": False, "ok": True}

    @functools.wraps(original)
    def apply_rotary_emb(x: torch.Tensor, freqs: Any) -> Any:
        if not (state["ok"] and not torch.compiler.is_compiling() and _flat_takes(x, freqs)):
            return original(x, freqs)
        cos, sin = freqs
        out = torch.empty_like(x)
        for b in range(x.shape[0]):
            t = b if cos.shape[0] > 1 else 0
            _rotate(x[b:b + 1].unsqueeze(2), cos[t], sin[t], True, out=out[b:b + 1].unsqueeze(2))
        return _first_call_checked(state, out, lambda: original(x, freqs))

    apply_rotary_emb.__int8attn_lean__ = True  # type: ignore[attr-defined]
    apply_rotary_emb.state = state  # type: ignore[attr-defined]  # whether the check passed
    return apply_rotary_emb


def _flat_takes(x: Any, freqs: Any) -> bool:
    """Whether ``x`` [B, S, C] and ``freqs`` = (cos, sin), each [B or 1, S, C] float32, are
    LTX-Video's layout for :func:`lean_flat_rotary`."""
    if not (isinstance(freqs, Sequence) and len(freqs) == 2 and isinstance(x, torch.Tensor)
            and x.dim() == 3 and _rotatable(x.unsqueeze(2), freqs)):
        return False
    B, S, C = x.shape
    return all(t.dim() == 3 and t.shape[0] in (1, B) and tuple(t.shape[1:]) == (S, C)
               for t in freqs)
