"""int8attn: attention with INT8-quantized Q·Kᵀ for diffusion transformers and KV-cache decode.

Python bindings (ctypes) over the C library ``libint8attn``. The library is looked up in this
order: the path in the environment variable ``INT8ATTN_LIBRARY``, then the copy installed inside
this package. Its ABI version is checked on load.

Quick start::

    import numpy as np, int8attn
    q, k, v = (np.random.randn(1, 8, 256, 64).astype(np.float32) for _ in range(3))
    o = int8attn.attention(q, k, v, mode="balanced")

torch tensors (CPU or CUDA, float16/bfloat16/float32) work the same way; torch is never imported
by ``import int8attn``. The torch integration (``Int8Attention``, ``Int8AttnProcessor``,
``replace_attention_with_int8``, ``sdpa_int8``, ``attention_op``) lives in
:mod:`int8attn.torch_integration` and is imported on first access. The custom ops
``torch.ops.int8attn.attention`` and ``torch.ops.int8attn.processor_attention`` are registered
as soon as both int8attn and torch are imported, in either order (:mod:`int8attn._torch_hook`).
``sageattn`` is SageAttention's entry point (``from int8attn import sageattn`` replaces
``from sageattention import sageattn``); ``sdpa_int8`` has the signature of
``torch.nn.functional.scaled_dot_product_attention``.

Precision: ``mode=None`` (the default of :func:`attention` and of the processors) lets a
``policy`` decide the mode per step, else runs "balanced"; an explicit mode together with a
policy wins over the policy's mode and issues :class:`ModeOverridesPolicyWarning`.
"""

from __future__ import annotations

from typing import Any

from ._lib import (
    ABI_VERSION,
    DeviceError,
    Int8AttnError,
    InternalError,
    InvalidArgumentError,
    LibraryNotFoundError,
    NotSupportedError,
    OutOfMemoryError,
    last_error,
    library_path,
    status_string,
)
from ._api import (
    Context,
    KVCache,
    Mode,
    ModeOverridesPolicyWarning,
    TimestepPolicy,
    attention,
    default_context,
    devices,
    features,
    forward_workspace_size,
    info,
    parse_mode,
    predict_block_mask,
    quantize,
    rms_norm,
    rotary,
    version,
)

from ._sage import sageattn
from ._routing import NoRoutingTableWarning, describe as routing_tables
from . import _lib as _l
from . import _torch_hook

_l.lib()  # load now: a missing library or an ABI mismatch fails at import with a clear message
_torch_hook.install()  # torch.ops.int8attn.* once torch is imported too (never imports torch)

try:
    from importlib.metadata import PackageNotFoundError as _PNF, version as _dist_version

    try:
        __version__ = _dist_version("int8attn")
    except _PNF:  # running from a source tree
        __version__ = version()
except ImportError:  # pragma: no cover - Python < 3.8
    __version__ = version()

__all__ = [
    "ABI_VERSION", "Context", "DeviceError", "Int8AttnError", "InternalError",
    "InvalidArgumentError", "KVCache", "LibraryNotFoundError", "Mode",
    "ModeOverridesPolicyWarning", "NoRoutingTableWarning", "NotSupportedError",
    "OutOfMemoryError", "TimestepPolicy", "attention", "default_context", "devices", "features",
    "forward_workspace_size", "info", "last_error", "library_path", "parse_mode",
    "predict_block_mask", "quantize", "rms_norm", "rotary", "routing_tables", "sageattn",
    "status_string", "version",
    # lazily imported from int8attn.torch_integration:
    "Int8Attention", "Int8AttnProcessor", "Int8JointAttnProcessor", "Int8SDPAProcessor",
    "attention_op", "replace_attention_with_int8", "sdpa_int8", "set_timestep",
]

_TORCH_NAMES = {"Int8Attention", "Int8AttnProcessor", "Int8JointAttnProcessor",
                "Int8SDPAProcessor", "replace_attention_with_int8", "set_timestep", "sdpa_int8",
                "attention_op"}


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))


def __getattr__(name: str) -> Any:
    """Import the torch integration only when one of its names is used."""
    if name in _TORCH_NAMES:
        from . import torch_integration

        return getattr(torch_integration, name)
    raise AttributeError(f"module 'int8attn' has no attribute {name!r}")
