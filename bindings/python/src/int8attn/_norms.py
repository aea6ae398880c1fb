"""The query/key RMS normalizations of attention modules in one pass over memory.

``diffusers.models.normalization.RMSNorm`` (the query/key normalization of SD3.5, HunyuanVideo,
Qwen-Image, Chroma, LTX-Video, CogView4, Lumina, Sana, …) evaluates
``hidden_states * torch.rsqrt(hidden_states.to(float32).pow(2).mean(-1) + eps)``, then the
weight, in eight eager kernels that move about 34 bytes per element of Q or K (a float32 copy,
its square, the mean, a float32 product, the casts). :func:`int8attn.rms_norm` computes the same
maths in one read and one write (``int8attn_rms_norm``); a 16-bit result differs from
diffusers' by at most two units in the last place in about one element in 10⁵, a float32 one by
a few float32 roundings (another summation order, a correctly rounded reciprocal root).

:func:`install` gives such a module an instance-level ``forward`` that calls it for CUDA tensors
in eager mode while its attention module runs an int8attn processor; under ``torch.compile``
(inductor fuses the original anyway), where gradients are needed, with a bias, for other devices
and dtypes, and once the stock processors are set back, the original ``forward`` runs.

``torch.nn.RMSNorm`` (Flux, Wan) runs as one fused kernel in PyTorch, at about half the memory
rate of int8attn's over per-head rows (H100, ``bench/results/2026-11-28-h100-rms-norm/``:
Flux's 0.072 against 0.031 ms a call, SD3.5's 64-channel rows 0.192 against 0.041) but faster
over Wan's 1536 channels (0.075 against 0.084). So its modules of at most :data:`TORCH_MAX_CHANNELS` channels get the
lean forward too, with its rounding: x·r times the weight in float32, rounded once (the weight
passed as a float32 copy, made once per weight version).
"""
from __future__ import annotations

import types
import weakref
from typing import Any, Optional

import torch

from . import _api, _fastpath

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_HALF = (torch.float16, torch.bfloat16)
# Where the lean path runs. The CPU is left to PyTorch's vectorised kernels (the tests add it).
DEVICE_TYPES = ("cuda",)
# torch.nn.RMSNorm rows int8attn's kernel runs faster than PyTorch's fused one: one 8-channel
# chunk a lane (measured at 64 and 128 channels; slower at 1536).
TORCH_MAX_CHANNELS = 256


def is_diffusers_rms_norm(module: Any) -> bool:
    """Whether ``module`` is diffusers' ``RMSNorm`` (the eight-kernel one)."""
    cls = type(module)
    return cls.__name__ == "RMSNorm" and cls.__module__ == "diffusers.models.normalization"


def is_torch_rms_norm(module: Any) -> bool:
    """Whether ``module`` is a ``torch.nn.RMSNorm`` over rows of at most
    :data:`TORCH_MAX_CHANNELS` channels."""
    shape = getattr(module, "normalized_shape", None)
    return (type(module) is torch.nn.RMSNorm and shape is not None and len(shape) == 1
            and shape[0] <= TORCH_MAX_CHANNELS)


def out_dtype(x: torch.Tensor, weight: Optional[torch.Tensor]) -> torch.dtype:
    """The dtype of diffusers' result: x's without a weight, the weight's with a 16-bit one,
    float32 with a float32 one (float32 x·r times a float32 weight)."""
    if weight is None:
        return x.dtype
    return weight.dtype if weight.dtype in _HALF else torch.float32


def _float32_weight(module: Any, w: torch.Tensor) -> torch.Tensor:
    """``w`` as float32, kept on the module until the weight changes."""
    key = (w.data_ptr(), w._version, w.dtype, w.device)
    kept = module.__dict__.get("_int8attn_weight32")
    if kept is None or kept[0] != key:
        kept = (key, w.detach().float())
        module.__dict__["_int8attn_weight32"] = kept
    return kept[1]


def _arguments(module: Any, x: torch.Tensor) -> Optional[tuple]:
    """(weight to pass, eps, output dtype) reproducing ``module``'s rounding, or None where the
    lean path does not reproduce it."""
    w = module.weight
    if type(module) is torch.nn.RMSNorm:
        if w is not None and w.dtype != x.dtype:  # PyTorch's promotion: left to it
            return None
        eps = module.eps if module.eps is not None else torch.finfo(x.dtype).eps
        return (_float32_weight(module, w) if w is not None else None), eps, x.dtype
    return w, module.eps, out_dtype(x, w)


def _takes(module: Any, x: Any) -> bool:
    """Whether int8attn.rms_norm stands in for ``module(x)`` (eager, CUDA, no gradient)."""
    if type(x) is not torch.Tensor or x.device.type not in DEVICE_TYPES or x.dtype not in _DTYPES:
        return False
    if not 1 <= x.dim() <= 4 or x.numel() == 0 or getattr(module, "bias", None) is not None:
        return False
    w = module.weight
    if w is not None and (w.dtype not in _DTYPES or w.device != x.device or w.dim() != 1):
        return False
    if torch.is_grad_enabled() and (x.requires_grad or (w is not None and w.requires_grad)):
        return False
    return True


_processor_class: list = []  # Int8AttnProcessor, once imported (_processors imports this module)


def _is_int8attn_processor(processor: Any) -> bool:
    if not _processor_class:
        from ._processors import Int8AttnProcessor

        _processor_class.append(Int8AttnProcessor)
    cls = _processor_class[0]
    return isinstance(processor, cls) or isinstance(getattr(processor, "config", None), cls)


def lean_forward(self: Any, hidden_states: Any) -> Any:
    """``forward`` of an RMS normalization given the lean path: :func:`int8attn.rms_norm`
    while its attention module's processor is int8attn's and :func:`_takes` holds, the class's
    own ``forward`` otherwise (so setting the stock processors back restores stock behaviour).
    Bound to the module as a method, not a closure: a deep copy of the model binds it to the
    copy."""
    if torch.compiler.is_compiling():
        return type(self).forward(self, hidden_states)
    owner = self.__dict__.get("_int8attn_owner")
    owner = owner() if owner is not None else None
    if (owner is None or not _is_int8attn_processor(getattr(owner, "processor", None))
            or not _takes(self, hidden_states)):
        return type(self).forward(self, hidden_states)
    args = _arguments(self, hidden_states)
    if args is None:
        return type(self).forward(self, hidden_states)
    w, eps, dtype = args
    out = torch.empty(hidden_states.shape, dtype=dtype, device=hidden_states.device)
    if not _fastpath.rms_norm(hidden_states, w, out, eps):
        _api.rms_norm(hidden_states, w, eps=eps, out=out)
    return out


def install(module: Any, owner: Any) -> bool:
    """Give ``module``, a query/key norm of attention module ``owner``, the lean forward (once)
    if it is diffusers' ``RMSNorm`` or a ``torch.nn.RMSNorm`` of per-head rows; True if it has
    it."""
    if not (is_diffusers_rms_norm(module) or is_torch_rms_norm(module)):
        return False
    module._int8attn_owner = weakref.ref(owner)
    current = module.__dict__.get("forward")
    if getattr(current, "__func__", None) is not lean_forward:
        module.forward = types.MethodType(lean_forward, module)
    return True
