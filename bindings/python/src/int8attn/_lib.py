"""Low-level ctypes layer: loading ``libint8attn``, struct mirrors, prototypes, status → exception.

Everything here mirrors ``include/int8attn.h`` one to one (same names without the ``int8attn_``
prefix, same field order and types). Users normally do not touch this module; the high-level API
lives in :mod:`int8attn._api`.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from pathlib import Path
from typing import Any, Dict, Optional, Type

#: Environment variable naming the shared library to load instead of the packaged copy.
LIBRARY_ENV = "INT8ATTN_LIBRARY"

# ---- macros of the header (ctypes cannot read #defines, so they are copied here once, and
# tests/test_header_constants.py checks every one against include/int8attn.h) ------------------
#: The ABI major version these bindings were written for (``INT8ATTN_ABI_VERSION``).
ABI_VERSION = 1
#: ``INT8ATTN_MAX_RANK``: largest rank of a tensor descriptor.
MAX_RANK = 6
#: ``INT8ATTN_QUANT_BLOCK``: tokens per scale with ``GRANULARITY_PER_BLOCK`` (a head of N tokens
#: has ⌈N / QUANT_BLOCK⌉ scales).
QUANT_BLOCK = 64
#: ``INT8ATTN_MASK_Q_BLOCK_DEFAULT``: default query rows per block-mask block.
MASK_Q_BLOCK_DEFAULT = 128
#: ``INT8ATTN_MASK_K_BLOCK_DEFAULT``: default keys per block-mask block.
MASK_K_BLOCK_DEFAULT = 64
#: ``INT8ATTN_MAX_HEAD_DIM``: head dims are multiples of 8 in [8, MAX_HEAD_DIM].
MAX_HEAD_DIM = 256

# ---- enums (values from the header; the same test checks them) ------------------------------
OK = 0
ERROR_INVALID_ARGUMENT = 100
ERROR_NULL_POINTER = 101
ERROR_BAD_SHAPE = 102
ERROR_BAD_STRIDE = 103
ERROR_BAD_DTYPE = 104
ERROR_MISALIGNED = 105
ERROR_BAD_STRUCT_SIZE = 106
ERROR_ALIASING = 107
ERROR_BAD_DEVICE = 108
ERROR_SIZE_OVERFLOW = 109
ERROR_CAPACITY_EXCEEDED = 110
ERROR_WORKSPACE_TOO_SMALL = 111
ERROR_BAD_VALUE = 112
ERROR_INVALID_HANDLE = 113
ERROR_NOT_SUPPORTED = 200
ERROR_UNSUPPORTED_ARCH = 201
ERROR_UNSUPPORTED_HEAD_DIM = 202
ERROR_UNSUPPORTED_MODE = 203
ERROR_BACKEND_UNAVAILABLE = 204
ERROR_DEVICE = 300
ERROR_OUT_OF_MEMORY = 301
ERROR_INTERNAL = 900

FEATURE_CPU = 1 << 0
FEATURE_CUDA = 1 << 1
FEATURE_SM80 = 1 << 2
FEATURE_SM89 = 1 << 3
FEATURE_SM90A = 1 << 4
FEATURE_CPU_SIMD = 1 << 5
FEATURE_NAMES = {
    FEATURE_CPU: "cpu",
    FEATURE_CUDA: "cuda",
    FEATURE_SM80: "sm80",
    FEATURE_SM89: "sm89",
    FEATURE_SM90A: "sm90a",
    FEATURE_CPU_SIMD: "cpu_simd",
}

DTYPE_F16 = 1
DTYPE_BF16 = 2
DTYPE_F32 = 3
DTYPE_I8 = 4
DTYPE_I32 = 5
DTYPE_U8 = 6
DTYPE_FP8_E4M3 = 7

DEVICE_CPU = 1
DEVICE_CUDA = 2

MODE_DEFAULT = 0
MODE_EXACT = 1
MODE_BALANCED = 2
MODE_FAST = 3

GRANULARITY_DEFAULT = 0
GRANULARITY_PER_BLOCK = 1
GRANULARITY_PER_TOKEN = 2

FLAG_SMOOTH_K = 1 << 0
FLAG_SMOOTH_V = 1 << 1
FLAG_BALANCE_CHANNELS = 1 << 2
FLAG_EXPLICIT = 1 << 30

ROTARY_ROUNDED = 0
ROTARY_COMPLEX_FMA = 1


# ---- exceptions -----------------------------------------------------------------------------
class Int8AttnError(RuntimeError):
    """A call into libint8attn failed.

    Attributes:
        status: The library's ``int8attn_status_t`` value.
        message: The thread-local message from ``int8attn_last_error()`` (names the argument and
            the offending value), or the status string when the library gave none.
    """

    def __init__(self, status: int, message: str, function: str = "") -> None:
        self.status = int(status)
        self.message = message
        self.function = function
        where = f"{function}: " if function else ""
        super().__init__(f"{where}{message} (status {self.status}: {status_string(self.status)})")


class InvalidArgumentError(Int8AttnError, ValueError):
    """Status 1xx: an argument is invalid (null pointer, shape, stride, dtype, alignment, …)."""


class NotSupportedError(Int8AttnError):
    """Status 2xx: a valid request this build or device does not support (arch, head dim, mode,
    backend)."""


class DeviceError(Int8AttnError):
    """Status 300: a CUDA runtime or driver call failed."""


class OutOfMemoryError(Int8AttnError, MemoryError):
    """Status 301: a host or device allocation failed."""


class InternalError(Int8AttnError):
    """Status 9xx: a bug in int8attn; please report it."""


class LibraryNotFoundError(ImportError):
    """libint8attn could not be found or loaded, or has the wrong ABI version."""


def error_class(status: int) -> Type[Int8AttnError]:
    """The exception class for a status value."""
    if 100 <= status < 200:
        return InvalidArgumentError
    if 200 <= status < 300:
        return NotSupportedError
    if status == ERROR_OUT_OF_MEMORY:
        return OutOfMemoryError
    if 300 <= status < 400:
        return DeviceError
    if status >= 900:
        return InternalError
    return Int8AttnError


# ---- struct mirrors (field by field, same order and types as the header) ---------------------
class Tensor(ctypes.Structure):
    """Mirror of ``int8attn_tensor_t``."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_RANK),
        ("strides", ctypes.c_int64 * MAX_RANK),
    ]


class ContextParams(ctypes.Structure):
    """Mirror of ``int8attn_context_params_t``."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("device_id", ctypes.c_int32),
        ("num_threads", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
        ("workspace_bytes", ctypes.c_uint64),
    ]


class PolicyParams(ctypes.Structure):
    """Mirror of ``int8attn_policy_params_t``."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("num_timesteps", ctypes.c_int32),
        ("sigmas", ctypes.POINTER(ctypes.c_float)),
        ("num_sigmas", ctypes.c_int32),
        ("default_mode", ctypes.c_int32),
        ("edge_mode", ctypes.c_int32),
        ("num_first_edge", ctypes.c_int32),
        ("num_last_edge", ctypes.c_int32),
        ("sigma_edge_above", ctypes.c_float),
        ("sigma_edge_below", ctypes.c_float),
        ("scale_multipliers", ctypes.POINTER(ctypes.c_float)),
    ]


class ForwardParams(ctypes.Structure):
    """Mirror of ``int8attn_forward_params_t``."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("mode", ctypes.c_int32),
        ("sm_scale", ctypes.c_float),
        ("causal", ctypes.c_int32),
        ("q_granularity", ctypes.c_int32),
        ("k_granularity", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
        ("scale_multiplier", ctypes.c_float),
        ("k_lengths", ctypes.POINTER(Tensor)),
        ("block_mask", ctypes.POINTER(Tensor)),
        ("mask_q_block", ctypes.c_int32),
        ("mask_k_block", ctypes.c_int32),
        ("lse", ctypes.POINTER(Tensor)),
        ("policy", ctypes.c_void_p),
        ("timestep", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_uint64),
        ("stream", ctypes.c_void_p),
    ]


class QuantizeParams(ctypes.Structure):
    """Mirror of ``int8attn_quantize_params_t``."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("granularity", ctypes.c_int32),
        ("smooth", ctypes.c_int32),
        ("scale_multiplier", ctypes.c_float),
        ("stream", ctypes.c_void_p),
    ]


class RotaryParams(ctypes.Structure):
    """Mirror of ``int8attn_rotary_params_t``."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("arithmetic", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
    ]


class RmsNormParams(ctypes.Structure):
    """Mirror of ``int8attn_rms_norm_params_t``."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("eps", ctypes.c_float),
        ("stream", ctypes.c_void_p),
    ]


class KVCacheParams(ctypes.Structure):
    """Mirror of ``int8attn_kv_cache_params_t``."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("device_type", ctypes.c_int32),
        ("batch", ctypes.c_int64),
        ("num_kv_heads", ctypes.c_int64),
        ("capacity", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("mode", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
        ("stream", ctypes.c_void_p),
    ]


class MaskParams(ctypes.Structure):
    """Mirror of ``int8attn_mask_params_t``."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("q_block", ctypes.c_int32),
        ("k_block", ctypes.c_int32),
        ("keep_ratio", ctypes.c_float),
        ("threshold", ctypes.c_float),
        ("causal", ctypes.c_int32),
        ("sm_scale", ctypes.c_float),
        ("stream", ctypes.c_void_p),
    ]


#: Every public struct of the header and its mirror (used by the ABI tests).
STRUCTS: Dict[str, Type[ctypes.Structure]] = {
    "int8attn_tensor_t": Tensor,
    "int8attn_context_params_t": ContextParams,
    "int8attn_policy_params_t": PolicyParams,
    "int8attn_forward_params_t": ForwardParams,
    "int8attn_quantize_params_t": QuantizeParams,
    "int8attn_kv_cache_params_t": KVCacheParams,
    "int8attn_mask_params_t": MaskParams,
}

_status = ctypes.c_int32
_vp = ctypes.c_void_p
_pT = ctypes.POINTER(Tensor)

# name: (restype, argtypes)
_PROTOTYPES: Dict[str, Any] = {
    "int8attn_status_string": (ctypes.c_char_p, [_status]),
    "int8attn_last_error": (ctypes.c_char_p, []),
    "int8attn_version_number": (ctypes.c_uint32, []),
    "int8attn_version_string": (ctypes.c_char_p, []),
    "int8attn_abi_version": (ctypes.c_uint32, []),
    "int8attn_features": (ctypes.c_uint64, []),
    "int8attn_device_count": (_status, [ctypes.POINTER(ctypes.c_int32)]),
    "int8attn_device_describe": (_status, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32]),
    "int8attn_tensor_init_contiguous": (
        _status,
        [_pT, _vp, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32,
         ctypes.POINTER(ctypes.c_int64)],
    ),
    "int8attn_context_params_init": (None, [ctypes.POINTER(ContextParams)]),
    "int8attn_context_create": (_status, [ctypes.POINTER(_vp), ctypes.POINTER(ContextParams)]),
    "int8attn_context_destroy": (None, [_vp]),
    "int8attn_context_reserve_workspace": (_status, [_vp, ctypes.c_int32, ctypes.c_uint64]),
    "int8attn_synchronize": (_status, [_vp, _vp]),
    "int8attn_policy_params_init": (None, [ctypes.POINTER(PolicyParams)]),
    "int8attn_policy_create": (_status, [ctypes.POINTER(_vp), ctypes.POINTER(PolicyParams)]),
    "int8attn_policy_destroy": (None, [_vp]),
    "int8attn_policy_set_mode": (_status, [_vp, ctypes.c_int32, ctypes.c_int32]),
    "int8attn_policy_get": (
        _status,
        [ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_float), _vp, ctypes.c_int32],
    ),
    "int8attn_policy_num_timesteps": (_status, [ctypes.POINTER(ctypes.c_int32), _vp]),
    "int8attn_forward_params_init": (None, [ctypes.POINTER(ForwardParams)]),
    "int8attn_forward": (_status, [_vp, _pT, _pT, _pT, _pT, ctypes.POINTER(ForwardParams)]),
    "int8attn_forward_workspace_size": (
        _status,
        [ctypes.POINTER(ctypes.c_uint64), _vp, _pT, _pT, _pT, ctypes.POINTER(ForwardParams)],
    ),
    "int8attn_quantize_params_init": (None, [ctypes.POINTER(QuantizeParams)]),
    "int8attn_quantize": (_status, [_vp, _pT, _pT, _pT, _pT, ctypes.POINTER(QuantizeParams)]),
    "int8attn_kv_cache_params_init": (None, [ctypes.POINTER(KVCacheParams)]),
    "int8attn_kv_cache_create": (
        _status, [ctypes.POINTER(_vp), _vp, ctypes.POINTER(KVCacheParams)]
    ),
    "int8attn_kv_cache_destroy": (None, [_vp]),
    "int8attn_kv_cache_reset": (_status, [_vp]),
    "int8attn_kv_cache_length": (_status, [ctypes.POINTER(ctypes.c_int64), _vp]),
    "int8attn_kv_cache_append": (_status, [_vp, _pT, _pT, _vp]),
    "int8attn_kv_cache_forward": (_status, [_vp, _pT, _vp, _pT, ctypes.POINTER(ForwardParams)]),
    "int8attn_rotary_params_init": (None, [ctypes.POINTER(RotaryParams)]),
    "int8attn_rotary": (_status, [_vp, _pT, _pT, _pT, _pT, ctypes.POINTER(RotaryParams)]),
    "int8attn_rms_norm_params_init": (None, [ctypes.POINTER(RmsNormParams)]),
    "int8attn_rms_norm": (_status, [_vp, _pT, _pT, _pT, ctypes.POINTER(RmsNormParams)]),
    "int8attn_mask_params_init": (None, [ctypes.POINTER(MaskParams)]),
    "int8attn_predict_block_mask": (_status, [_vp, _pT, _pT, _pT, ctypes.POINTER(MaskParams)]),
}

_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None
_lock = threading.Lock()


def _library_names() -> list:
    if sys.platform == "win32":
        return ["int8attn.dll"]
    if sys.platform == "darwin":
        return ["libint8attn.dylib"]
    return ["libint8attn.so", "libint8attn.so.1"]


def _candidates() -> list:
    env = os.environ.get(LIBRARY_ENV)
    if env:
        p = Path(env)
        if p.is_dir():
            return [p / n for n in _library_names()]
        return [p]
    here = Path(__file__).resolve().parent
    return [here / n for n in _library_names()]


def _load() -> ctypes.CDLL:
    """Load the library once (env ``INT8ATTN_LIBRARY`` first, then the packaged copy)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        candidates = _candidates()
        tried = []
        lib = None
        for path in candidates:
            if not path.exists():
                tried.append(f"{path} (not found)")
                continue
            try:
                lib = ctypes.CDLL(str(path))
            except OSError as exc:  # wrong architecture, missing dependency, …
                tried.append(f"{path} ({exc})")
                continue
            _lib_path = str(path)
            break
        if lib is None:
            hint = (
                f"set {LIBRARY_ENV} to the path of libint8attn.so (e.g. build/lib/libint8attn.so)"
                if not os.environ.get(LIBRARY_ENV)
                else f"check {LIBRARY_ENV}={os.environ[LIBRARY_ENV]!r}"
            )
            raise LibraryNotFoundError(
                "int8attn: could not load the native library; tried: "
                + "; ".join(tried)
                + f". Reinstall the package (pip install ./bindings/python) or {hint}."
            )
        try:
            abi_fn = lib.int8attn_abi_version
        except AttributeError as exc:
            raise LibraryNotFoundError(
                f"int8attn: {_lib_path} does not export int8attn_abi_version; not an int8attn "
                "library"
            ) from exc
        abi_fn.restype = ctypes.c_uint32
        abi_fn.argtypes = []
        abi = int(abi_fn())
        if abi != ABI_VERSION:
            raise LibraryNotFoundError(
                f"int8attn: {_lib_path} has ABI version {abi}, but these bindings need ABI "
                f"version {ABI_VERSION}; install matching versions of the library and the "
                "Python package"
            )
        missing = []
        for name, (restype, argtypes) in _PROTOTYPES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                missing.append(name)
                continue
            fn.restype = restype
            fn.argtypes = argtypes
        if missing:
            raise LibraryNotFoundError(
                f"int8attn: {_lib_path} lacks symbols {', '.join(missing)}"
            )
        _lib = lib
        return lib


def lib() -> ctypes.CDLL:
    """The loaded library (loads it on first use)."""
    return _lib if _lib is not None else _load()


def library_path() -> str:
    """Path of the loaded shared library."""
    lib()
    assert _lib_path is not None
    return _lib_path


def status_string(status: int) -> str:
    """``int8attn_status_string(status)``; works before/without the library for robustness."""
    try:
        s = lib().int8attn_status_string(int(status))
        return s.decode("utf-8", "replace") if s else "unknown status"
    except LibraryNotFoundError:
        return "unknown status"


def last_error() -> str:
    """``int8attn_last_error()`` of this thread."""
    s = lib().int8attn_last_error()
    return s.decode("utf-8", "replace") if s else ""


def check(status: int, function: str = "", renames: Optional[dict] = None) -> None:
    """Raise the exception matching ``status`` (with the library's last error) unless it is OK.

    ``renames`` maps the C API's argument names to the Python ones (``{"o": "out"}``): the
    library's message names the argument it rejects, and a Python caller should read the name
    they passed."""
    if status == OK:
        return
    message = last_error() or status_string(status)
    for c_name, py_name in (renames or {}).items():
        if message.startswith(c_name + ":") or message.startswith(c_name + " "):
            message = py_name + message[len(c_name):]
            break
    raise error_class(status)(status, message, function)


def call(name: str, *args: Any, renames: Optional[dict] = None) -> None:
    """Call a status-returning function and raise on failure (see :func:`check`)."""
    check(getattr(lib(), name)(*args), name, renames)
