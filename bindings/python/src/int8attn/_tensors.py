"""Turning numpy arrays, torch tensors and other array objects into ``int8attn_tensor_t``.

Nothing here imports torch at module import: torch tensors are recognised by their type's module
and read through ``data_ptr()``/``stride()``; torch is imported lazily only to allocate outputs of
a given dtype or to read the current CUDA stream (by then the caller has imported it anyway).
Objects exposing ``__cuda_array_interface__`` (CuPy, Numba) or ``__dlpack__`` are read too.
"""

from __future__ import annotations

import ctypes
from typing import Any, List, Optional, Sequence, Tuple

from . import _lib as L

_NP_DTYPES = {
    "float16": L.DTYPE_F16,
    "bfloat16": L.DTYPE_BF16,  # ml_dtypes.bfloat16, if the caller uses it
    "float32": L.DTYPE_F32,
    "int8": L.DTYPE_I8,
    "int32": L.DTYPE_I32,
    "uint8": L.DTYPE_U8,
    "bool": L.DTYPE_U8,
    "float8_e4m3fn": L.DTYPE_FP8_E4M3,
}
_TORCH_DTYPES = {
    "torch.float16": L.DTYPE_F16,
    "torch.bfloat16": L.DTYPE_BF16,
    "torch.float32": L.DTYPE_F32,
    "torch.int8": L.DTYPE_I8,
    "torch.int32": L.DTYPE_I32,
    "torch.uint8": L.DTYPE_U8,
    "torch.bool": L.DTYPE_U8,
    "torch.float8_e4m3fn": L.DTYPE_FP8_E4M3,
}
_TYPESTR = {"f2": L.DTYPE_F16, "f4": L.DTYPE_F32, "i1": L.DTYPE_I8, "i4": L.DTYPE_I32,
            "u1": L.DTYPE_U8, "b1": L.DTYPE_U8}
_ITEMSIZE = {L.DTYPE_F16: 2, L.DTYPE_BF16: 2, L.DTYPE_F32: 4, L.DTYPE_I8: 1, L.DTYPE_I32: 4,
             L.DTYPE_U8: 1, L.DTYPE_FP8_E4M3: 1}
DTYPE_NAMES = {L.DTYPE_F16: "float16", L.DTYPE_BF16: "bfloat16", L.DTYPE_F32: "float32",
               L.DTYPE_I8: "int8", L.DTYPE_I32: "int32", L.DTYPE_U8: "uint8",
               L.DTYPE_FP8_E4M3: "float8_e4m3fn"}


def _numpy():
    try:
        import numpy
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("int8attn: numpy is needed for this call (pip install numpy)") from exc
    return numpy


def is_torch(x: Any) -> bool:
    """True for torch.Tensor (and subclasses such as nn.Parameter) without importing torch."""
    mod = type(x).__module__ or ""
    return mod.split(".", 1)[0] == "torch" and hasattr(x, "data_ptr") and hasattr(x, "stride")


def is_numpy(x: Any) -> bool:
    """True for numpy.ndarray (without importing numpy)."""
    return type(x).__module__ == "numpy" and hasattr(x, "__array_interface__")


class View:
    """A descriptor plus what keeps its memory alive.

    Attributes:
        desc: The ``int8attn_tensor_t`` mirror.
        obj: The array object the descriptor points into (what outputs are allocated like).
        kind: ``"torch"``, ``"numpy"`` or ``"cuda_array"`` (other CUDA objects).
        stream: A CUDA stream the producer asked for (``__cuda_array_interface__`` v3), or None.
    """

    __slots__ = ("desc", "obj", "kind", "keep", "stream")

    def __init__(self, desc: L.Tensor, obj: Any, kind: str, keep: Sequence[Any] = (),
                 stream: Optional[int] = None) -> None:
        self.desc = desc
        self.obj = obj
        self.kind = kind
        self.keep = list(keep)
        self.stream = stream

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.desc.shape[i] for i in range(self.desc.rank))

    @property
    def is_cuda(self) -> bool:
        return self.desc.device_type == L.DEVICE_CUDA

    @property
    def device_id(self) -> int:
        return int(self.desc.device_id)

    def ptr(self) -> "ctypes._Pointer[L.Tensor]":
        return ctypes.pointer(self.desc)


def _make_desc(data: int, device_type: int, device_id: int, dtype: int,
               shape: Sequence[int], strides: Sequence[int], name: str) -> L.Tensor:
    if len(shape) > L.MAX_RANK:
        raise ValueError(f"{name}: rank {len(shape)} exceeds the maximum {L.MAX_RANK}")
    d = L.Tensor()
    d.data = data or None
    d.device_type = device_type
    d.device_id = device_id
    d.dtype = dtype
    d.rank = len(shape)
    for i, (s, st) in enumerate(zip(shape, strides)):
        d.shape[i] = int(s)
        d.strides[i] = int(st)
    return d


def _contiguous_strides(shape: Sequence[int]) -> List[int]:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(int(s), 1)
    return list(reversed(strides))


def _from_torch(x: Any, name: str) -> View:
    dtype = _TORCH_DTYPES.get(str(x.dtype))
    if dtype is None:
        raise TypeError(f"{name}: torch dtype {x.dtype} is not supported by int8attn "
                        "(use float16, bfloat16 or float32)")
    if dtype == L.DTYPE_U8 and str(x.dtype) == "torch.bool":
        x = x.view(__import__("torch").uint8)
    dev = x.device
    if dev.type == "cuda":
        device_type, device_id = L.DEVICE_CUDA, int(dev.index or 0)
    elif dev.type == "cpu":
        device_type, device_id = L.DEVICE_CPU, 0
    else:
        raise TypeError(f"{name}: tensors on device {dev} are not supported (cpu or cuda only)")
    return View(_make_desc(x.data_ptr(), device_type, device_id, dtype, tuple(x.shape),
                           tuple(x.stride()), name), x, "torch")


def _from_numpy(x: Any, name: str, allow_copy: bool) -> View:
    np = _numpy()
    dtype = _NP_DTYPES.get(x.dtype.name)
    if dtype is None:
        raise TypeError(f"{name}: numpy dtype {x.dtype} is not supported by int8attn "
                        "(use float16 or float32; bfloat16 needs torch or ml_dtypes)")
    keep = []
    item = x.dtype.itemsize
    if not allow_copy and not x.flags.writeable:  # an output: the library would write into it
        raise ValueError(f"{name}: the array is read-only (flags.writeable is False: a "
                         "read-only memmap, a view of bytes, ...); outputs must be writable")
    if any(s < 0 or s % item for s in x.strides) or not x.dtype.isnative:
        if not allow_copy:
            raise ValueError(f"{name}: output arrays need native byte order and non-negative "
                             "strides that are multiples of the element size")
        x = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("="))
        keep.append(x)
    if x.dtype == np.bool_:
        x = x.view(np.uint8)
        keep.append(x)
    strides = [s // item for s in x.strides]
    ptr = x.__array_interface__["data"][0]
    return View(_make_desc(ptr, L.DEVICE_CPU, 0, dtype, x.shape, strides, name), x, "numpy",
                keep)


def _from_cai(x: Any, name: str) -> View:
    cai = x.__cuda_array_interface__
    typestr = cai["typestr"]
    dtype = _TYPESTR.get(typestr[1:])
    if dtype is None:
        raise TypeError(f"{name}: __cuda_array_interface__ typestr {typestr!r} is not supported")
    shape = tuple(cai["shape"])
    item = _ITEMSIZE[dtype]
    if cai.get("strides") is None:
        strides = _contiguous_strides(shape)
    else:
        if any(s % item for s in cai["strides"]):
            raise ValueError(f"{name}: byte strides {cai['strides']} are not multiples of {item}")
        strides = [s // item for s in cai["strides"]]
    ptr = cai["data"][0]
    stream = cai.get("stream")
    device_id = 0
    try:  # the pointer's device; CuPy/Numba arrays carry it as .device.id
        device_id = int(getattr(getattr(x, "device", None), "id", 0) or 0)
    except (TypeError, ValueError):
        device_id = 0
    return View(_make_desc(ptr, L.DEVICE_CUDA, device_id, dtype, shape, strides, name), x,
                "cuda_array", stream=stream if isinstance(stream, int) and stream > 2 else None)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DL_DTYPES = {(2, 16): L.DTYPE_F16, (4, 16): L.DTYPE_BF16, (2, 32): L.DTYPE_F32,
              (0, 8): L.DTYPE_I8, (0, 32): L.DTYPE_I32, (1, 8): L.DTYPE_U8, (6, 8): L.DTYPE_U8}


def _from_dlpack(x: Any, name: str) -> View:
    """Read a legacy ``dltensor`` capsule; the capsule (kept alive) owns the memory."""
    capsule = x.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    addr = get(capsule, b"dltensor")
    t = _DLTensor.from_address(addr)  # DLManagedTensor starts with its DLTensor
    dtype = _DL_DTYPES.get((t.dtype.code, t.dtype.bits))
    if dtype is None or t.dtype.lanes != 1:
        raise TypeError(f"{name}: DLPack dtype code {t.dtype.code} bits {t.dtype.bits} "
                        "is not supported")
    if t.device.device_type in (1, 3):  # kDLCPU, kDLCUDAHost
        device_type, device_id = L.DEVICE_CPU, 0
    elif t.device.device_type in (2, 13):  # kDLCUDA, kDLCUDAManaged
        device_type, device_id = L.DEVICE_CUDA, int(t.device.device_id)
    else:
        raise TypeError(f"{name}: DLPack device type {t.device.device_type} is not supported")
    shape = [t.shape[i] for i in range(t.ndim)]
    strides = ([t.strides[i] for i in range(t.ndim)] if t.strides
               else _contiguous_strides(shape))
    data = (t.data or 0) + int(t.byte_offset) if t.data else 0
    kind = "cuda_array" if device_type == L.DEVICE_CUDA else "dlpack_cpu"
    return View(_make_desc(data, device_type, device_id, dtype, shape, strides, name), x, kind,
                keep=[capsule])


def as_view(x: Any, name: str, *, allow_copy: bool = True) -> View:
    """Describe ``x`` (torch tensor, numpy array, CUDA array object, DLPack object, or anything
    ``numpy.asarray`` accepts when ``allow_copy``)."""
    if x is None:
        raise ValueError(f"{name}: expected an array or tensor, got None")
    if isinstance(x, (list, tuple)):
        # numpy would make float64 of it, which no backend takes: say what to pass instead.
        raise TypeError(f"{name}: expected a numpy array or torch tensor, got a "
                        f"{type(x).__name__}; pass numpy.asarray({name}, dtype=numpy.float32) "
                        "or a torch tensor")
    if is_torch(x):
        return _from_torch(x, name)
    if is_numpy(x):
        return _from_numpy(x, name, allow_copy)
    if hasattr(x, "__cuda_array_interface__"):
        return _from_cai(x, name)
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        dev_type = x.__dlpack_device__()[0]
        if int(dev_type) in (2, 13):
            return _from_dlpack(x, name)
        np = _numpy()
        if hasattr(np, "from_dlpack"):
            arr = np.from_dlpack(x)
            v = _from_numpy(arr, name, allow_copy)
            v.keep.append(arr)
            return v
    if not allow_copy:
        raise TypeError(f"{name}: expected a numpy array or torch tensor, got {type(x).__name__}")
    np = _numpy()
    arr = np.asarray(x)
    v = _from_numpy(arr, name, allow_copy)
    v.keep.append(arr)
    return v


def to_hnd(v: View, layout: str, name: str) -> View:
    """Reinterpret a rank-4 view given in ``layout`` ("HND" = [B,H,N,D], "NHD" = [B,N,H,D]) as the
    library's logical [B, H, N, D] (NHD only swaps shape and strides of dims 1 and 2)."""
    lay = layout.upper()
    if lay not in ("HND", "NHD"):
        raise ValueError(f"layout: expected 'HND' or 'NHD', got {layout!r}")
    if lay == "NHD":
        if v.desc.rank != 4:
            raise ValueError(f"{name}: layout 'NHD' needs a rank-4 [B, N, H, D] tensor, "
                             f"got rank {v.desc.rank}")
        d = v.desc
        d.shape[1], d.shape[2] = d.shape[2], d.shape[1]
        d.strides[1], d.strides[2] = d.strides[2], d.strides[1]
    return v


def dtype_code(dtype: Any, name: str) -> int:
    """The library's code of a float dtype given as a torch or numpy dtype or its name
    ("float16", "bfloat16", "float32")."""
    text = str(dtype).replace("torch.", "")
    codes = {"float16": L.DTYPE_F16, "half": L.DTYPE_F16, "bfloat16": L.DTYPE_BF16,
             "float32": L.DTYPE_F32, "float": L.DTYPE_F32}
    if text not in codes:
        raise TypeError(f"{name}: expected float16, bfloat16 or float32, got {dtype!r}")
    return codes[text]


def _torch_dtype(code: int) -> Any:
    import torch

    return {L.DTYPE_F16: torch.float16, L.DTYPE_BF16: torch.bfloat16, L.DTYPE_F32: torch.float32,
            L.DTYPE_I8: torch.int8, L.DTYPE_I32: torch.int32, L.DTYPE_U8: torch.uint8}[code]


def empty_like(ref: View, name: str) -> Any:
    """An output with the same shape, dtype, device and (where possible) memory layout as
    ``ref``'s array (``torch.empty_like`` / ``numpy.empty_like``)."""
    if ref.kind == "torch":
        import torch

        return torch.empty_like(ref.obj)
    if ref.kind in ("numpy", "dlpack_cpu"):
        np = _numpy()
        obj = ref.obj if ref.kind == "numpy" else ref.keep[-1]
        return np.empty_like(obj)
    raise TypeError(f"{name}: cannot allocate an output for a {type(ref.obj).__name__} on the "
                    f"GPU without torch; pass out=")


def new_empty(ref: View, shape: Sequence[int], dtype: int, name: str) -> Any:
    """A new contiguous array of ``shape`` and ``dtype`` on ``ref``'s device, of ``ref``'s kind."""
    shape = tuple(int(s) for s in shape)
    if ref.kind == "torch":
        return ref.obj.new_empty(shape, dtype=_torch_dtype(dtype))
    if ref.kind in ("numpy", "dlpack_cpu"):
        np = _numpy()
        return np.empty(shape, dtype=np.dtype(DTYPE_NAMES[dtype]))
    raise TypeError(f"{name}: cannot allocate on the GPU without torch; pass it explicitly")


def small_int_array(values: Any, ref: View, dtype: int, name: str) -> View:
    """A view of ``values`` (a sequence, numpy array or tensor) as an int32/uint8 array on
    ``ref``'s device, converting the dtype (with a copy) when needed."""
    if is_torch(values):
        want = _torch_dtype(dtype)
        if str(values.dtype) == "torch.bool" and dtype == L.DTYPE_U8:
            values = values.view(want)
        elif values.dtype != want:
            values = values.to(want)
        return as_view(values, name)
    if is_numpy(values) and _NP_DTYPES.get(values.dtype.name) == dtype:
        return as_view(values, name)
    if hasattr(values, "__cuda_array_interface__"):
        return as_view(values, name)
    if ref.kind == "torch":
        import torch

        t = torch.as_tensor(values, dtype=_torch_dtype(dtype), device=ref.obj.device)
        return as_view(t, name)
    np = _numpy()
    arr = np.ascontiguousarray(np.asarray(values).astype(DTYPE_NAMES[dtype]))
    v = as_view(arr, name)
    v.keep.append(arr)
    return v


def current_stream(v: View, explicit: Any = None) -> Optional[int]:
    """The CUDA stream to run on: ``explicit`` (an int handle or an object with ``cuda_stream``),
    else torch's current stream for CUDA torch tensors, else the producer's stream, else None."""
    if explicit is not None:
        h = getattr(explicit, "cuda_stream", explicit)
        return int(h) or None
    if not v.is_cuda:
        return None
    if v.kind == "torch":
        import torch

        return int(torch.cuda.current_stream(v.obj.device).cuda_stream) or None
    return v.stream
