"""``torch.ops.int8attn.attention``: int8attn as an opaque torch operator.

Registered with the low-level ``torch.library.Library`` API (a schema, one Python kernel for the
CPU and CUDA dispatch keys, and a fake implementation for tracing) rather than
``torch.library.custom_op``, whose eager call adds an autograd wrapper and several Python layers
(~100 µs a call measured on an H100 host); this registration costs the dispatcher's own few
microseconds. The op has no autograd formula: int8attn is an inference kernel, so the autograd
keys fall through to it.

Eager code in this package calls the attention directly (``_api.attention_torch``) and uses the
op only while ``torch.compile`` traces (:func:`call`), so the op's dispatch cost is paid only where
it buys a graph without breaks.
"""

from __future__ import annotations

import weakref
from typing import Any, Optional

import torch
import torch.nn.functional as F

from . import _api

_ORIGINAL_SDPA = F.scaled_dot_product_attention
_attention_torch = _api.attention_torch
# mode 0 is INT8ATTN_MODE_DEFAULT: the policy's mode for the step when a policy is given, else
# BALANCED; any other mode is used as given, also with a policy (the C API's rule).
_SCHEMA = ("attention(Tensor q, Tensor k, Tensor v, int mode=0, bool causal=False, "
           "float sm_scale=0.0, str layout='HND', int policy=0, int timestep=-1, "
           "int k_granularity=0) -> Tensor")


def _kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mode: int = 0,
            causal: bool = False, sm_scale: float = 0.0, layout: str = "HND", policy: int = 0,
            timestep: int = -1, k_granularity: int = 0) -> torch.Tensor:
    """The op's kernel: ``O`` of q, k, v in ``layout``; ``policy`` is a raw
    ``int8attn_policy_t*`` (``TimestepPolicy.handle``) or 0; ``k_granularity`` an
    ``INT8ATTN_GRANULARITY_*`` value (0 = the library's default)."""
    return _attend(q, k, v, mode, causal, sm_scale, layout, policy, timestep, k_granularity,
                   None)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mode: int, causal: bool,
            sm_scale: float, layout: str, policy: int, timestep: int, k_granularity: int,
            out: Optional[torch.Tensor]) -> torch.Tensor:
    """The attention into ``out`` (None: a new tensor like q): the low-overhead path, else the
    general one."""
    kg = k_granularity or None
    o = _attention_torch(q, k, v, mode, causal, sm_scale or None, layout, policy or None,
                         timestep if policy else None, out, kg)
    if o is None:  # not a case of the low-overhead path: the general one
        o = _api.attention(q, k, v, mode=mode, causal=causal, sm_scale=sm_scale or None,
                           layout=layout, policy=policy or None,
                           timestep=timestep if policy else None, k_granularity=kg, out=out,
                           _warn_override=False)  # the op's documented rule, no warning
    return o


def _fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mode: int = 0,
          causal: bool = False, sm_scale: float = 0.0, layout: str = "HND", policy: int = 0,
          timestep: int = -1, k_granularity: int = 0) -> torch.Tensor:
    return torch.empty_like(q)


# Processors whose calls a compiled graph makes through ``processor_attention``: the graph holds
# the processor's number, and the processor decides at run time (sampler step, mode, routing).
_processors: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
_PROCESSOR_SCHEMA = ("processor_attention(Tensor q, Tensor k, Tensor v, bool causal, "
                     "float sm_scale, str layout, int processor) -> Tensor")


def register_processor(processor: Any) -> int:
    """A number for ``processor`` (held weakly) to pass to ``processor_attention``."""
    key = id(processor)
    _processors[key] = processor
    return key


def _processor_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                      sm_scale: float, layout: str, processor: int) -> torch.Tensor:
    proc = _processors.get(processor)
    if proc is None:
        raise RuntimeError("int8attn::processor_attention: the processor of this compiled "
                           "graph no longer exists; compile the model again")

    def sdpa() -> torch.Tensor:
        # Into a tensor laid out like q: the graph was traced with the fake's strides.
        out = torch.empty_like(q)
        if layout == "NHD":
            out.transpose(1, 2).copy_(_ORIGINAL_SDPA(q.transpose(1, 2), k.transpose(1, 2),
                                                     v.transpose(1, 2), is_causal=causal,
                                                     scale=sm_scale or None))
        else:
            out.copy_(_ORIGINAL_SDPA(q, k, v, is_causal=causal, scale=sm_scale or None))
        return out

    return proc.run(q, k, v, layout=layout, causal=causal, scale=sm_scale or None,
                    fallback_fn=sdpa)


def _processor_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                    sm_scale: float, layout: str, processor: int) -> torch.Tensor:
    return torch.empty_like(q)


_MASKED_SCHEMA = ("processor_masked_attention(Tensor q, Tensor k, Tensor v, Tensor mask, "
                  "float sm_scale, str layout, int processor) -> Tensor")


def _masked_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                   sm_scale: float, layout: str, processor: int) -> torch.Tensor:
    """A masked call of a compiled graph: the processor's padding-mask path (``k_lengths``), or
    PyTorch SDPA with the mask, decided at run time; the result laid out like q (the fake's)."""
    proc = _processors.get(processor)
    if proc is None:
        raise RuntimeError("int8attn::processor_masked_attention: the processor of this "
                           "compiled graph no longer exists; compile the model again")
    out = torch.empty_like(q)

    def sdpa() -> torch.Tensor:
        if layout == "NHD":
            out.transpose(1, 2).copy_(_ORIGINAL_SDPA(q.transpose(1, 2), k.transpose(1, 2),
                                                     v.transpose(1, 2), attn_mask=mask,
                                                     scale=sm_scale or None))
        else:
            out.copy_(_ORIGINAL_SDPA(q, k, v, attn_mask=mask, scale=sm_scale or None))
        return out

    o = proc._masked(q, k, v, mask, layout, False, sm_scale or None, sdpa)
    if o is not out:
        out.copy_(o)
    return out


def _masked_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                 sm_scale: float, layout: str, processor: int) -> torch.Tensor:
    return torch.empty_like(q)


def _register() -> Any:
    lib = torch.library.Library("int8attn", "FRAGMENT")
    register_fake = getattr(torch.library, "register_fake", None)
    if register_fake is None:  # pragma: no cover - torch < 2.4
        register_fake = torch.library.impl_abstract
    for name, schema, kernel, fake in (
            ("attention", _SCHEMA, _kernel, _fake),
            ("processor_attention", _PROCESSOR_SCHEMA, _processor_kernel, _processor_fake),
            ("processor_masked_attention", _MASKED_SCHEMA, _masked_kernel, _masked_fake)):
        lib.define(schema)
        for key in ("CPU", "CUDA"):
            lib.impl(name, kernel, key)
        # No autograd formula, and none is wanted on the way to the kernel: without this the
        # dispatcher runs the boxed autograd-not-implemented fallback on every call (it checks
        # each argument for requires_grad). The kernel itself refuses inputs that require grad.
        lib.impl(name, torch.library.fallthrough_kernel, "Autograd")
        register_fake(f"int8attn::{name}", fake, lib=lib)
    return lib


if not hasattr(torch.ops.int8attn, "attention"):
    _LIBRARY = _register()  # kept alive: the registration lasts as long as this object

processor_attention = torch.ops.int8attn.processor_attention
processor_masked_attention = torch.ops.int8attn.processor_masked_attention

#: ``torch.ops.int8attn.attention`` (positional: q, k, v, mode, causal, sm_scale, layout, policy,
#: timestep).
attention_op = torch.ops.int8attn.attention


def _compiling() -> bool:
    return False


_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", _compiling)


def call(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mode: int, causal: bool,
         sm_scale: Optional[float], layout: str, policy: int, timestep: int,
         k_granularity: int = 0, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Attention for torch code: the op while ``torch.compile`` traces (an opaque node in the
    graph), the direct low-overhead call in eager mode. ``policy`` is a raw handle or 0;
    ``out`` (eager calls only; the op allocates its own) the output tensor to write."""
    if _is_compiling():
        return attention_op(q, k, v, mode, causal, float(sm_scale or 0.0), layout, policy,
                            timestep if policy else -1, k_granularity)
    return _attend(q, k, v, mode, causal, sm_scale or 0.0, layout, policy, timestep,
                   k_granularity, out)
