"""PyTorch integration: a custom op, the ``Int8Attention`` module and diffusers processors.

Importing this module imports torch (``import int8attn`` alone does not; the names below are
reachable as ``int8attn.Int8Attention`` etc. and import this module on first use).

- ``torch.ops.int8attn.attention`` — a ``torch.library`` custom op with a fake (meta)
  implementation, so ``torch.compile(fullgraph=True)`` traces through it without graph breaks.
- :class:`Int8Attention` — the seeds' module: ``Int8Attention(num_heads, head_dim,
  num_timesteps=1000, use_adaptive_scaling=True, timestep_scales=None)``, ``forward(Q, K, V,
  timestep)``.
- :class:`Int8AttnProcessor` — a diffusers attention processor with the call signature of
  ``AttnProcessor2_0``; :class:`Int8SDPAProcessor` wraps any other processor (Flux, SD3, video
  DiTs) and routes its ``F.scaled_dot_product_attention`` calls to int8attn.
- :func:`replace_attention_with_int8` — swaps the processors of a pipeline or module;
  :func:`set_timestep` — tells them the current sampler step.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Union

import torch
import torch.nn.functional as F

from . import _api
from ._api import Mode, ModeLike, TimestepPolicy, parse_mode
from ._lib import NotSupportedError

__all__ = [
    "attention_op", "Int8Attention", "Int8AttnProcessor", "Int8SDPAProcessor",
    "replace_attention_with_int8", "set_timestep", "sdpa_int8",
]

# ---- the custom op --------------------------------------------------------------------------
_HAS_CUSTOM_OP = hasattr(torch, "library") and hasattr(torch.library, "custom_op")

if _HAS_CUSTOM_OP:

    @torch.library.custom_op("int8attn::attention", mutates_args=())
    def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mode: int = 2,
                     causal: bool = False, sm_scale: float = 0.0, layout: str = "HND",
                     policy: int = 0, timestep: int = -1) -> torch.Tensor:
        """``torch.ops.int8attn.attention``: int8attn attention as an opaque torch op.

        Args:
            q: Queries [B, Hq, Nq, D] ("HND") or [B, Nq, Hq, D] ("NHD").
            k: Keys, same layout.
            v: Values, same layout.
            mode: :class:`int8attn.Mode` value (0 = policy/default).
            causal: Bottom-right aligned causal mask.
            sm_scale: Softmax scale; 0 = 1/sqrt(D).
            layout: "HND" or "NHD".
            policy: Raw ``int8attn_policy_t*`` (``TimestepPolicy.handle``) or 0.
            timestep: Step index for the policy (ignored without one).

        Returns:
            The output, ``torch.empty_like(q)`` filled in.
        """
        return _api.attention(q, k, v, mode=mode, causal=causal, sm_scale=sm_scale or None,
                              layout=layout, policy=policy or None,
                              timestep=timestep if policy else None)

    @attention_op.register_fake
    def _attention_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mode: int = 2,
                        causal: bool = False, sm_scale: float = 0.0, layout: str = "HND",
                        policy: int = 0, timestep: int = -1) -> torch.Tensor:
        return torch.empty_like(q)

else:  # pragma: no cover - torch < 2.4

    def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mode: int = 2,
                     causal: bool = False, sm_scale: float = 0.0, layout: str = "HND",
                     policy: int = 0, timestep: int = -1) -> torch.Tensor:
        """Eager fallback of the custom op for torch versions without ``torch.library.custom_op``."""
        return _api.attention(q, k, v, mode=mode, causal=causal, sm_scale=sm_scale or None,
                              layout=layout, policy=policy or None,
                              timestep=timestep if policy else None)


def _call_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mode: int, causal: bool,
             sm_scale: Optional[float], layout: str, policy: Optional[TimestepPolicy],
             timestep: Optional[int]) -> torch.Tensor:
    ph = policy.handle if policy is not None else 0
    t = int(timestep) if (policy is not None and timestep is not None) else -1
    if ph and t < 0:
        t = 0
    return attention_op(q, k, v, int(mode), bool(causal), float(sm_scale or 0.0), layout, ph, t)


def _compute_dtype(x: torch.Tensor) -> Optional[torch.dtype]:
    """GPU kernels take fp16/bf16: fp32 CUDA inputs run in bf16 (and the result is cast back)."""
    if x.is_cuda and x.dtype == torch.float32:
        return torch.bfloat16
    return None


def _timestep_index(timestep: Any, num_timesteps: int) -> Optional[int]:
    if timestep is None:
        return None
    if isinstance(timestep, torch.Tensor):
        timestep = timestep.flatten()[0].item() if timestep.numel() else None
        if timestep is None:
            return None
    t = int(timestep)
    return min(max(t, 0), num_timesteps - 1)


# ---- the module -----------------------------------------------------------------------------
class Int8Attention(torch.nn.Module):
    """Multi-head attention with INT8 Q·Kᵀ (the seeds' ``Int8Attention`` API).

    Args:
        num_heads: Number of query heads (checked against the inputs).
        head_dim: Head dimension D (a multiple of 8 in [8, 256]).
        num_timesteps: Number of diffusion timesteps the ``timestep`` argument ranges over.
        use_adaptive_scaling: Build a :class:`~int8attn.TimestepPolicy` over ``num_timesteps``:
            the first/last ``num_edge_steps`` timesteps run EXACT, the others ``mode``, with
            ``timestep_scales`` as per-step INT8 scale multipliers.
        timestep_scales: Optional per-timestep scale multipliers in (0, 1] (length
            ``num_timesteps``; the seeds' LUT).
        mode: Precision of ordinary steps: "balanced" (default), "fast" (FP8 P·V on sm89/sm90)
            or "exact".
        causal: Causal mask.
        sm_scale: Softmax scale (default 1/sqrt(head_dim)).
        layout: "HND" ([B, H, N, D], the seeds' layout) or "NHD".
        num_edge_steps: Protected steps at each end of the schedule (default 1).
        block_q: Accepted for compatibility with the seeds; tiling is chosen by the library.
        block_k: Accepted for compatibility with the seeds; ignored.
    """

    def __init__(self, num_heads: int, head_dim: int, num_timesteps: int = 1000,
                 use_adaptive_scaling: bool = True,
                 timestep_scales: Optional[Union[Sequence[float], torch.Tensor]] = None, *,
                 mode: ModeLike = "balanced", causal: bool = False,
                 sm_scale: Optional[float] = None, layout: str = "HND",
                 num_edge_steps: int = 1, block_q: Optional[int] = None,
                 block_k: Optional[int] = None) -> None:
        super().__init__()
        self.num_heads = int(num_heads)
        self.head_dim = int(head_dim)
        self.num_timesteps = int(num_timesteps)
        self.use_adaptive_scaling = bool(use_adaptive_scaling)
        self.mode = parse_mode(mode)
        self.causal = bool(causal)
        self.sm_scale = sm_scale
        self.layout = layout.upper()
        self.policy: Optional[TimestepPolicy] = None
        if timestep_scales is not None:
            ts = torch.as_tensor(timestep_scales, dtype=torch.float32).flatten().cpu()
            self.register_buffer("timestep_scales", ts, persistent=False)
        else:
            self.timestep_scales = None
        if self.use_adaptive_scaling:
            self.policy = TimestepPolicy(
                self.num_timesteps,
                default_mode=self.mode if self.mode != Mode.DEFAULT else None,
                edge_mode="exact", num_first_edge=num_edge_steps, num_last_edge=num_edge_steps,
                scale_multipliers=(ts.tolist() if timestep_scales is not None else None))

    def extra_repr(self) -> str:
        return (f"num_heads={self.num_heads}, head_dim={self.head_dim}, mode={self.mode}, "
                f"num_timesteps={self.num_timesteps}, "
                f"adaptive={self.use_adaptive_scaling}, layout={self.layout}")

    def forward(self, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor,  # noqa: N803
                timestep: Optional[Union[int, torch.Tensor]] = None) -> torch.Tensor:
        """Attention of Q against K, V.

        Args:
            Q: [B, H, N, D] (or NHD) float16/bfloat16 (float32 on the CPU; on the GPU float32 is
                computed in bfloat16 and cast back).
            K: Keys [B, Hkv, Nk, D].
            V: Values [B, Hkv, Nk, D].
            timestep: Current diffusion timestep in [0, num_timesteps) (with adaptive scaling,
                selects mode and scale multiplier); None = ``mode`` for every call.

        Returns:
            The output, same shape and dtype as Q.
        """
        hdim = 1 if self.layout == "HND" else 2
        if Q.dim() == 4 and (Q.shape[hdim] != self.num_heads or Q.shape[-1] != self.head_dim):
            raise ValueError(
                f"Q: expected {self.num_heads} heads of dim {self.head_dim} in layout "
                f"{self.layout}, got shape {tuple(Q.shape)}")
        cd = _compute_dtype(Q)
        q, k, v = (Q, K, V) if cd is None else (Q.to(cd), K.to(cd), V.to(cd))
        t = _timestep_index(timestep, self.num_timesteps) if self.policy is not None else None
        mode = Mode.DEFAULT if t is not None else (
            self.mode if self.mode != Mode.DEFAULT else Mode.BALANCED)
        o = _call_op(q, k, v, mode, self.causal, self.sm_scale, self.layout,
                     self.policy if t is not None else None, t)
        return o if cd is None else o.to(Q.dtype)


# ---- diffusers processors -------------------------------------------------------------------
class Int8AttnProcessor:
    """A diffusers attention processor running attention through int8attn.

    Same call signature as diffusers' ``AttnProcessor2_0``: ``processor(attn, hidden_states,
    encoder_hidden_states=None, attention_mask=None, temb=None, ...)`` where ``attn`` is a
    diffusers ``Attention`` (``to_q``, ``to_k``, ``to_v``, ``to_out``, ``heads``, optional
    ``norm_q``/``norm_k``, ``group_norm``, ``spatial_norm``, ``residual_connection``,
    ``rescale_output_factor``). Q/K/V are passed in NHD layout, so no transposes are made.
    The CFG batch (2B) runs in one call.

    Args:
        mode: Precision for every call without a policy ("balanced" by default).
        policy: Optional :class:`~int8attn.TimestepPolicy` over sampler *step indices*; set the
            current step with :meth:`set_timestep` (or pass :meth:`callback_on_step_end` to the
            pipeline).
        fallback: Run ``F.scaled_dot_product_attention`` instead when a call cannot use int8attn
            (an attention mask, dropout, an unsupported head dim or device). Counted in
            :attr:`stats`.
    """

    def __init__(self, mode: ModeLike = "balanced", policy: Optional[TimestepPolicy] = None,
                 fallback: bool = True) -> None:
        self.mode = parse_mode(mode)
        self.policy = policy
        self.fallback = fallback
        self.timestep: Optional[int] = 0 if policy is not None else None
        self.stats: Dict[str, int] = {"int8attn": 0, "fallback": 0}
        self._lock = threading.Lock()

    # -- timestep handling
    def set_timestep(self, step: Optional[int]) -> None:
        """Set the current sampler step index (0 = first step) used with the policy."""
        self.timestep = None if step is None else int(step)

    def callback_on_step_end(self, pipe: Any, step: int, timestep: Any,
                             callback_kwargs: Dict[str, Any]) -> Dict[str, Any]:
        """A diffusers ``callback_on_step_end``: advances to step ``step + 1`` (and back to 0
        after the last step), so the policy sees step indices without further code."""
        n = len(self.policy) if self.policy is not None else 0
        nxt = step + 1
        self.set_timestep(nxt if n == 0 or nxt < n else 0)
        return callback_kwargs

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    # -- the attention itself
    def attention(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *,
                  layout: str, causal: bool = False, scale: Optional[float] = None,
                  fallback_fn: Optional[Callable[[], torch.Tensor]] = None) -> torch.Tensor:
        """Run int8attn on q/k/v in ``layout``; on an unsupported case call ``fallback_fn``."""
        cd = _compute_dtype(query)
        q, k, v = (query, key, value) if cd is None else (
            query.to(cd), key.to(cd), value.to(cd))
        use_policy = self.policy is not None and self.timestep is not None
        mode = Mode.DEFAULT if use_policy else (
            self.mode if self.mode != Mode.DEFAULT else Mode.BALANCED)
        try:
            o = _call_op(q, k, v, mode, causal, scale, layout,
                         self.policy if use_policy else None,
                         self.timestep if use_policy else None)
        except NotSupportedError:
            if not self.fallback or fallback_fn is None:
                raise
            self._count("fallback")
            return fallback_fn()
        self._count("int8attn")
        return o if cd is None else o.to(query.dtype)

    def __call__(self, attn: Any, hidden_states: torch.Tensor,
                 encoder_hidden_states: Optional[torch.Tensor] = None,
                 attention_mask: Optional[torch.Tensor] = None,
                 temb: Optional[torch.Tensor] = None, *args: Any, **kwargs: Any) -> torch.Tensor:
        """Compute the attention block like ``AttnProcessor2_0``, with int8attn inside."""
        residual = hidden_states
        spatial_norm = getattr(attn, "spatial_norm", None)
        if spatial_norm is not None:
            hidden_states = spatial_norm(hidden_states, temb)
        input_ndim = hidden_states.ndim
        if input_ndim == 4:
            batch, channel, height, width = hidden_states.shape
            hidden_states = hidden_states.view(batch, channel, height * width).transpose(1, 2)
        batch_size, sequence_length, _ = (
            hidden_states.shape if encoder_hidden_states is None
            else encoder_hidden_states.shape)
        if attention_mask is not None:
            attention_mask = attn.prepare_attention_mask(attention_mask, sequence_length,
                                                         batch_size)
            attention_mask = attention_mask.view(batch_size, attn.heads, -1,
                                                 attention_mask.shape[-1])
        group_norm = getattr(attn, "group_norm", None)
        if group_norm is not None:
            hidden_states = group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)

        query = attn.to_q(hidden_states)
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        elif getattr(attn, "norm_cross", None):
            encoder_hidden_states = attn.norm_encoder_hidden_states(encoder_hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)

        inner_dim = key.shape[-1]
        head_dim = inner_dim // attn.heads
        query = query.view(batch_size, -1, attn.heads, head_dim)
        key = key.view(batch_size, -1, attn.heads, head_dim)
        value = value.view(batch_size, -1, attn.heads, head_dim)
        if getattr(attn, "norm_q", None) is not None:
            query = attn.norm_q(query)
        if getattr(attn, "norm_k", None) is not None:
            key = attn.norm_k(key)

        def sdpa() -> torch.Tensor:
            o = F.scaled_dot_product_attention(
                query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                attn_mask=attention_mask, dropout_p=0.0, is_causal=False)
            return o.transpose(1, 2)

        if attention_mask is not None and self.fallback:
            self._count("fallback")
            out = sdpa()
        elif attention_mask is not None:
            raise NotSupportedError(200, "attention_mask: arbitrary masks are not supported by "
                                    "int8attn (use fallback=True)")
        else:
            scale = getattr(attn, "scale", None)
            out = self.attention(query, key, value, layout="NHD",
                                 scale=float(scale) if scale is not None else None,
                                 fallback_fn=sdpa)
        hidden_states = out.reshape(batch_size, -1, attn.heads * head_dim).to(query.dtype)
        hidden_states = attn.to_out[0](hidden_states)
        if len(attn.to_out) > 1:
            hidden_states = attn.to_out[1](hidden_states)
        if input_ndim == 4:
            hidden_states = hidden_states.transpose(-1, -2).reshape(batch, channel, height, width)
        if getattr(attn, "residual_connection", False):
            hidden_states = hidden_states + residual
        return hidden_states / getattr(attn, "rescale_output_factor", 1.0)


def sdpa_int8(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              attn_mask: Optional[torch.Tensor] = None, dropout_p: float = 0.0,
              is_causal: bool = False, scale: Optional[float] = None, enable_gqa: bool = False,
              *, processor: Optional[Int8AttnProcessor] = None,
              _original: Optional[Callable[..., torch.Tensor]] = None) -> torch.Tensor:
    """A drop-in for ``F.scaled_dot_product_attention`` ([B, H, N, D]) that runs int8attn and
    falls back to the original for masks, dropout, top-left causal with Nq ≠ Nk, inputs that are
    not rank 4, and unsupported cases."""
    orig = _original or _ORIGINAL_SDPA
    proc = processor or _DEFAULT_PROCESSOR

    def fb() -> torch.Tensor:
        kw: Dict[str, Any] = {"attn_mask": attn_mask, "dropout_p": dropout_p,
                              "is_causal": is_causal, "scale": scale}
        if enable_gqa:
            kw["enable_gqa"] = True
        return orig(query, key, value, **kw)

    if (attn_mask is not None or dropout_p > 0.0 or query.dim() != 4
            or (is_causal and query.shape[-2] != key.shape[-2])
            or (query.shape[1] != key.shape[1] and not enable_gqa)):
        proc._count("fallback")
        return fb()
    return proc.attention(query, key, value, layout="HND", causal=is_causal, scale=scale,
                          fallback_fn=fb)


_ORIGINAL_SDPA = F.scaled_dot_product_attention
_DEFAULT_PROCESSOR = Int8AttnProcessor()
_patch_lock = threading.RLock()


class Int8SDPAProcessor:
    """Wraps another diffusers processor (Flux, SD3 joint attention, video DiTs, …): while it
    runs, ``torch.nn.functional.scaled_dot_product_attention`` is redirected to int8attn via
    :func:`sdpa_int8`. The wrapper advertises the wrapped processor's call signature, so
    diffusers passes it the same keyword arguments (e.g. ``image_rotary_emb``).

    Args:
        inner: The processor to wrap.
        config: The :class:`Int8AttnProcessor` holding mode, policy, timestep and stats.
    """

    def __init__(self, inner: Any, config: Int8AttnProcessor) -> None:
        self.inner = inner
        self.config = config
        sig = inspect.signature(type(inner).__call__)

        def __call__(self: "Int8SDPAProcessor", *args: Any, **kwargs: Any) -> Any:
            return Int8SDPAProcessor._run(self, *args, **kwargs)

        __call__.__signature__ = sig  # type: ignore[attr-defined]
        self.__class__ = type(f"Int8SDPAProcessor[{type(inner).__name__}]",
                              (Int8SDPAProcessor,), {"__call__": __call__})

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        cfg = self.config

        def patched(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attn_mask: Optional[torch.Tensor] = None, dropout_p: float = 0.0,
                    is_causal: bool = False, scale: Optional[float] = None,
                    enable_gqa: bool = False) -> torch.Tensor:
            return sdpa_int8(query, key, value, attn_mask, dropout_p, is_causal, scale,
                             enable_gqa, processor=cfg, _original=_ORIGINAL_SDPA)

        with _patch_lock:
            F.scaled_dot_product_attention = patched
            try:
                return self.inner(*args, **kwargs)
            finally:
                F.scaled_dot_product_attention = _ORIGINAL_SDPA

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # replaced per instance
        return self._run(*args, **kwargs)


_STANDARD_PROCESSORS = {"AttnProcessor", "AttnProcessor2_0", "XFormersAttnProcessor",
                        "AttnProcessorNPU", "Int8AttnProcessor"}


def _iter_modules(obj: Any) -> Iterator[torch.nn.Module]:
    seen = set()
    roots: List[torch.nn.Module] = []
    if isinstance(obj, torch.nn.Module):
        roots.append(obj)
    else:
        comps = getattr(obj, "components", None)
        values = comps.values() if isinstance(comps, dict) else vars(obj).values()
        roots.extend(v for v in values if isinstance(v, torch.nn.Module))
    for root in roots:
        for m in root.modules():
            if id(m) not in seen:
                seen.add(id(m))
                yield m


def replace_attention_with_int8(pipe_or_module: Any, *, mode: ModeLike = "balanced",
                                policy: Optional[TimestepPolicy] = None,
                                num_inference_steps: Optional[int] = None,
                                fallback: bool = True,
                                wrap_other_processors: bool = True) -> Any:
    """Swap the attention processors of a diffusers pipeline (or any ``nn.Module``) for
    int8attn ones.

    Every module with a ``set_processor`` method and a ``processor`` attribute is changed:
    standard processors (``AttnProcessor2_0`` and friends) become one shared
    :class:`Int8AttnProcessor`; others (joint/rotary processors of Flux, SD3, video DiTs) are
    wrapped in :class:`Int8SDPAProcessor` when ``wrap_other_processors``.

    Args:
        pipe_or_module: A diffusers pipeline (its ``components``) or a module.
        mode: Precision of ordinary calls ("balanced", "fast", "exact").
        policy: Optional :class:`~int8attn.TimestepPolicy` over sampler step indices.
        num_inference_steps: Build a policy with this many steps when ``policy`` is None (first
            and last step EXACT, the rest ``mode``).
        fallback: Use PyTorch SDPA for calls int8attn cannot take (masks, …).
        wrap_other_processors: Also wrap non-standard processors.

    Returns:
        ``pipe_or_module`` itself; the shared processor is at ``._int8attn_processor`` (use
        :func:`set_timestep`, or ``callback_on_step_end=proc.callback_on_step_end``).
    """
    if policy is None and num_inference_steps is not None:
        policy = TimestepPolicy(num_inference_steps, default_mode=mode)
    proc = Int8AttnProcessor(mode=mode, policy=policy, fallback=fallback)
    swapped = wrapped = 0
    for m in _iter_modules(pipe_or_module):
        if not (callable(getattr(m, "set_processor", None)) and hasattr(m, "processor")):
            continue
        cur = m.processor
        if isinstance(cur, Int8SDPAProcessor):
            cur = cur.inner
        name = type(cur).__name__ if cur is not None else "AttnProcessor2_0"
        if name in _STANDARD_PROCESSORS:
            m.set_processor(proc)
            swapped += 1
        elif wrap_other_processors:
            m.set_processor(Int8SDPAProcessor(cur, proc))
            wrapped += 1
    proc.stats["swapped_modules"] = swapped
    proc.stats["wrapped_modules"] = wrapped
    try:
        setattr(pipe_or_module, "_int8attn_processor", proc)
    except (AttributeError, TypeError):  # pragma: no cover - frozen objects
        pass
    return pipe_or_module


def set_timestep(pipe_or_module: Any, step: Optional[int]) -> None:
    """Set the sampler step index on the processors installed by
    :func:`replace_attention_with_int8`."""
    proc = getattr(pipe_or_module, "_int8attn_processor", None)
    if isinstance(proc, Int8AttnProcessor):
        proc.set_timestep(step)
        return
    for m in _iter_modules(pipe_or_module):
        p = getattr(m, "processor", None)
        if isinstance(p, Int8SDPAProcessor):
            p = p.config
        if isinstance(p, Int8AttnProcessor):
            p.set_timestep(step)


