"""The high-level Python API over the C library (contexts, policies, caches, attention)."""

from __future__ import annotations

import ctypes
import enum
import threading
import warnings
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _fastpath
from . import _lib as L
from . import _tensors as T

ArrayLike = Any
"""A numpy array, a torch tensor (CPU or CUDA), or another object with
``__cuda_array_interface__`` / ``__dlpack__``."""


class Mode(enum.IntEnum):
    """Precision modes (``int8attn_mode_values``)."""

    DEFAULT = L.MODE_DEFAULT
    """The policy's mode for the timestep, else BALANCED."""
    EXACT = L.MODE_EXACT
    """fp16/bf16 (fp32 on CPU) flash attention, no quantization."""
    BALANCED = L.MODE_BALANCED
    """INT8 Q·Kᵀ (K smoothed), P·V in fp16 with fp32 accumulation."""
    FAST = L.MODE_FAST
    """INT8 Q·Kᵀ, P and V in FP8 E4M3 (sm89/sm90; emulated on the CPU)."""

    def __str__(self) -> str:
        return self.name.lower()


ModeLike = Union[None, str, int, Mode]


class ModeOverridesPolicyWarning(UserWarning):
    """An explicit ``mode`` was given together with a ``policy``: the explicit mode is used for
    the call and the policy's mode for the step is not (its scale multiplier still applies), as
    in the C API (``INT8ATTN_MODE_DEFAULT`` is what lets a policy decide). Pass ``mode=None`` to
    let the policy decide; silence it with
    ``warnings.simplefilter("ignore", int8attn.ModeOverridesPolicyWarning)`` when the override
    is meant."""


def _explicit_mode(mode: ModeLike) -> bool:
    """True when ``mode`` names a mode (not None / "default" / Mode.DEFAULT / 0)."""
    if mode is None:
        return False
    if isinstance(mode, str):
        return mode.strip().lower() != "default"
    return int(mode) != int(L.MODE_DEFAULT)


def warn_mode_overrides_policy(mode: ModeLike, where: str, stacklevel: int = 3) -> None:
    """Issue :class:`ModeOverridesPolicyWarning` for ``where`` (a function name) when ``mode`` is
    explicit; the caller has checked that a policy is given."""
    if _explicit_mode(mode):
        warnings.warn(f"{where}: mode={str(parse_mode(mode))!r} overrides the policy's mode for "
                      "the step (the policy's scale multiplier still applies); pass mode=None "
                      "to let the policy decide", ModeOverridesPolicyWarning,
                      stacklevel=stacklevel)


def parse_mode(mode: ModeLike, name: str = "mode") -> Mode:
    """``None``/"default", "exact", "balanced", "fast" (any case), an int or a :class:`Mode`."""
    if mode is None:
        return Mode.DEFAULT
    if isinstance(mode, str):
        try:
            return Mode[mode.strip().upper()]
        except KeyError:
            raise ValueError(f"{name}: unknown precision mode {mode!r}; expected 'exact', "
                             "'balanced', 'fast' or None") from None
    try:
        return Mode(int(mode))
    except (TypeError, ValueError):
        raise ValueError(f"{name}: unknown precision mode {mode!r}") from None


# Default of the ``mask_block`` arguments: the library's (query rows, keys) per mask block. With a
# mask, _forward_params always passes both sizes, so the init function's defaults do not apply.
_MASK_BLOCK_DEFAULT = (L.MASK_Q_BLOCK_DEFAULT, L.MASK_K_BLOCK_DEFAULT)

_GRANULARITY = {None: L.GRANULARITY_DEFAULT, "default": L.GRANULARITY_DEFAULT,
                "block": L.GRANULARITY_PER_BLOCK, "per_block": L.GRANULARITY_PER_BLOCK,
                "token": L.GRANULARITY_PER_TOKEN, "per_token": L.GRANULARITY_PER_TOKEN}


def _granularity(g: Union[None, str, int], name: str) -> int:
    if isinstance(g, int):
        return g
    key = g.lower() if isinstance(g, str) else g
    if key not in _GRANULARITY:
        raise ValueError(f"{name}: expected 'block', 'token' or None, got {g!r}")
    return _GRANULARITY[key]


def _flags(smooth_k: bool, smooth_v: bool, balance_channels: Optional[bool]) -> int:
    # None keeps the library's default (balancing on for forward, off for a cache).
    if smooth_k and smooth_v and balance_channels is None:
        return 0
    f = L.FLAG_EXPLICIT
    if smooth_k:
        f |= L.FLAG_SMOOTH_K
    if smooth_v:
        f |= L.FLAG_SMOOTH_V
    if balance_channels:
        f |= L.FLAG_BALANCE_CHANNELS
    return f


# ---- library information ---------------------------------------------------------------------
def version() -> str:
    """The loaded library's version string, e.g. "0.1.0"."""
    return L.lib().int8attn_version_string().decode()


def features() -> List[str]:
    """Names of the feature bits of the loaded library ("cpu", "cuda", "sm80", …)."""
    bits = int(L.lib().int8attn_features())
    return [n for b, n in sorted(L.FEATURE_NAMES.items()) if bits & b]


def devices() -> List[str]:
    """Descriptions of the CUDA devices usable by this build (empty without CUDA/GPU)."""
    count = ctypes.c_int32(0)
    L.call("int8attn_device_count", ctypes.byref(count))
    out = []
    for i in range(count.value):
        buf = ctypes.create_string_buffer(256)
        L.call("int8attn_device_describe", buf, len(buf), i)
        out.append(buf.value.decode("utf-8", "replace"))
    return out


def info() -> Dict[str, Any]:
    """Version, ABI, features, devices and path of the loaded library, as a dict."""
    lib = L.lib()
    return {
        "version": version(),
        "version_number": int(lib.int8attn_version_number()),
        "abi_version": int(lib.int8attn_abi_version()),
        "features": features(),
        "devices": devices(),
        "library": L.library_path(),
    }


# ---- handles ---------------------------------------------------------------------------------
class _Handle:
    """Base of the owning wrappers: a raw pointer plus a finalizer that destroys it once."""

    _destroy_fn = ""

    def __init__(self) -> None:
        self._ptr: Optional[int] = None
        self._finalizer: Optional[weakref.finalize] = None

    def _own(self, ptr: int) -> None:
        self._ptr = ptr
        self._finalizer = weakref.finalize(self, getattr(L.lib(), self._destroy_fn),
                                           ctypes.c_void_p(ptr))

    @property
    def handle(self) -> int:
        """The raw C pointer (for passing to other bindings); raises after :meth:`close`."""
        if self._ptr is None:
            raise ValueError(f"{type(self).__name__} is closed")
        return self._ptr

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._ptr is None

    def close(self) -> None:
        """Destroy the native object now (idempotent); also happens at garbage collection."""
        if self._finalizer is not None:
            self._finalizer()
        self._finalizer = None
        self._ptr = None

    def __enter__(self):  # type: ignore[no-untyped-def]
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Context(_Handle):
    """An ``int8attn_context_t``: device binding, workspace and CPU thread pool.

    Calls that share a context must not run concurrently; the module-level functions use one
    default context per thread and device, so most code never creates one.

    Args:
        device_id: CUDA device this context serves (CPU calls ignore it).
        num_threads: CPU worker threads; 0 = all hardware threads.
        workspace_bytes: Device workspace to allocate up front (0 = on first use).
    """

    _destroy_fn = "int8attn_context_destroy"

    def __init__(self, device_id: int = 0, num_threads: int = 0, workspace_bytes: int = 0) -> None:
        super().__init__()
        p = L.ContextParams()
        L.lib().int8attn_context_params_init(ctypes.byref(p))
        p.device_id = device_id
        p.num_threads = num_threads
        p.workspace_bytes = workspace_bytes
        out = ctypes.c_void_p()
        L.call("int8attn_context_create", ctypes.byref(out), ctypes.byref(p))
        self.device_id = device_id
        self._own(out.value)

    def reserve_workspace(self, nbytes: int, device: str = "cuda") -> None:
        """Allocate at least ``nbytes`` of workspace now (e.g. before CUDA-graph capture: a
        call being captured cannot grow the workspace, and the buffer a captured call used
        stays allocated for the graph until the context is closed, see ``docs/diffusers.md``).

        Args:
            nbytes: Requested size in bytes.
            device: "cuda" (device memory) or "cpu" (host scratch).
        """
        dt = L.DEVICE_CUDA if device.startswith("cuda") else L.DEVICE_CPU
        L.call("int8attn_context_reserve_workspace", self.handle, dt, int(nbytes))

    def synchronize(self, stream: Any = None) -> None:
        """Wait for the library's work on ``stream`` (int handle, object with ``cuda_stream``,
        or None for the legacy default stream); reports earlier asynchronous failures."""
        h = getattr(stream, "cuda_stream", stream)
        L.call("int8attn_synchronize", self.handle, int(h) if h else None)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"device_id={self.device_id}"
        return f"Context({state})"


_tls = threading.local()


def default_context(device_id: int = 0) -> Context:
    """This thread's default context for ``device_id`` (created on first use)."""
    ctxs = getattr(_tls, "contexts", None)
    if ctxs is None:
        ctxs = _tls.contexts = {}
    ctx = ctxs.get(device_id)
    if ctx is None or ctx.closed:
        ctx = ctxs[device_id] = Context(device_id=device_id)
    return ctx


def _ctx_for(context: Optional[Context], v: T.View) -> Context:
    if context is not None:
        return context
    return default_context(v.device_id if v.is_cuda else 0)


def _float_array(values: Optional[Sequence[float]], name: str) -> Optional[ctypes.Array]:
    if values is None:
        return None
    if hasattr(values, "detach"):  # torch tensor
        values = values.detach().cpu().tolist()
    elif hasattr(values, "tolist"):
        values = values.tolist()
    vals = [float(x) for x in values]
    return (ctypes.c_float * max(len(vals), 1))(*vals)


class TimestepPolicy(_Handle):
    """Maps each sampler step to a precision mode and an INT8 scale multiplier.

    Build it once per sampler (``num_timesteps`` steps, or one per sigma of ``sigmas``) and pass
    it with the step index to :func:`attention`. By default the first and last step run EXACT and
    every other step FAST.

    Args:
        num_timesteps: Number of steps T (timesteps 0..T-1); omit when ``sigmas`` is given.
        sigmas: Optional noise schedule, one sigma per step (copied).
        default_mode: Mode of ordinary steps (library default: "fast").
        edge_mode: Mode of the protected first/last steps (library default: "exact").
        num_first_edge: How many first steps use ``edge_mode`` (library default 1).
        num_last_edge: How many last steps use ``edge_mode`` (library default 1).
        sigma_edge_above: With sigmas: steps with sigma ≥ this also use ``edge_mode``.
        sigma_edge_below: With sigmas: steps with sigma ≤ this also use ``edge_mode``.
        scale_multipliers: Optional per-step multipliers in (0, 1] of the INT8 scales (the seeds'
            LUT), length T.
    """

    _destroy_fn = "int8attn_policy_destroy"

    def __init__(self, num_timesteps: Optional[int] = None, *,
                 sigmas: Optional[Sequence[float]] = None, default_mode: ModeLike = None,
                 edge_mode: ModeLike = None, num_first_edge: Optional[int] = None,
                 num_last_edge: Optional[int] = None, sigma_edge_above: Optional[float] = None,
                 sigma_edge_below: Optional[float] = None,
                 scale_multipliers: Optional[Sequence[float]] = None) -> None:
        super().__init__()
        p = L.PolicyParams()
        L.lib().int8attn_policy_params_init(ctypes.byref(p))
        sig = _float_array(sigmas, "sigmas")
        mul = _float_array(scale_multipliers, "scale_multipliers")
        if num_timesteps is not None:
            p.num_timesteps = int(num_timesteps)
        if sig is not None:
            p.sigmas = ctypes.cast(sig, ctypes.POINTER(ctypes.c_float))
            p.num_sigmas = len(sigmas)  # type: ignore[arg-type]
        if default_mode is not None:
            p.default_mode = parse_mode(default_mode, "default_mode")
        if edge_mode is not None:
            p.edge_mode = parse_mode(edge_mode, "edge_mode")
        if num_first_edge is not None:
            p.num_first_edge = int(num_first_edge)
        if num_last_edge is not None:
            p.num_last_edge = int(num_last_edge)
        if sigma_edge_above is not None:
            p.sigma_edge_above = float(sigma_edge_above)
        if sigma_edge_below is not None:
            p.sigma_edge_below = float(sigma_edge_below)
        if mul is not None:
            p.scale_multipliers = ctypes.cast(mul, ctypes.POINTER(ctypes.c_float))
        out = ctypes.c_void_p()
        L.call("int8attn_policy_create", ctypes.byref(out), ctypes.byref(p))
        self._own(out.value)

    def __len__(self) -> int:
        n = ctypes.c_int32()
        L.call("int8attn_policy_num_timesteps", ctypes.byref(n), self.handle)
        return int(n.value)

    @property
    def num_timesteps(self) -> int:
        """Number of steps T."""
        return len(self)

    def decide(self, timestep: int) -> Tuple[Mode, float]:
        """(mode, scale multiplier) for step ``timestep`` in [0, T)."""
        m, s = ctypes.c_int32(), ctypes.c_float()
        L.call("int8attn_policy_get", ctypes.byref(m), ctypes.byref(s), self.handle, int(timestep))
        return Mode(m.value), float(s.value)

    def mode(self, timestep: int) -> Mode:
        """The precision mode of step ``timestep``."""
        return self.decide(timestep)[0]

    def scale_multiplier(self, timestep: int) -> float:
        """The INT8 scale multiplier of step ``timestep``."""
        return self.decide(timestep)[1]

    def set_mode(self, timestep: int, mode: ModeLike) -> None:
        """Override the mode of one step (must not race with forward calls using the policy)."""
        L.call("int8attn_policy_set_mode", self.handle, int(timestep),
               int(parse_mode(mode)))

    def modes(self) -> List[Mode]:
        """The mode of every step, in order."""
        return [self.mode(t) for t in range(len(self))]

    def __repr__(self) -> str:
        if self.closed:
            return "TimestepPolicy(closed)"
        return f"TimestepPolicy(num_timesteps={len(self)})"


PolicyLike = Union[None, TimestepPolicy, int]


def _policy_ptr(policy: PolicyLike) -> Optional[int]:
    if policy is None:
        return None
    if isinstance(policy, TimestepPolicy):
        return policy.handle
    return int(policy) or None


def _forward_params(*, mode: ModeLike, causal: bool, sm_scale: Optional[float],
                    k_lengths: Optional[T.View], block_mask: Optional[T.View],
                    mask_block: Tuple[int, int], lse: Optional[T.View], policy: PolicyLike,
                    timestep: Optional[int], q_granularity: Union[None, str, int],
                    k_granularity: Union[None, str, int], smooth_k: bool, smooth_v: bool,
                    balance_channels: Optional[bool], scale_multiplier: float,
                    stream: Optional[int]) -> L.ForwardParams:
    p = L.ForwardParams()
    L.lib().int8attn_forward_params_init(ctypes.byref(p))
    p.mode = int(parse_mode(mode))
    if sm_scale is not None:
        p.sm_scale = float(sm_scale)
    p.causal = 1 if causal else 0
    p.q_granularity = _granularity(q_granularity, "q_granularity")
    p.k_granularity = _granularity(k_granularity, "k_granularity")
    p.flags = _flags(smooth_k, smooth_v, balance_channels)
    p.scale_multiplier = float(scale_multiplier)
    if k_lengths is not None:
        p.k_lengths = k_lengths.ptr()
    if block_mask is not None:
        p.block_mask = block_mask.ptr()
        qb, kb = mask_block
        p.mask_q_block, p.mask_k_block = int(qb), int(kb)
    if lse is not None:
        p.lse = lse.ptr()
    pp = _policy_ptr(policy)
    if pp is not None:
        p.policy = pp
        p.timestep = int(timestep if timestep is not None else 0)
    elif timestep is not None:
        raise ValueError("timestep: given without a policy; pass policy=TimestepPolicy(...) "
                         "(or mode=...) to choose the precision per step")
    p.stream = stream
    return p


def _aux_views(ref: T.View, k_lengths: Any, block_mask: Any
               ) -> Tuple[Optional[T.View], Optional[T.View]]:
    kl = (T.small_int_array(k_lengths, ref, L.DTYPE_I32, "k_lengths")
          if k_lengths is not None else None)
    bm = (T.small_int_array(block_mask, ref, L.DTYPE_U8, "block_mask")
          if block_mask is not None else None)
    return kl, bm


def attention(q: ArrayLike, k: ArrayLike, v: ArrayLike, *, mode: ModeLike = None,
              causal: bool = False, sm_scale: Optional[float] = None, k_lengths: Any = None,
              block_mask: Any = None, mask_block: Tuple[int, int] = _MASK_BLOCK_DEFAULT,
              return_lse: bool = False, policy: PolicyLike = None,
              timestep: Optional[int] = None, layout: str = "HND", out: Optional[ArrayLike] = None,
              context: Optional[Context] = None, q_granularity: Union[None, str, int] = None,
              k_granularity: Union[None, str, int] = None, smooth_k: bool = True,
              smooth_v: bool = True, balance_channels: Optional[bool] = None,
              scale_multiplier: float = 1.0, stream: Any = None,
              _warn_override: bool = True) -> Any:
    """``O = softmax(sm_scale · Q·Kᵀ + mask) · V`` with INT8 Q·Kᵀ.

    Args:
        q: Queries [B, Hq, Nq, D] ("HND") or [B, Nq, Hq, D] ("NHD"): numpy (float16/float32, CPU)
            or torch (float16/bfloat16/float32; CPU or CUDA).
        k: Keys [B, Hkv, Nk, D] (or NHD); Hq must be a multiple of Hkv (GQA/MQA).
        v: Values, same shape as ``k``.
        mode: "exact", "balanced", "fast", or None (default): the policy's mode for
            ``timestep`` when ``policy`` is given, else "balanced". An explicit mode together
            with a policy wins over the policy's mode (the policy's scale multiplier still
            applies) and issues :class:`ModeOverridesPolicyWarning`.
        causal: Causal mask, bottom-right aligned (``j ≤ i + L − Nq``).
        sm_scale: Softmax scale; None = 1/sqrt(D).
        k_lengths: Optional int32 [B] valid key lengths (sequence, array or tensor).
        block_mask: Optional uint8/bool [B|1, Hq|1, ⌈Nq/qb⌉, ⌈Nk/kb⌉] block mask (nonzero = keep).
        mask_block: (query rows, keys) per mask block.
        return_lse: Also return the float32 [B, Hq, Nq] natural-log log-sum-exp.
        policy: A :class:`TimestepPolicy` deciding mode (with ``mode=None``) and scale
            multiplier per step.
        timestep: Step index for ``policy`` (an error without a policy).
        layout: "HND" or "NHD" for q, k, v and out.
        out: Optional output (same shape/layout as q, q's dtype); allocated like q if None.
        context: A :class:`Context`; None = this thread's default for the device.
        q_granularity: "token" (default) or "block" (64 tokens) scales for Q.
        k_granularity: "token" (default) or "block" (64 tokens) scales for K.
        smooth_k: Subtract K's per-channel mean before quantizing (exact; default on).
        smooth_v: Subtract V's per-channel mean before quantizing V (exact; default on).
        balance_channels: Move per-channel magnitude between Q and K (exact). None (default)
            keeps the library default: on.
        scale_multiplier: In (0, 1]; multiplies the INT8 scales (clips the largest values).
        stream: CUDA stream (int or object with ``cuda_stream``); default torch's current stream.
        _warn_override: Internal (the torch op's general path): no
            :class:`ModeOverridesPolicyWarning`.

    Returns:
        The output, allocated like ``q`` (torch tensor or numpy array), or ``(out, lse)`` when
        ``return_lse``.

    Raises:
        InvalidArgumentError: bad shapes, strides, dtypes, devices or values (the message names
            the argument).
        NotSupportedError: e.g. an unsupported head dim, CUDA tensors without a CUDA build, or
            torch inputs that require grad while grad mode is on (int8attn has no backward
            pass: run under ``torch.no_grad()``/``torch.inference_mode()`` or detach them).
    """
    if policy is not None and mode is not None and _warn_override:
        warn_mode_overrides_policy(mode, "attention")
    if (k_lengths is None and block_mask is None and not return_lse and context is None
            and stream is None and q_granularity is None and smooth_k
            and smooth_v and balance_channels is None and scale_multiplier == 1.0
            and T.is_torch(q) and (policy is not None or timestep is None)):
        o = attention_torch(q, k, v, mode=mode, causal=causal, sm_scale=sm_scale,
                            layout=layout, policy=policy, timestep=timestep, out=out,
                            k_granularity=k_granularity)
        if o is not None:
            return o
    if T.is_torch(q) and T.is_torch(k) and T.is_torch(v):
        _refuse_autograd(q, k, v)
    qv = T.to_hnd(T.as_view(q, "q"), layout, "q")
    kv = T.to_hnd(T.as_view(k, "k"), layout, "k")
    vv = T.to_hnd(T.as_view(v, "v"), layout, "v")
    if out is None:
        out = T.empty_like(qv, "out")
    ov = T.to_hnd(T.as_view(out, "out", allow_copy=False), layout, "out")
    lse_obj = lse_v = None
    if return_lse:
        if qv.desc.rank != 4:
            raise ValueError(f"q: expected rank 4, got rank {qv.desc.rank}")
        b, h, n = qv.desc.shape[0], qv.desc.shape[1], qv.desc.shape[2]
        lse_obj = T.new_empty(qv, (b, h, n), L.DTYPE_F32, "lse")
        lse_v = T.as_view(lse_obj, "lse", allow_copy=False)
    klv, bmv = _aux_views(qv, k_lengths, block_mask)
    ctx = _ctx_for(context, qv)
    params = _forward_params(
        mode=mode, causal=causal, sm_scale=sm_scale, k_lengths=klv, block_mask=bmv,
        mask_block=mask_block, lse=lse_v, policy=policy, timestep=timestep,
        q_granularity=q_granularity, k_granularity=k_granularity, smooth_k=smooth_k,
        smooth_v=smooth_v, balance_channels=balance_channels,
        scale_multiplier=scale_multiplier, stream=T.current_stream(qv, stream))
    L.call("int8attn_forward", ctx.handle, qv.ptr(), kv.ptr(), vv.ptr(), ov.ptr(),
           ctypes.byref(params), renames={"o": "out"})
    return (out, lse_obj) if return_lse else out


def _grad_needed(q: Any, k: Any, v: Any) -> bool:
    """Whether torch would record these inputs for a backward pass (int8attn has none)."""
    global _grad_enabled
    if not (q.requires_grad or k.requires_grad or v.requires_grad):
        return False
    if _grad_enabled is None:
        import torch

        _grad_enabled = torch.is_grad_enabled
    return bool(_grad_enabled())


_grad_enabled: Any = None


def _refuse_autograd(q: Any, k: Any, v: Any) -> None:
    """int8attn is a forward-only (inference) kernel: an output silently cut from the autograd
    graph would train nothing without a word, so inputs that require grad are refused while
    grad mode is on. NotSupportedError: the processors then run their SDPA fallback."""
    if _grad_needed(q, k, v):
        names = [n for n, x in (("q", q), ("k", k), ("v", v)) if x.requires_grad]
        raise L.NotSupportedError(
            L.ERROR_NOT_SUPPORTED,
            f"{', '.join(names)}: require grad, but int8attn has no backward pass (inference "
            "only); run under torch.no_grad() / torch.inference_mode(), or detach() the inputs")


_MODE_INTS = {m: int(m) for m in Mode}
_MODE_INTS.update({m.name.lower(): int(m) for m in Mode})
_MODE_INTS.update({int(m): int(m) for m in Mode})
_MODE_INTS[None] = int(Mode.DEFAULT)


def mode_int(mode: ModeLike) -> int:
    """:func:`parse_mode` as a plain int, with one dict lookup for the usual spellings (this
    runs on every call of a pipeline)."""
    m = _MODE_INTS.get(mode) if isinstance(mode, (str, int)) or mode is None else None
    return int(parse_mode(mode)) if m is None else m


def attention_torch(q: Any, k: Any, v: Any, mode: ModeLike = None, causal: bool = False,
                    sm_scale: Optional[float] = None, layout: str = "HND",
                    policy: PolicyLike = None, timestep: Optional[int] = None,
                    out: Any = None, k_granularity: Union[None, str, int] = None) -> Any:
    """:func:`attention` for rank-4 torch tensors with only these options, through the
    low-overhead call path (``_fastpath``); None when that path does not cover the call (other
    dtypes, ranks or array types), so the caller takes :func:`attention`'s general path."""
    if q.requires_grad or k.requires_grad or v.requires_grad:
        _refuse_autograd(q, k, v)
    m = mode_int(mode)
    if layout == "NHD":
        nhd = True
    elif layout == "HND":
        nhd = False
    else:
        return None
    if policy is None:
        ph = t = 0
    else:
        ph = _policy_ptr(policy) or 0
        t = int(timestep) if (ph and timestep is not None) else 0
    if out is None:
        out = _empty_like(q)
    kg = 0 if k_granularity is None else _granularity(k_granularity, "k_granularity")
    if not _fastpath.forward(q, k, v, out, m, causal, sm_scale, nhd, ph, t, kg):
        return None
    return out


def _empty_like(x: Any) -> Any:
    global _empty_like
    import torch

    _empty_like = torch.empty_like  # bound once: this runs on every call of a pipeline
    return torch.empty_like(x)


def forward_workspace_size(q: ArrayLike, k: ArrayLike, v: ArrayLike, *, layout: str = "HND",
                           context: Optional[Context] = None, **options: Any) -> int:
    """Workspace bytes :func:`attention` needs for these tensors (``options`` as for it:
    mode, causal, q_granularity, …)."""
    qv = T.to_hnd(T.as_view(q, "q"), layout, "q")
    kv = T.to_hnd(T.as_view(k, "k"), layout, "k")
    vv = T.to_hnd(T.as_view(v, "v"), layout, "v")
    params = _forward_params(
        mode=options.get("mode"), causal=options.get("causal", False),
        sm_scale=options.get("sm_scale"), k_lengths=None, block_mask=None,
        mask_block=_MASK_BLOCK_DEFAULT, lse=None, policy=options.get("policy"),
        timestep=options.get("timestep"), q_granularity=options.get("q_granularity"),
        k_granularity=options.get("k_granularity"), smooth_k=options.get("smooth_k", True),
        smooth_v=options.get("smooth_v", True),
        balance_channels=options.get("balance_channels", None),
        scale_multiplier=options.get("scale_multiplier", 1.0), stream=None)
    n = ctypes.c_uint64()
    L.call("int8attn_forward_workspace_size", ctypes.byref(n), _ctx_for(context, qv).handle,
           qv.ptr(), kv.ptr(), vv.ptr(), ctypes.byref(params))
    return int(n.value)


def quantize(x: ArrayLike, *, granularity: Union[str, int] = "block", smooth: bool = False,
             scale_multiplier: float = 1.0, layout: str = "HND",
             context: Optional[Context] = None, stream: Any = None
             ) -> Tuple[Any, Any, Optional[Any]]:
    """Quantize ``x`` [B, H, N, D] to symmetric int8 with the library's maths.

    ``q = clamp(round_half_even((x − mean)/scale), −127, 127)``,
    ``scale = multiplier·max|x − mean| / 127`` per group (64-token block or token).

    Args:
        x: Input (float16/bfloat16/float32), HND or NHD.
        granularity: "block" (64 tokens, default) or "token".
        smooth: Subtract the per-channel mean over tokens first (returned as ``mean``).
        scale_multiplier: In (0, 1].
        layout: "HND" or "NHD" (``x_int8`` has the same layout as ``x``).
        context: Optional :class:`Context`.
        stream: Optional CUDA stream.

    Returns:
        ``(x_int8, scales, mean)``: int8 like ``x``; float32 scales [B, H, G] with
        G = ⌈N/64⌉ or N; float32 means [B, H, D] when ``smooth``, else None.
    """
    xv = T.to_hnd(T.as_view(x, "x"), layout, "x")
    if xv.desc.rank != 4:
        raise ValueError(f"x: expected rank 4 [B, H, N, D], got rank {xv.desc.rank}")
    b, h, n, d = (xv.desc.shape[i] for i in range(4))
    g = _granularity(granularity, "granularity")
    groups = n if g == L.GRANULARITY_PER_TOKEN else -(-n // L.QUANT_BLOCK)
    x8 = T.new_empty(xv, tuple(xv.obj.shape), L.DTYPE_I8, "x_int8")
    x8v = T.to_hnd(T.as_view(x8, "x_int8", allow_copy=False), layout, "x_int8")
    sc = T.new_empty(xv, (b, h, groups), L.DTYPE_F32, "scales")
    scv = T.as_view(sc, "scales", allow_copy=False)
    mean = mv = None
    if smooth:
        mean = T.new_empty(xv, (b, h, d), L.DTYPE_F32, "mean")
        mv = T.as_view(mean, "mean", allow_copy=False)
    p = L.QuantizeParams()
    L.lib().int8attn_quantize_params_init(ctypes.byref(p))
    p.granularity = g
    p.smooth = 1 if smooth else 0
    p.scale_multiplier = float(scale_multiplier)
    p.stream = T.current_stream(xv, stream)
    L.call("int8attn_quantize", _ctx_for(context, xv).handle, xv.ptr(), x8v.ptr(), scv.ptr(),
           mv.ptr() if mv is not None else None, ctypes.byref(p))
    return x8, sc, mean


_ROTARY_ARITHMETIC = {"rounded": L.ROTARY_ROUNDED, "complex_fma": L.ROTARY_COMPLEX_FMA}


def rotary(x: ArrayLike, cos: ArrayLike, sin: ArrayLike, *, layout: str = "HND",
           out: Any = None, arithmetic: str = "rounded", context: Optional[Context] = None,
           stream: Any = None) -> Any:
    """Rotate the interleaved channel pairs of ``x`` by per-token angles (rotary position
    embedding, the convention of Flux and of diffusers' ``apply_rotary_emb``) in one pass:
    ``out[2i] = x[2i]·cos[n][2i] − x[2i+1]·sin[n][2i]``,
    ``out[2i+1] = x[2i+1]·cos[n][2i+1] + x[2i]·sin[n][2i+1]`` in float32, the result rounded to
    ``x``'s dtype. ``arithmetic="rounded"`` rounds each product and sum on its own (bit-identical
    to diffusers' real-table formula); ``"complex_fma"`` evaluates the complex product
    (x₀ + i·x₁)(c + i·s) as ``fma(x0, c, −x1·s)`` and ``fma(x0, s, x1·c)``, PyTorch's CUDA
    evaluation of ``torch.view_as_complex(x) * freqs_cis`` (pass ``cos``/``sin`` with both
    channels of a pair holding Re f and Im f).

    Args:
        x: [B, H, N, D] (or [B, N, H, D] with ``layout="NHD"``), float16/bfloat16/float32, D
            even.
        cos, sin: float32 [N, D] on ``x``'s device (any strides, 0 to broadcast).
        layout: "HND" or "NHD" (``out`` has the same layout).
        out: Optional output like ``x``; may be ``x`` itself (in place).
        arithmetic: "rounded" (default) or "complex_fma".
        context: Optional :class:`Context`.
        stream: Optional CUDA stream.

    Returns:
        ``out`` (a new array like ``x`` when not given).
    """
    if arithmetic not in _ROTARY_ARITHMETIC:
        raise ValueError(f"arithmetic: expected one of {sorted(_ROTARY_ARITHMETIC)}, "
                         f"got {arithmetic!r}")
    xv = T.to_hnd(T.as_view(x, "x"), layout, "x")
    if xv.desc.rank != 4:
        raise ValueError(f"x: expected rank 4 [B, H, N, D], got rank {xv.desc.rank}")
    cv = T.as_view(cos, "cos")
    sv = T.as_view(sin, "sin")
    if out is None:
        out = T.new_empty(xv, tuple(xv.obj.shape), xv.desc.dtype, "out")
    ov = T.to_hnd(T.as_view(out, "out", allow_copy=False), layout, "out")
    p = L.RotaryParams()
    L.lib().int8attn_rotary_params_init(ctypes.byref(p))
    p.arithmetic = _ROTARY_ARITHMETIC[arithmetic]
    p.stream = T.current_stream(xv, stream)
    L.call("int8attn_rotary", _ctx_for(context, xv).handle, xv.ptr(), cv.ptr(), sv.ptr(), ov.ptr(),
           ctypes.byref(p))
    return out


def _rows4(v: T.View, name: str) -> T.View:
    """``v`` (rank 1..4, rows along the last dimension) described as rank 4, size-1 dimensions
    prepended."""
    d = v.desc
    r = d.rank
    if not 1 <= r <= 4:
        raise ValueError(f"{name}: expected rank 1 to 4 (rows along the last dimension), "
                         f"got rank {r}")
    shape = [1] * (4 - r) + [d.shape[i] for i in range(r)]
    strides = [0] * (4 - r) + [d.strides[i] for i in range(r)]
    d.rank = 4
    for i in range(4):
        d.shape[i], d.strides[i] = shape[i], strides[i]
    return v


def rms_norm(x: ArrayLike, weight: Optional[ArrayLike] = None, *, eps: float = 1e-6,
             out: Any = None, out_dtype: Any = None, context: Optional[Context] = None,
             stream: Any = None) -> Any:
    """RMS-normalize the rows of ``x`` along its last dimension, optionally times a per-channel
    ``weight``, in one pass (diffusers' ``RMSNorm``: the query/key normalization of Flux, SD3.5,
    Wan, HunyuanVideo): ``r = 1 / sqrt(mean(x²) + eps)``, ``y = x·r``; a float16/bfloat16
    weight multiplies ``y`` rounded to its dtype, a float32 weight ``y`` itself. Every operation
    is float32, rounded on its own, with the squares summed in one fixed order, so both backends
    give the same bits; against diffusers' own evaluation a 16-bit result differs by at most two
    last-place units in about one element in 10⁵, a float32 one by a few float32 roundings.

    Args:
        x: Rank 1 to 4, float16/bfloat16/float32, any strides.
        weight: Optional [D] float16/bfloat16/float32 on ``x``'s device.
        eps: Added to the mean square (≥ 0).
        out: Optional output with ``x``'s shape; may be ``x`` itself (in place).
        out_dtype: The new output's dtype when ``out`` is not given (a torch or numpy dtype or
            its name). Default: diffusers' result dtype: ``x``'s without a weight, the weight's
            with a float16/bfloat16 one, float32 with a float32 one.
        context: Optional :class:`Context`.
        stream: Optional CUDA stream.

    Returns:
        ``out`` (a new contiguous array when not given).
    """
    xv = T.as_view(x, "x")
    shape = xv.shape
    _rows4(xv, "x")
    wv = T.as_view(weight, "weight") if weight is not None else None
    if out is None:
        if out_dtype is not None:
            code = T.dtype_code(out_dtype, "out_dtype")
        elif wv is None:
            code = xv.desc.dtype
        else:
            code = wv.desc.dtype
        out = T.new_empty(xv, shape, code, "out")
    ov = _rows4(T.as_view(out, "out", allow_copy=False), "out")
    p = L.RmsNormParams()
    L.lib().int8attn_rms_norm_params_init(ctypes.byref(p))
    p.eps = float(eps)
    p.stream = T.current_stream(xv, stream)
    L.call("int8attn_rms_norm", _ctx_for(context, xv).handle, xv.ptr(),
           wv.ptr() if wv is not None else None, ov.ptr(), ctypes.byref(p))
    return out


def predict_block_mask(q: ArrayLike, k: ArrayLike, *, q_block: int = L.MASK_Q_BLOCK_DEFAULT,
                       k_block: int = L.MASK_K_BLOCK_DEFAULT,
                       keep_ratio: Optional[float] = None, threshold: Optional[float] = None,
                       causal: bool = False, sm_scale: Optional[float] = None,
                       layout: str = "HND", context: Optional[Context] = None,
                       stream: Any = None) -> Any:
    """Predict a block mask from mean-pooled Q and K blocks.

    Args:
        q: Queries [B, Hq, Nq, D] (or NHD).
        k: Keys [B, Hkv, Nk, D] (or NHD).
        q_block: Query rows per block.
        k_block: Keys per block.
        keep_ratio: Keep the top ⌈keep_ratio·nkb⌉ key blocks per query block, if given.
        threshold: Else keep the smallest set of key blocks reaching this pooled softmax mass
            (library default 0.95).
        causal: Never keep blocks entirely above the causal diagonal.
        sm_scale: Softmax scale; None = 1/sqrt(D).
        layout: "HND" or "NHD".
        context: Optional :class:`Context`.
        stream: Optional CUDA stream.

    Returns:
        uint8 [B, Hq, ⌈Nq/q_block⌉, ⌈Nk/k_block⌉] (1 keep, 0 skip) like ``q``; pass it to
        :func:`attention` as ``block_mask`` with ``mask_block=(q_block, k_block)``.
    """
    qv = T.to_hnd(T.as_view(q, "q"), layout, "q")
    kv = T.to_hnd(T.as_view(k, "k"), layout, "k")
    if qv.desc.rank != 4 or kv.desc.rank != 4:
        raise ValueError("q, k: expected rank-4 tensors")
    if q_block <= 0 or k_block <= 0:
        raise ValueError(f"q_block, k_block: must be positive, got {q_block}, {k_block}")
    b, h, nq = qv.desc.shape[0], qv.desc.shape[1], qv.desc.shape[2]
    nk = kv.desc.shape[2]
    mask = T.new_empty(qv, (b, h, -(-nq // q_block), -(-nk // k_block)), L.DTYPE_U8, "mask")
    mv = T.as_view(mask, "mask", allow_copy=False)
    p = L.MaskParams()
    L.lib().int8attn_mask_params_init(ctypes.byref(p))
    p.q_block, p.k_block = int(q_block), int(k_block)
    if keep_ratio is not None:
        p.keep_ratio = float(keep_ratio)
    if threshold is not None:
        p.threshold = float(threshold)
    p.causal = 1 if causal else 0
    if sm_scale is not None:
        p.sm_scale = float(sm_scale)
    p.stream = T.current_stream(qv, stream)
    L.call("int8attn_predict_block_mask", _ctx_for(context, qv).handle, qv.ptr(), kv.ptr(),
           mv.ptr(), ctypes.byref(p))
    return mask


def _parse_device(device: Union[None, str, int]) -> Tuple[Optional[int], int]:
    if device is None:
        return None, 0
    if isinstance(device, int):
        return L.DEVICE_CUDA, device
    s = str(device).lower()
    if s == "cpu":
        return L.DEVICE_CPU, 0
    if s.startswith("cuda"):
        return L.DEVICE_CUDA, int(s.split(":", 1)[1]) if ":" in s else 0
    raise ValueError(f"device: expected 'cpu', 'cuda' or 'cuda:N', got {device!r}")


class KVCache(_Handle):
    """A persistent quantized K/V cache (``int8attn_kv_cache_t``).

    K and V are quantized once when appended (text cross-attention K/V, or an LLM KV cache that
    grows by appends); :meth:`forward` runs attention of new queries against it.

    Args:
        batch: B.
        num_kv_heads: Hkv.
        capacity: Maximum tokens per sequence.
        head_dim: D.
        device: "cpu", "cuda", "cuda:N", or None (CUDA if the build has it and a device exists,
            else CPU).
        mode: "balanced" (int8 K, fp16 V) or "fast" (int8 K, FP8 V).
        smooth_k: Smooth K by its per-channel mean (fixed by the first append).
        smooth_v: Smooth V by its per-channel mean.
        context: Optional :class:`Context` (it must outlive the cache; the cache keeps it alive).
        stream: Stream for the initial device allocation.

    Use it as a context manager (``with KVCache(...) as cache:``) or call :meth:`close`.
    """

    _destroy_fn = "int8attn_kv_cache_destroy"

    def __init__(self, batch: int, num_kv_heads: int, capacity: int, head_dim: int, *,
                 device: Union[None, str, int] = None, mode: ModeLike = "balanced",
                 smooth_k: bool = True, smooth_v: bool = True,
                 context: Optional[Context] = None, stream: Any = None) -> None:
        super().__init__()
        device_type, device_id = _parse_device(device)
        self.context = context if context is not None else default_context(device_id)
        p = L.KVCacheParams()
        L.lib().int8attn_kv_cache_params_init(ctypes.byref(p))
        if device_type is not None:
            p.device_type = device_type
        p.batch, p.num_kv_heads = int(batch), int(num_kv_heads)
        p.capacity, p.head_dim = int(capacity), int(head_dim)
        p.mode = int(parse_mode(mode))
        p.flags = _flags(smooth_k, smooth_v, False)
        h = getattr(stream, "cuda_stream", stream)
        p.stream = int(h) if h else None
        out = ctypes.c_void_p()
        L.call("int8attn_kv_cache_create", ctypes.byref(out), self.context.handle,
               ctypes.byref(p))
        self.capacity = int(capacity)
        self.device_type = int(p.device_type)
        self._own(out.value)

    def __len__(self) -> int:
        n = ctypes.c_int64()
        L.call("int8attn_kv_cache_length", ctypes.byref(n), self.handle)
        return int(n.value)

    @property
    def length(self) -> int:
        """Current number of tokens per sequence."""
        return len(self)

    def reset(self) -> None:
        """Empty the cache and forget its smoothing means."""
        L.call("int8attn_kv_cache_reset", self.handle)

    def append(self, k: ArrayLike, v: ArrayLike, *, layout: str = "HND",
               stream: Any = None) -> None:
        """Quantize K and V [B, Hkv, n, D] and append them (the cache is unchanged on error)."""
        kv = T.to_hnd(T.as_view(k, "k"), layout, "k")
        vv = T.to_hnd(T.as_view(v, "v"), layout, "v")
        L.call("int8attn_kv_cache_append", self.handle, kv.ptr(), vv.ptr(),
               T.current_stream(kv, stream))

    def forward(self, q: ArrayLike, *, mode: ModeLike = None, causal: bool = False,
                sm_scale: Optional[float] = None, k_lengths: Any = None, block_mask: Any = None,
                mask_block: Tuple[int, int] = _MASK_BLOCK_DEFAULT, return_lse: bool = False,
                policy: PolicyLike = None, timestep: Optional[int] = None, layout: str = "HND",
                out: Optional[ArrayLike] = None, context: Optional[Context] = None,
                stream: Any = None) -> Any:
        """Attention of ``q`` [B, Hq, Nq, D] against the cached tokens (decode when Nq is small).

        Arguments as for :func:`attention`; ``mode`` must be None or the cache's mode (an
        explicit mode with a ``policy`` wins over the policy's, with
        :class:`ModeOverridesPolicyWarning`).
        """
        if policy is not None and mode is not None:
            warn_mode_overrides_policy(mode, "KVCache.forward")
        qv = T.to_hnd(T.as_view(q, "q"), layout, "q")
        if out is None:
            out = T.empty_like(qv, "out")
        ov = T.to_hnd(T.as_view(out, "out", allow_copy=False), layout, "out")
        lse_obj = lse_v = None
        if return_lse:
            b, h, n = qv.desc.shape[0], qv.desc.shape[1], qv.desc.shape[2]
            lse_obj = T.new_empty(qv, (b, h, n), L.DTYPE_F32, "lse")
            lse_v = T.as_view(lse_obj, "lse", allow_copy=False)
        klv, bmv = _aux_views(qv, k_lengths, block_mask)
        params = _forward_params(
            mode=mode, causal=causal, sm_scale=sm_scale, k_lengths=klv, block_mask=bmv,
            mask_block=mask_block, lse=lse_v, policy=policy, timestep=timestep,
            q_granularity=None, k_granularity=None, smooth_k=True, smooth_v=True,
            balance_channels=None, scale_multiplier=1.0, stream=T.current_stream(qv, stream))
        ctx = context if context is not None else self.context
        L.call("int8attn_kv_cache_forward", ctx.handle, qv.ptr(), self.handle, ov.ptr(),
               ctypes.byref(params), renames={"o": "out"})
        return (out, lse_obj) if return_lse else out

    def __repr__(self) -> str:
        if self.closed:
            return "KVCache(closed)"
        return f"KVCache(length={len(self)}, capacity={self.capacity})"
