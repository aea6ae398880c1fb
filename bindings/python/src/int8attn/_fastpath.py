"""The per-call hot path for torch tensors: what a diffusion step pays hundreds of times.

:func:`int8attn.attention` accepts numpy arrays, CUDA array objects and many options; a pipeline
calls it with four-dimensional torch tensors and three or four options, hundreds of times per
denoising step, so every microsecond of Python shows in the step time. This path keeps, per
thread, the four tensor descriptors and the parameter struct with their ``byref`` references,
fills each descriptor with one ``struct.pack_into``, reads the current CUDA stream through
torch's raw getter, and makes one ctypes call through a prototype-free function pointer (no
per-argument conversion). It covers rank-4 fp16/bf16/fp32 torch tensors on the CPU or one CUDA
device; anything else returns ``None`` and the caller takes the general path, which gives the
same results and the same errors.

Nothing here imports torch at module import; the first call does (the caller already has).
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any, Dict, Optional

from . import _lib as L

# int8attn_tensor_t: data, device_type, device_id, dtype, rank, shape[6], strides[6]; four of
# the six shape/stride slots are written (the rest stay zero), so one pack per descriptor.
_DESC = struct.Struct("<Qiiii4q16x4q")
assert _DESC.size == 104 and ctypes.sizeof(L.Tensor) == 120

# A rank-2 descriptor (int8attn_rotary's tables): shape[0..1], then strides[0..1].
_DESC2 = struct.Struct("<Qiiii2q32x2q")
# A rank-1 descriptor (int8attn_rms_norm's weight).
_DESC1 = struct.Struct("<Qiiii1q40x1q")

_dtypes: Dict[Any, int] = {}
_raw_stream: Any = None
_torch_tensor: Any = None
_forward_fn: Any = None
_rotary_fn: Any = None
_rms_norm_fn: Any = None


def _init_torch() -> None:
    """Bind the torch names this path uses (once, on the first call)."""
    global _raw_stream, _torch_tensor, _forward_fn, _rotary_fn, _rms_norm_fn
    import torch

    _dtypes.update({torch.float16: L.DTYPE_F16, torch.bfloat16: L.DTYPE_BF16,
                    torch.float32: L.DTYPE_F32})
    getter = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if getter is None:  # pragma: no cover - older torch: the public (slower) accessor
        def getter(device: int) -> int:
            return int(torch.cuda.current_stream(device).cuda_stream)
    _raw_stream = getter
    # The same symbol without argtypes: byref objects and c_void_p values pass unconverted.
    def raw(name: str) -> Any:
        fn = L.lib()[name]
        return ctypes.CFUNCTYPE(ctypes.c_int32)(ctypes.cast(fn, ctypes.c_void_p).value)

    _forward_fn = raw("int8attn_forward")
    _rotary_fn = raw("int8attn_rotary")
    _rms_norm_fn = raw("int8attn_rms_norm")
    _torch_tensor = torch.Tensor


class _Slots(threading.local):
    """One thread's reusable call structures (a context serves one thread at a time)."""

    def __init__(self) -> None:
        self.descs = [L.Tensor() for _ in range(4)]
        self.refs = [ctypes.byref(d) for d in self.descs]
        self.params = L.ForwardParams()
        L.lib().int8attn_forward_params_init(ctypes.byref(self.params))
        self.params_ref = ctypes.byref(self.params)
        self.contexts: Dict[int, Any] = {}  # device id -> (Context, c_void_p handle)
        self.rotary_params = L.RotaryParams()
        L.lib().int8attn_rotary_params_init(ctypes.byref(self.rotary_params))
        self.rotary_params_ref = ctypes.byref(self.rotary_params)
        self.rms_norm_params = L.RmsNormParams()
        L.lib().int8attn_rms_norm_params_init(ctypes.byref(self.rms_norm_params))
        self.rms_norm_params_ref = ctypes.byref(self.rms_norm_params)


_slots = _Slots()


def _context_handle(device_id: int) -> ctypes.c_void_p:
    entry = _slots.contexts.get(device_id)
    if entry is None or entry[0]._ptr is None:  # first use, or the default context was closed
        from ._api import default_context

        ctx = default_context(device_id)
        entry = _slots.contexts[device_id] = (ctx, ctypes.c_void_p(ctx.handle))
    return entry[1]


def _pack(desc: L.Tensor, x: Any, dev: int, nhd: bool, _dtypes: Dict[Any, int] = _dtypes,
          _pack_into: Any = _DESC.pack_into) -> bool:
    """Fill ``desc`` from tensor ``x``; False if this path does not cover ``x``."""
    sh = x.shape
    dtype = _dtypes.get(x.dtype)
    if len(sh) != 4 or dtype is None:
        return False
    st = x.stride()
    kind = L.DEVICE_CUDA if dev >= 0 else L.DEVICE_CPU
    if nhd:  # [B, N, H, D] read as the library's [B, H, N, D]: swap dims 1 and 2
        _pack_into(desc, 0, x.data_ptr(), kind, dev if dev > 0 else 0, dtype, 4,
                   sh[0], sh[2], sh[1], sh[3], st[0], st[2], st[1], st[3])
    else:
        _pack_into(desc, 0, x.data_ptr(), kind, dev if dev > 0 else 0, dtype, 4,
                   sh[0], sh[1], sh[2], sh[3], st[0], st[1], st[2], st[3])
    return True


def forward(q: Any, k: Any, v: Any, out: Any, mode: int, causal: bool,
            sm_scale: Optional[float], nhd: bool, policy: int, timestep: int,
            k_granularity: int = 0) -> bool:
    """Run ``int8attn_forward`` on torch tensors into ``out``; False if this path does not
    cover the call (then nothing ran and the general path must be taken).

    Raises the library's error (message renamed to the Python argument names) on failure."""
    if _forward_fn is None:
        _init_torch()
    tt = _torch_tensor
    if not (type(q) is tt and type(k) is tt and type(v) is tt and type(out) is tt):
        return False
    s = _slots
    d = s.descs
    dev = q.get_device()
    if not (_pack(d[0], q, dev, nhd) and _pack(d[1], k, k.get_device(), nhd)
            and _pack(d[2], v, v.get_device(), nhd)
            and _pack(d[3], out, out.get_device(), nhd)):
        return False
    p = s.params
    p.mode = mode
    p.sm_scale = sm_scale if sm_scale else 0.0
    p.causal = 1 if causal else 0
    p.policy = policy or None
    p.timestep = timestep if policy else 0
    p.k_granularity = k_granularity
    p.stream = (_raw_stream(dev) or None) if dev >= 0 else None
    r = s.refs
    status = _forward_fn(_context_handle(dev if dev >= 0 else 0), r[0], r[1], r[2], r[3],
                         s.params_ref)
    if status != L.OK:
        L.check(status, "int8attn_forward", _RENAMES)
    return True


_RENAMES = {"o": "out"}  # the C API's argument names -> the Python ones, in error messages


def _pack_table(desc: L.Tensor, t: Any, dev: int, _pack_into: Any = _DESC2.pack_into) -> bool:
    """Fill ``desc`` from a float32 rank-2 tensor ``t`` on device ``dev``; False otherwise."""
    if len(t.shape) != 2 or _dtypes.get(t.dtype) != L.DTYPE_F32 or t.get_device() != dev:
        return False
    sh, st = t.shape, t.stride()
    _pack_into(desc, 0, t.data_ptr(), L.DEVICE_CUDA if dev >= 0 else L.DEVICE_CPU,
               dev if dev > 0 else 0, L.DTYPE_F32, 2, sh[0], sh[1], st[0], st[1])
    return True


def rotary(x: Any, cos: Any, sin: Any, out: Any, nhd: bool, arithmetic: int = 0) -> bool:
    """Run ``int8attn_rotary`` on torch tensors into ``out`` (``arithmetic``: an
    ``INT8ATTN_ROTARY_*`` value); False if this path does not cover the call (then nothing ran
    and the general path must be taken)."""
    if _rotary_fn is None:
        _init_torch()
    tt = _torch_tensor
    if not (type(x) is tt and type(cos) is tt and type(sin) is tt and type(out) is tt):
        return False
    s = _slots
    d = s.descs
    dev = x.get_device()
    if not (_pack(d[0], x, dev, nhd) and _pack_table(d[1], cos, dev)
            and _pack_table(d[2], sin, dev) and _pack(d[3], out, out.get_device(), nhd)):
        return False
    p = s.rotary_params
    p.arithmetic = arithmetic
    p.stream = (_raw_stream(dev) or None) if dev >= 0 else None
    r = s.refs
    status = _rotary_fn(_context_handle(dev if dev >= 0 else 0), r[0], r[1], r[2], r[3],
                        s.rotary_params_ref)
    if status != L.OK:
        L.check(status, "int8attn_rotary")
    return True


def _pack_rows(desc: L.Tensor, x: Any, dev: int, _pack_into: Any = _DESC.pack_into) -> bool:
    """Fill ``desc`` from a rank 1..4 tensor ``x`` (rows along its last dimension) as rank 4,
    size-1 dimensions prepended; False if this path does not cover ``x``."""
    sh = x.shape
    dtype = _dtypes.get(x.dtype)
    if dtype is None or not 1 <= len(sh) <= 4:
        return False
    pad = 4 - len(sh)
    _pack_into(desc, 0, x.data_ptr(), L.DEVICE_CUDA if dev >= 0 else L.DEVICE_CPU,
               dev if dev > 0 else 0, dtype, 4, *((1,) * pad + tuple(sh)),
               *((0,) * pad + tuple(x.stride())))
    return True


def rms_norm(x: Any, weight: Any, out: Any, eps: float) -> bool:
    """Run ``int8attn_rms_norm`` on torch tensors (``weight`` may be None) into ``out``; False if
    this path does not cover the call (then nothing ran and the general path must be taken)."""
    if _rms_norm_fn is None:
        _init_torch()
    tt = _torch_tensor
    if not (type(x) is tt and type(out) is tt and (weight is None or isinstance(weight, tt))):
        return False
    s = _slots
    d = s.descs
    dev = x.get_device()
    if not (_pack_rows(d[0], x, dev) and _pack_rows(d[3], out, out.get_device())):
        return False
    w_ref = None
    if weight is not None:
        dtype = _dtypes.get(weight.dtype)
        if dtype is None or weight.dim() != 1 or weight.get_device() != dev:
            return False
        _DESC1.pack_into(d[1], 0, weight.data_ptr(), L.DEVICE_CUDA if dev >= 0 else L.DEVICE_CPU,
                         dev if dev > 0 else 0, dtype, 1, weight.shape[0], weight.stride(0))
        w_ref = s.refs[1]
    p = s.rms_norm_params
    p.eps = eps
    p.stream = (_raw_stream(dev) or None) if dev >= 0 else None
    status = _rms_norm_fn(_context_handle(dev if dev >= 0 else 0), s.refs[0], w_ref, s.refs[3],
                          s.rms_norm_params_ref)
    if status != L.OK:
        L.check(status, "int8attn_rms_norm")
    return True
