"""diffusers attention processors that run attention through int8attn.

- :class:`Int8AttnProcessor` replaces ``AttnProcessor2_0`` (UNets, PixArt, …); every int8attn
  call of a model, whichever processor made it, goes through its :meth:`~Int8AttnProcessor.
  attention`, which owns the mode/policy, the routing table and the counters.
- :class:`~int8attn._joint.Int8JointAttnProcessor` replaces SD3's ``JointAttnProcessor2_0``,
  joining image and text tokens without the stock processor's gather over transposed views.
- :class:`Int8SDPAProcessor` wraps any other processor (Flux, Wan, CogVideoX, …): it runs
  the wrapped processor's own ``__call__`` code with ``F.scaled_dot_product_attention`` and
  diffusers' ``dispatch_attention_fn`` bound to int8attn in that function's globals. Nothing
  global is patched, so it is thread-safe and ``torch.compile`` traces it without breaks.
- :func:`replace_attention_with_int8` swaps a pipeline's processors; :func:`set_timestep` sets
  the sampler step for a policy.
"""

from __future__ import annotations

import builtins
import inspect
import sys
import threading
import types
import warnings
import weakref
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F
from torch.fx.experimental.symbolic_shapes import statically_known_true

from . import _routing
from . import _torch_op
from ._api import (Mode, ModeLike, TimestepPolicy, _granularity, parse_mode,
                   warn_mode_overrides_policy)
from ._api import attention as _attention
from ._lib import NotSupportedError
from ._norms import install as install_lean_norm
from ._rotary import (FLAT_ROTARY_FUNCTIONS, QWEN_ROTARY_NAME, lean_apply_rotary_emb,
                      lean_builtins, lean_complex_rotary, lean_flat_rotary, lean_nested_rotary,
                      nested_rotary_code)

_ORIGINAL_SDPA = F.scaled_dot_product_attention
_ROUTES = ("auto", "always", "sdpa")
_FAST = int(Mode.FAST)


def _compute_dtype(x: torch.Tensor) -> Optional[torch.dtype]:
    """GPU kernels take fp16/bf16: fp32 CUDA inputs run in bf16 (and the result is cast back)."""
    if x.is_cuda and x.dtype == torch.float32:
        return torch.bfloat16
    return None


def stock_sdpa_nhd(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                   attn_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """diffusers' own attention call on [B, N, H, D] tensors (the unpatched SDPA on their
    [B, H, N, D] views), returned as [B, N, H, D]: the processors' fallback and routed path."""
    o = _ORIGINAL_SDPA(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                       attn_mask=attn_mask, dropout_p=0.0, is_causal=False)
    return o.transpose(1, 2)


class _TextKV:
    """Projected K/V of one attention module for one ``encoder_hidden_states`` tensor.

    The tensor itself is held, so its memory cannot be reused by another tensor while the entry
    lives, and its version counter is compared, so an in-place change invalidates the entry."""

    __slots__ = ("source", "version", "key", "value")

    def __init__(self, source: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        self.source = source
        self.version = source._version
        self.key = key
        self.value = value

    def matches(self, source: torch.Tensor) -> bool:
        return source is self.source and source._version == self.version


class _Padding(NamedTuple):
    """What a padding mask amounts to for int8attn: ``lengths``, int32 [B] valid keys per batch
    row (``k_lengths``); ``order``, int64 [B, L] the indices of each row's kept keys first
    (None where they are already a prefix: the call's K and V as they are); ``rows``, for a
    joint mask, each row's valid queries (host ints; the rows past them are zeroed)."""
    lengths: torch.Tensor
    order: Optional[torch.Tensor] = None
    rows: Optional[List[int]] = None


def _kept_keys_first(key: torch.Tensor, value: torch.Tensor, layout: str,
                     order: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    """K and V with each batch row's kept keys moved to the front (``order``, see
    :class:`_Padding`), so a key-padding mask with holes runs as ``k_lengths``: the softmax
    over a set of keys does not depend on their order. One gather of K and V (the kept keys
    only), against the attention's N² work."""
    if order is None:
        return key, value
    batch, kept = order.shape

    def gather(x: torch.Tensor) -> torch.Tensor:
        x = x.expand(batch, *x.shape[1:]) if x.shape[0] == 1 else x
        if layout == "NHD":  # [B, N, H, D]
            return x.gather(1, order[:, :, None, None].expand(batch, kept, *x.shape[2:]))
        return x.gather(2, order[:, None, :, None].expand(batch, x.shape[1], kept, x.shape[3]))

    return gather(key), gather(value)


class _KeyLengths:
    """The valid key count of each batch row of a key-padding mask, for int8attn's
    ``k_lengths``: a mask [B or 1, H or 1, 1, Nk] (or [B or 1, 1, Nk]), bool (True keeps a key)
    or float (an additive bias: 0 keeps a key, at most −1000 drops it, as diffusers' −10000 in
    any dtype (bf16 rounds it to −9984) or −inf do: its softmax weight underflows to 0 in
    float32), the same for every head, with kept keys in every row: a prefix (HunyuanVideo's
    joint attention, the text padding last; PixArt's and Sana's cross-attention to padded T5
    tokens) or, where the caller can move them to the front (:meth:`padding`), any set; and
    joint masks over queries and keys (:meth:`get_joint`). Checking costs a host
    synchronisation, so the last mask's answer is kept (a transformer passes every layer the
    same mask tensor, or a processor makes the same view of it in every call, as Z-Image's
    ``mask[:, None, None, :]``: the view's base is what is kept; its version counter and a weak
    reference catch changes and reuse of its memory)."""

    DROP = -1.0e3  # a float mask's entries at or below this drop their key

    def __init__(self) -> None:
        self.key: Any = None
        self.mask: Any = None
        self.answer: Optional[_Padding] = None  # the last mask's, by padding() or get_joint()

    @staticmethod
    def shaped(mask: Any, batch: int, keys: int, floats: bool = False) -> bool:
        """Whether ``mask`` has a key-padding mask's dtype and shape (no data read): rank 4, or
        rank 3 [B or 1, 1, Nk] (diffusers' encoder masks before the processor repeats them per
        head: a new tensor every call, so the standard processor passes the original). Float
        masks only with ``floats`` (the processors and ``sageattn`` pass it)."""
        return (isinstance(mask, torch.Tensor) and mask.dim() in (3, 4)
                and (mask.dtype == torch.bool or (floats and mask.is_floating_point()))
                and mask.shape[-2] == 1 and mask.shape[-1] == keys
                and (mask.dim() == 4 or mask.shape[1] == 1) and mask.shape[0] in (1, batch))

    def get(self, mask: Any, batch: int, keys: int,
            floats: bool = False) -> Optional[torch.Tensor]:
        """int32 [batch] lengths on the mask's device, or None if ``mask`` is not such a mask
        with its kept keys a prefix of every row (``floats``: see :meth:`shaped`)."""
        padding = self.padding(mask, batch, keys, floats)
        return None if padding is None else padding.lengths

    def padding(self, mask: Any, batch: int, keys: int, floats: bool = False,
                holes: bool = False) -> Optional[_Padding]:
        """:class:`_Padding` of a key-padding mask, or None if ``mask`` is not one. With
        ``holes`` the kept keys may be any non-empty set of each row (QwenImage-2.1's batched
        prompts: valid text, text padding, image), given as ``order``; without, only a prefix.
        One host synchronisation (the kept keys' order, where needed, is computed on the
        device); the last mask's answer is kept."""
        if not self.shaped(mask, batch, keys, floats):
            return None
        key = (mask.data_ptr(), mask._version, tuple(mask.shape), mask.stride(), mask.dtype,
               mask.device, batch)
        # a view made anew in every call is the same elements of the same (kept) base
        anchor = mask if mask._base is None else mask._base
        if not (self.key == key and self.mask() is anchor):
            if self.unreadable(mask):
                return None
            self.answer = self._read(mask, batch, keys)
            self.key, self.mask = key, weakref.ref(anchor)
        answer = self.answer
        return answer if answer is None or holes or answer.order is None else None

    @staticmethod
    def unreadable(mask: torch.Tensor) -> bool:
        """Whether reading ``mask`` on the host now would break a CUDA-graph capture (a host
        synchronisation inside one is an error): a mask not read before the capture is then
        no padding mask to int8attn, and its call runs SDPA with it, which a graph captures.
        Asked only where the mask would be read (not for the kept answer)."""
        return mask.is_cuda and torch.cuda.is_current_stream_capturing()

    def _read(self, mask: torch.Tensor, batch: int, keys: int) -> Optional[_Padding]:
        rows = mask[:, 0, :] if mask.dim() == 3 else mask[:, 0, 0, :]
        if mask.dtype == torch.bool:
            keep, valid = rows, None
        else:
            keep = rows == 0
            valid = (keep | (rows <= self.DROP)).all()
        lengths = keep.sum(1, dtype=torch.int32)
        ok = (lengths > 0).all()
        if mask.dim() == 4:  # the same for every head
            ok = ok & (mask == mask[:, :1]).all()
        if valid is not None:
            ok = ok & valid
        prefix = ((torch.arange(keys, device=mask.device) < lengths[:, None]) == keep).all()
        head = torch.cat([torch.stack([ok, prefix]).to(torch.int32), lengths]).tolist()
        if not head[0]:  # the one sync
            return None
        lengths = lengths.expand(batch).contiguous()
        if head[1]:
            return _Padding(lengths)
        order = torch.argsort((~keep).to(torch.uint8), dim=1, stable=True)[:, :max(head[2:])]
        return _Padding(lengths, order.expand(batch, -1))

    @staticmethod
    def joint_shaped(mask: Any, batch: int, tokens: int) -> bool:
        """Whether ``mask`` could be a joint padding mask over ``tokens`` queries and as many
        keys (no data read): bool [B or 1, 1, N, N]."""
        return (isinstance(mask, torch.Tensor) and mask.dim() == 4 and mask.dtype == torch.bool
                and mask.shape[1] == 1 and tokens > 1 and mask.shape[-2] == tokens
                and mask.shape[-1] == tokens and mask.shape[0] in (1, batch))

    def get_joint(self, mask: Any, batch: int, tokens: int) -> Optional[_Padding]:
        """:class:`_Padding` with the valid token count of each batch row (``lengths`` and the
        host list ``rows``) where ``mask`` is a joint padding mask, else None: M[b, 0, q, k] =
        (q < n_b) and (k < n_b), the valid tokens a non-empty prefix for queries as for keys
        (HunyuanVideo-1.5 builds it in every joint attention call as ``m[:, None] & m[:, :,
        None]`` from its key-padding mask m).
        Query rows past n_b have every key masked, where PyTorch's SDPA gives 0; int8attn,
        run with ``k_lengths``, computes them over the valid keys, so the caller zeroes them.
        The check reads the first query's row, then (two host synchronisations) each row's
        n_b x n_b block and the rest of its matrix with bool reductions over views: a sum over
        the N x N bool mask would first copy it into integers (8 bytes an element, tens of GB
        at a video's N). The last mask's answer is kept as in :meth:`get`."""
        if not self.joint_shaped(mask, batch, tokens):
            return None
        key = ("joint", mask.data_ptr(), mask._version, tuple(mask.shape), mask.stride(),
               mask.device, batch)
        anchor = mask if mask._base is None else mask._base
        if self.key == key and self.mask() is anchor:
            return self.answer
        if self.unreadable(mask):
            return None
        m = mask[:, 0]
        first = m[:, 0, :]  # the first query's keys: [B or 1, N]
        lengths = first.sum(1, dtype=torch.int32)
        prefix = (torch.arange(tokens, device=mask.device) < lengths[:, None]) == first
        head = torch.cat([(prefix.all() & (lengths > 0).all()).view(1).to(torch.int32),
                          lengths]).tolist()
        answer: Optional[_Padding] = None
        if head[0]:
            checks = []
            for b, n in enumerate(head[1:]):
                checks.append(m[b, :n, :n].all())
                if n < tokens:  # nothing outside the block
                    checks.append(~m[b, n:].any())
                    checks.append(~m[b, :n, n:].any())
            if bool(torch.stack(checks).all()):
                answer = _Padding(lengths.expand(batch).contiguous(),
                                  rows=head[1:] * (batch // len(head[1:])))
        self.key, self.mask, self.answer = key, weakref.ref(anchor), answer
        return answer


class Int8AttnProcessor:
    """A diffusers attention processor running attention through int8attn.

    Same call signature as diffusers' ``AttnProcessor2_0``: ``processor(attn, hidden_states,
    encoder_hidden_states=None, attention_mask=None, temb=None, ...)`` where ``attn`` is a
    diffusers ``Attention`` (``to_q``, ``to_k``, ``to_v``, ``to_out``, ``heads``, optional
    ``norm_q``/``norm_k``, ``group_norm``, ``spatial_norm``, ``residual_connection``,
    ``rescale_output_factor``). Q/K/V are passed in NHD layout, so no transposes are made.
    The CFG batch (2B) runs in one call.

    Args:
        mode: Precision of every call: "exact", "balanced" or "fast"; None (default): the
            policy's mode for the current step when ``policy`` is given, else "balanced". An
            explicit mode together with a policy wins over the policy's mode (its scale
            multipliers still apply) and issues :class:`~int8attn.ModeOverridesPolicyWarning`.
        policy: Optional :class:`~int8attn.TimestepPolicy` over sampler *step indices*; set the
            current step with :meth:`set_timestep` (or pass :meth:`callback_on_step_end` to the
            pipeline).
        fallback: Run PyTorch SDPA instead when a call cannot use int8attn (an attention mask,
            dropout, an unsupported head dim or device). Counted in :attr:`stats`.
        route: "auto" (default): calls whose shape int8attn is measured slower on than PyTorch
            SDPA on this GPU model (``int8attn.routing_tables()``) run SDPA, so a step is never
            made slower; "always": every call int8attn can take runs int8attn; "sdpa": every
            call runs SDPA (counted as ``sdpa_routed``) while the processors' other one-pass
            work (rotary embedding, Q/K RMS norms, SD3's joined tokens) stays, so two runs of a
            pipeline, "auto" against "sdpa", measure what int8attn's attention alone changes in
            a step.
        fast_k_granularity: K's INT8 scale granularity in FAST calls: "block" (default: one
            scale per 64 keys, SageAttention's choice; 6-12% faster on Hopper, rel-L1 within
            FAST's bar, see docs/precision-modes.md) or "token" (the library's default, one
            per key). BALANCED calls keep per-key scales.
        cache_text_kv: Keep each module's projected text K/V (cross-attention with
            ``encoder_hidden_states``) while the same, unmodified ``encoder_hidden_states``
            tensor comes back (the pipeline's prompt embeddings, every step of a generation),
            skipping the K/V projections. Off by default; eager mode only. Drop the entries
            with :meth:`clear_text_kv_cache` (they are replaced when the tensor changes).

    Attributes:
        stats: Counters: ``int8attn`` (calls run by int8attn), ``sdpa_routed`` (calls the
            routing table sent to SDPA), ``fallback`` (calls int8attn cannot take),
            ``text_kv_hits`` (K/V projections skipped), plus ``swapped_modules`` and
            ``wrapped_modules`` after :func:`replace_attention_with_int8`. Counting is not
            synchronised between threads. Under ``torch.compile`` only calls of processors
            with a policy are counted (they run through ``int8attn::processor_attention``).
    """

    def __init__(self, mode: ModeLike = None, policy: Optional[TimestepPolicy] = None,
                 fallback: bool = True, route: str = "auto", cache_text_kv: bool = False,
                 fast_k_granularity: str = "block") -> None:
        if route not in _ROUTES:
            raise ValueError(f"route: expected one of {_ROUTES}, got {route!r}")
        self._fast_k_granularity = _granularity(fast_k_granularity, "fast_k_granularity")
        self.mode = parse_mode(mode)
        if policy is not None:
            warn_mode_overrides_policy(mode, "Int8AttnProcessor")
        self.policy = policy
        self.fallback = fallback
        self.route = route
        self.cache_text_kv = bool(cache_text_kv)
        self.timestep: Optional[int] = 0 if policy is not None else None
        self.stats: Dict[str, int] = {"int8attn": 0, "sdpa_routed": 0, "fallback": 0,
                                      "text_kv_hits": 0}
        self._text_kv: Dict[int, _TextKV] = {}
        self._key_lengths = _KeyLengths()
        self._step_mode: Dict[Optional[int], int] = {}
        # The sampler step whose first call looked for a CUDA-graph capture (_check_capture).
        self._capture_checked_step: Optional[int] = None
        self._capture_warned = False
        self._op_id = _torch_op.register_processor(self)
        # The fastest mode these calls run in (FAST > BALANCED > EXACT): what a compiled graph
        # routes by (a policy's later set_mode calls are not seen by graphs compiled before).
        self._fastest_mode = (max(int(m) for m in policy.modes())
                              if policy is not None and self.mode == Mode.DEFAULT
                              else self._mode_now())

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

    def clear_text_kv_cache(self) -> None:
        """Forget every cached text K/V (e.g. before a new prompt, to free their memory)."""
        self._text_kv.clear()

    def _count(self, key: str) -> None:
        # Not while torch.compile traces: a counter read there becomes a guard on its value,
        # and every later call would recompile. Calls compiled into a graph are not counted,
        # except those made through int8attn::processor_attention (counted when they run).
        if not _torch_op._is_compiling():
            self.stats[key] += 1

    def _mode_now(self) -> int:
        """The mode this call runs in: an explicit mode, else the policy's for the current step
        (cached per step), else BALANCED."""
        if self.mode != Mode.DEFAULT:
            return int(self.mode)
        if self.policy is None or self.timestep is None:
            return int(Mode.BALANCED)
        m = self._step_mode.get(self.timestep)
        if m is None:
            t = min(max(self.timestep, 0), len(self.policy) - 1)
            m = self._step_mode[self.timestep] = int(self.policy.mode(t))
        return m

    def _check_capture(self) -> None:
        """Warn once when this processor's calls are captured into a CUDA graph while its
        policy changes the mode between sampler steps: a graph replays the kernels it
        captured, so every replay runs the captured step's mode (``torch.compile(...,
        mode="reduce-overhead")`` records a graph at one step and replays it at the others).
        Looked at on the first call of each step: one query of the stream a step."""
        if self._capture_checked_step == self.timestep or self._capture_warned:
            return
        self._capture_checked_step = self.timestep
        if not torch.cuda.is_current_stream_capturing():
            return
        modes = sorted({int(m) for m in self.policy.modes()})
        if len(modes) < 2:
            return
        self._capture_warned = True
        names = ", ".join(Mode(m).name.lower() for m in modes)
        warnings.warn(
            f"int8attn: a CUDA graph is capturing the attention of a processor whose timestep "
            f"policy changes the precision mode between sampler steps ({names}); a graph "
            f"replays what it captured, so every replay runs step {self.timestep}'s mode "
            f"({Mode(self._mode_now()).name.lower()}) and the routing decided then, whatever "
            f"the step. For the policy's per-step modes run without CUDA graphs (torch.compile's "
            f"default mode, or mode='max-autotune-no-cudagraphs'); for graphs, give a fixed "
            f"mode (replace_attention_with_int8(pipe, mode='fast') without num_inference_steps)",
            stacklevel=3)

    # -- the attention itself
    def attention(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *,
                  layout: str, causal: bool = False, scale: Optional[float] = None,
                  fallback_fn: Optional[Callable[[], torch.Tensor]] = None) -> torch.Tensor:
        """Attention of q/k/v in ``layout`` ("NHD" or "HND") by int8attn, or by
        ``fallback_fn`` (SDPA on the same inputs) where the routing table prefers SDPA or
        int8attn cannot take the call. Every call of the processors goes through here.

        Eager calls decide in :meth:`run`. While ``torch.compile`` traces, a call site whose
        shape loses to SDPA even in the fastest mode in use is traced as that SDPA call;
        otherwise a processor without a policy traces int8attn's op, and one with a policy
        (whose mode changes with the sampler step) one ``int8attn::processor_attention`` node
        that calls :meth:`run` at run time (the step's mode, EXACT steps to SDPA). A call whose
        shape dynamo traces as symbolic (a length that varied between calls, as Mochi's
        per-sample text tokens do) cannot be looked up while tracing: it becomes that node
        too, with or without a policy, and is routed when it runs."""
        if not _torch_op._is_compiling():
            return self.run(query, key, value, layout=layout, causal=causal, scale=scale,
                            fallback_fn=fallback_fn, out_like_sdpa=True)
        static = _static_shapes(query, key)
        # Where even the fastest mode in use loses to SDPA, the graph holds SDPA itself.
        if static and fallback_fn is not None:
            device, *shape = _call_shape(query, key, layout)
            if _route_at_trace(self.route, device, self._fastest_mode, *shape):
                return fallback_fn()
        # The node passes the processor, not its step or mode: a traced int becomes a guard.
        if self.policy is not None or not static:
            return _torch_op.processor_attention(query, key, value, causal,
                                                 float(scale or 0.0), layout, self._op_id)
        return self.run(query, key, value, layout=layout, causal=causal, scale=scale,
                        fallback_fn=None)

    def routes_to_sdpa(self, query: torch.Tensor, key: torch.Tensor, layout: str,
                       mode: int) -> bool:
        """Whether a call of this shape in ``mode`` runs SDPA (see :func:`_route`)."""
        device, *shape = _call_shape(query, key, layout)
        return _route(self.route, device, mode, *shape)

    def run(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *,
            layout: str, causal: bool = False, scale: Optional[float] = None,
            fallback_fn: Optional[Callable[[], torch.Tensor]] = None,
            out_like_sdpa: bool = False,
            k_lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The call itself, decided now: the step's mode, the route, int8attn or the
        fallback (eager code, and the kernel of ``int8attn::processor_attention``).

        ``out_like_sdpa``: an HND output is allocated as SDPA's cuDNN and flash backends
        allocate theirs, [B, N, H, D] memory viewed as [B, H, N, D], so the processors' next
        step, ``o.transpose(1, 2).reshape(B, N, H * D)``, is a view instead of a copy (eager
        calls only: a compiled graph's op keeps the layout its fake output promised).
        ``k_lengths``: int32 [B] valid keys per batch row (eager calls only; the general call
        path), from :meth:`_masked`, which has made the routing decision on the call's own
        shape (its K and V may hold only the kept keys)."""
        mode = self._mode_now()
        if (self.policy is not None and self.timestep is not None and self.mode == Mode.DEFAULT
                and query.is_cuda):
            self._check_capture()
        if (fallback_fn is not None and k_lengths is None
                and self.routes_to_sdpa(query, key, layout, mode)):
            self._count("sdpa_routed")
            return fallback_fn()
        cd = _compute_dtype(query)
        q, k, v = (query, key, value) if cd is None else (
            query.to(cd), key.to(cd), value.to(cd))
        use_policy = self.policy is not None and self.timestep is not None
        kg = self._fast_k_granularity if mode == _FAST else 0
        # With a policy the library takes the step's mode itself (mode 0, DEFAULT) unless this
        # processor has an explicit mode, which wins (the policy's multiplier still applies).
        mode_arg = 0 if use_policy and self.mode == Mode.DEFAULT else mode
        out = None
        if out_like_sdpa and layout == "HND" and q.dim() == 4:
            b, h, n, d = q.shape
            out = q.new_empty((b, n, h, d)).transpose(1, 2)
        try:
            if k_lengths is None:
                o = _torch_op.call(q, k, v, mode_arg, causal, scale, layout,
                                   self.policy.handle if use_policy else 0,
                                   self.timestep if use_policy else -1, kg, out)
            else:
                o = _attention(q, k, v, mode=mode_arg, causal=causal, sm_scale=scale,
                               layout=layout, policy=self.policy if use_policy else None,
                               timestep=self.timestep if use_policy else None,
                               k_granularity=kg or None, k_lengths=k_lengths, out=out,
                               _warn_override=False)
        except NotSupportedError:
            if not self.fallback or fallback_fn is None:
                raise
            self._count("fallback")
            return fallback_fn()
        self._count("int8attn")
        return o if cd is None else o.to(query.dtype)

    def _text_kv_for(self, attn: Any, source: torch.Tensor,
                     project: Callable[[], Any]) -> Any:
        if not self.cache_text_kv or _torch_op._is_compiling():
            return project()
        entry = self._text_kv.get(id(attn))
        if entry is not None and entry.matches(source):
            self._count("text_kv_hits")
            return entry.key, entry.value
        k, v = project()
        self._text_kv[id(attn)] = _TextKV(source, k, v)
        return k, v

    def __call__(self, attn: Any, hidden_states: torch.Tensor,
                 encoder_hidden_states: Optional[torch.Tensor] = None,
                 attention_mask: Optional[torch.Tensor] = None,
                 temb: Optional[torch.Tensor] = None, *args: Any, **kwargs: Any) -> torch.Tensor:
        """Compute the attention block like ``AttnProcessor2_0``, with int8attn inside."""
        if attention_mask is None and not _torch_op._is_compiling():
            stock = self._stock_if_routed(attn, hidden_states, encoder_hidden_states)
            if stock is not None:
                self._count("sdpa_routed")
                return stock(attn, hidden_states, encoder_hidden_states, attention_mask, temb,
                             *args, **kwargs)
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
        raw_mask = attention_mask
        if attention_mask is not None:
            attention_mask = attn.prepare_attention_mask(attention_mask, sequence_length,
                                                         batch_size)
            attention_mask = attention_mask.view(batch_size, attn.heads, -1,
                                                 attention_mask.shape[-1])
        group_norm = getattr(attn, "group_norm", None)
        if group_norm is not None:
            hidden_states = group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)

        query = attn.to_q(hidden_states)
        head_dim = query.shape[-1] // attn.heads
        query = query.view(batch_size, -1, attn.heads, head_dim)
        if getattr(attn, "norm_q", None) is not None:
            query = attn.norm_q(query)
        cross = encoder_hidden_states is not None
        source = hidden_states if not cross else encoder_hidden_states

        def project() -> Any:
            ctx = source
            if cross and getattr(attn, "norm_cross", None):
                ctx = attn.norm_encoder_hidden_states(ctx)
            k = attn.to_k(ctx).view(batch_size, -1, attn.heads, head_dim)
            v = attn.to_v(ctx).view(batch_size, -1, attn.heads, head_dim)
            if getattr(attn, "norm_k", None) is not None:
                k = attn.norm_k(k)
            return k, v

        key, value = self._text_kv_for(attn, source, project) if cross else project()

        def sdpa() -> torch.Tensor:
            return stock_sdpa_nhd(query, key, value, attention_mask)

        scale = getattr(attn, "scale", None)
        scale = float(scale) if scale is not None else None
        if attention_mask is not None:
            def masked_fallback() -> torch.Tensor:
                if not self.fallback:
                    raise NotSupportedError(200, "attention_mask: int8attn takes key-padding "
                                            "masks only (use fallback=True)")
                return sdpa()

            out = self._masked(query, key, value, attention_mask, "NHD", False, scale,
                               masked_fallback, lengths_from=raw_mask)
        else:
            out = self.attention(query, key, value, layout="NHD", scale=scale, fallback_fn=sdpa)
        hidden_states = out.reshape(batch_size, -1, attn.heads * head_dim).to(query.dtype)
        hidden_states = attn.to_out[0](hidden_states)
        if len(attn.to_out) > 1:
            hidden_states = attn.to_out[1](hidden_states)
        if input_ndim == 4:
            hidden_states = hidden_states.transpose(-1, -2).reshape(batch, channel, height, width)
        if getattr(attn, "residual_connection", False):
            hidden_states = hidden_states + residual
        return hidden_states / getattr(attn, "rescale_output_factor", 1.0)

    def _stock_if_routed(self, attn: Any, hidden_states: torch.Tensor,
                         encoder_hidden_states: Optional[torch.Tensor]) -> Any:
        """diffusers' own ``AttnProcessor2_0`` where this call goes to SDPA, decided from the
        module and the inputs' shapes before any projection (None otherwise): a routed call
        then costs the stock processor's host time plus one cached lookup, which matters in
        host-bound UNet steps (SD1.5, SDXL: 32 and 140 calls a step, every one routed). Calls
        whose projected text K/V are cached go the long way, which reuses them."""
        cross = encoder_hidden_states is not None
        inner = getattr(attn, "inner_dim", None)
        heads = getattr(attn, "heads", None)
        if self.route != "auto" or (cross and self.cache_text_kv) or not inner or not heads:
            return None
        shape = hidden_states.shape
        nq = shape[1] if hidden_states.ndim == 3 else shape[2] * shape[3]
        nk = encoder_hidden_states.shape[1] if cross else nq
        device = hidden_states.get_device() if hidden_states.is_cuda else -1
        if not _route(self.route, device, self._mode_now(), inner // heads, nq, nk,
                      shape[0] * heads):
            return None
        return _stock_processor()

    # -- what Int8SDPAProcessor binds into a wrapped processor's code
    def sdpa(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             attn_mask: Optional[torch.Tensor] = None, dropout_p: float = 0.0,
             is_causal: bool = False, scale: Optional[float] = None,
             enable_gqa: bool = False) -> torch.Tensor:
        """``F.scaled_dot_product_attention`` ([B, H, N, D]) through :meth:`attention`."""
        return sdpa_int8(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                         processor=self)

    def dispatch(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 attn_mask: Optional[torch.Tensor] = None, dropout_p: float = 0.0,
                 is_causal: bool = False, scale: Optional[float] = None,
                 enable_gqa: bool = False, attention_kwargs: Optional[Dict[str, Any]] = None,
                 *, backend: Any = None, parallel_config: Any = None) -> torch.Tensor:
        """diffusers' ``dispatch_attention_fn`` ([B, N, H, D]) through :meth:`attention` (a
        key-padding mask through ``k_lengths``); what int8attn cannot take (other masks, dropout, context parallelism, other backends' extra
        arguments) goes to the original dispatcher."""
        def original() -> torch.Tensor:
            from diffusers.models.attention_dispatch import dispatch_attention_fn

            return dispatch_attention_fn(query, key, value, attn_mask=attn_mask,
                                         dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                         enable_gqa=enable_gqa,
                                         attention_kwargs=attention_kwargs, backend=backend,
                                         parallel_config=parallel_config)

        if (dropout_p > 0.0 or parallel_config is not None
                or attention_kwargs or query.dim() != 4
                or (is_causal and query.shape[1] != key.shape[1])
                or (query.shape[2] != key.shape[2] and not enable_gqa)):
            self._count("fallback")
            return original()
        if attn_mask is not None:
            mask = attn_mask
            if mask.dim() == 2 and tuple(mask.shape) == (query.shape[0], key.shape[1]):
                # [B, Nk], which diffusers' native backend reads as [B, 1, 1, Nk] (Kandinsky 6)
                mask = mask[:, None, None, :]
            return self._masked(query, key, value, mask, "NHD", is_causal, scale, original)
        return self.attention(query, key, value, layout="NHD", causal=is_causal, scale=scale,
                              fallback_fn=original)

    def _masked(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor, layout: str, causal: bool, scale: Optional[float],
                fallback_fn: Callable[[], torch.Tensor],
                lengths_from: Optional[torch.Tensor] = None) -> torch.Tensor:
        """A call with an attention mask: int8attn with ``k_lengths`` where the mask is a
        key-padding mask, bool or float, the same for every head (:meth:`_KeyLengths.padding`;
        kept keys that are not a prefix are moved to the front first), or a joint padding mask
        over queries and keys (:meth:`_KeyLengths.get_joint`; the masked query rows are
        zeroed, as SDPA leaves them); ``fallback_fn`` otherwise. A call the routing sends to
        SDPA goes there before the mask is read (reading it costs a host synchronisation).
        While ``torch.compile`` traces, a mask of a key-padding or joint padding mask's shape
        becomes one ``int8attn::processor_masked_attention`` node that decides at run time (its
        SDPA fallback is PyTorch's with the mask); other masks trace ``fallback_fn``.
        ``lengths_from``: the mask the lengths are read from when it is not ``mask`` itself
        (the caller's before diffusers repeated it per head: the standard processors)."""
        batch = query.shape[0]
        keys, queries = (key.shape[1], query.shape[1]) if layout == "NHD" else (
            key.shape[2], query.shape[2])
        if _torch_op._is_compiling():
            if not causal and lengths_from is None and (
                    _KeyLengths.shaped(mask, batch, keys, floats=True)
                    or (queries == keys and _KeyLengths.joint_shaped(mask, batch, keys))):
                return _torch_op.processor_masked_attention(query, key, value, mask,
                                                            float(scale or 0.0), layout,
                                                            self._op_id)
            return fallback_fn()
        if causal:
            self._count("fallback")
            return fallback_fn()
        if self.routes_to_sdpa(query, key, layout, self._mode_now()):
            self._count("sdpa_routed")
            return fallback_fn()
        source = lengths_from if lengths_from is not None else mask
        padding = self._key_lengths.padding(source, batch, keys, floats=True, holes=True)
        if padding is None and queries == keys:
            padding = self._key_lengths.get_joint(source, batch, keys)
        if padding is None:
            self._count("fallback")
            return fallback_fn()
        key, value = _kept_keys_first(key, value, layout, padding.order)
        out = self.run(query, key, value, layout=layout, scale=scale, fallback_fn=fallback_fn,
                       out_like_sdpa=True, k_lengths=padding.lengths)
        for b, n in enumerate(padding.rows or ()):  # a joint mask's padded queries: zeros
            (out[b, n:] if layout == "NHD" else out[b, :, n:]).zero_()
        return out


# diffusers' Attention.forward reads inspect.signature(processor.__call__) on every call, to
# filter its keyword arguments: ~35 µs of host time a call on a loaded host, about what the
# attention call itself costs at UNet sizes. A precomputed signature makes that a lookup
# (~9 µs), as Int8SDPAProcessor's does, so a call through the processors costs less host time
# than through diffusers' stock processor (UNet steps are host-bound: 140 calls in SDXL's).
Int8AttnProcessor.__call__.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    Int8AttnProcessor.__call__)

_stock: List[Any] = []


def _stock_processor() -> Any:
    """One shared instance of diffusers' ``AttnProcessor2_0`` (stateless)."""
    if not _stock:
        from diffusers.models.attention_processor import AttnProcessor2_0

        _stock.append(AttnProcessor2_0())
    return _stock[0]


def _call_shape(query: torch.Tensor, key: torch.Tensor, layout: str) -> Tuple[int, ...]:
    """What the routing looks a call up by: (CUDA device or -1, head dim, Nq, Nk, batch × query
    heads), as plain ints (while tracing, shapes are static and these become constants)."""
    n, h = (1, 2) if layout == "NHD" else (2, 1)
    qs, ks = query.shape, key.shape  # each .shape builds a torch.Size: ~0.3 µs of every call
    return (query.get_device() if query.is_cuda else -1, int(qs[-1]), int(qs[n]), int(ks[n]),
            int(qs[0]) * int(qs[h]))


def _static_shapes(*tensors: torch.Tensor) -> bool:
    """Whether every size of ``tensors`` is a constant of the graph being traced. Inside dynamo
    a symbolic size passes ``isinstance(d, int)``, and a constant-folded function such as
    :func:`_route_at_trace` fails on it; a symbolic size has no upper bound the tracer can
    prove, and asking installs no guard (the compiled graph stays dynamic)."""
    return all(statically_known_true(d < 2**62) for t in tensors for d in t.shape)


def _route(route: str, device: int, mode: int, head_dim: int, nq: int, nk: int,
           batch_heads: int) -> bool:
    """Whether a call in ``mode`` (``batch_heads`` = batch × query heads) runs SDPA instead of
    int8attn: on a CUDA ``device`` (-1 = CPU) with ``route="auto"``, EXACT calls always (fp16 attention
    is what SDPA's cuDNN backend is made for), the others where the routing table measured
    int8attn slower; with ``route="sdpa"`` every call, on any device."""
    if route == "sdpa":
        return True
    if route != "auto" or device < 0:
        return False
    if mode == int(Mode.EXACT):
        return True
    return _routing.prefer_sdpa(device, mode, head_dim, nq, nk, batch_heads)


_route_at_trace = _route
if hasattr(torch, "compiler") and hasattr(torch.compiler, "assume_constant_result"):
    # Evaluated once while tracing (plain ints in, shapes are static there); the graph keeps
    # the decision.
    _route_at_trace = torch.compiler.assume_constant_result(_route)


def sdpa_int8(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              attn_mask: Optional[torch.Tensor] = None, dropout_p: float = 0.0,
              is_causal: bool = False, scale: Optional[float] = None, enable_gqa: bool = False,
              *, processor: Optional[Int8AttnProcessor] = None,
              _original: Optional[Callable[..., torch.Tensor]] = None) -> torch.Tensor:
    """A drop-in for ``F.scaled_dot_product_attention`` ([B, H, N, D]) that runs int8attn (with
    ``k_lengths`` for a key-padding mask, :class:`_KeyLengths`) and falls back to the original
    for other masks, dropout, top-left causal with Nq ≠ Nk, inputs that are
    not rank 4, and unsupported cases (counted in the processor's ``stats``)."""
    orig = _original or _ORIGINAL_SDPA
    proc = processor or _default_processor()

    def fb() -> torch.Tensor:
        kw: Dict[str, Any] = {"attn_mask": attn_mask, "dropout_p": dropout_p,
                              "is_causal": is_causal, "scale": scale}
        if enable_gqa:
            kw["enable_gqa"] = True
        return orig(query, key, value, **kw)

    if (dropout_p > 0.0 or query.dim() != 4
            or (is_causal and query.shape[-2] != key.shape[-2])
            or (query.shape[1] != key.shape[1] and not enable_gqa)):
        proc._count("fallback")
        return fb()
    if attn_mask is not None:
        return proc._masked(query, key, value, attn_mask, "HND", is_causal, scale, fb)
    return proc.attention(query, key, value, layout="HND", causal=is_causal, scale=scale,
                          fallback_fn=fb)


_default: List[Int8AttnProcessor] = []


def _default_processor() -> Int8AttnProcessor:
    if not _default:
        _default.append(Int8AttnProcessor())
    return _default[0]


# ---- wrapping other processors ----------------------------------------------------------------
_ROUTED_NAMES = ("scaled_dot_product_attention", "dispatch_attention_fn")
# Marks routed globals whose builtins import int8attn's rotary embedding (lean_builtins).
_LEAN_BUILTINS = "_int8attn_lean_builtins"


def _lean_rotary_for(value: Any) -> Optional[Callable[..., Any]]:
    """int8attn's stand-in for ``value`` where it is one of diffusers' rotary functions a
    processor's module imports or defines (not already int8attn's): ``apply_rotary_emb`` of
    ``diffusers.models.embeddings``, LTX-Video's and LTX-2's own copies of it, or Qwen-Image's
    ``apply_rotary_emb_qwen``; else None."""
    if not callable(value) or getattr(value, "__int8attn_lean__", False):
        return None
    name, module = getattr(value, "__name__", None), str(getattr(value, "__module__", ""))
    if name == "apply_rotary_emb" and module == "diffusers.models.embeddings":
        return lean_apply_rotary_emb(value)
    if (module, name) in FLAT_ROTARY_FUNCTIONS:
        return lean_flat_rotary(value)
    if name == QWEN_ROTARY_NAME and module.startswith("diffusers."):
        return lean_complex_rotary(value)
    return None


def _routed_function(fn: Callable[..., Any], config: Int8AttnProcessor) -> Optional[Callable]:
    """``fn`` (a processor's ``__call__``) with ``F`` and ``dispatch_attention_fn`` in its
    globals bound to ``config``; None when its code names neither (nothing to reroute).
    diffusers' ``apply_rotary_emb``, where its globals hold it, becomes the bit-identical
    :func:`~int8attn._rotary.lean_apply_rotary_emb` (one pass over memory, in eager mode), and so
    does one the code imports inside the call (the new globals' builtins import it,
    :func:`~int8attn._rotary.lean_builtins`); Qwen-Image's ``apply_rotary_emb_qwen`` becomes
    :func:`~int8attn._rotary.lean_complex_rotary`, LTX-Video's and LTX-2's
    :func:`~int8attn._rotary.lean_flat_rotary`; a nested one of Wan's or Z-Image's signature
    becomes :func:`~int8attn._rotary.lean_nested_rotary`'s
    (:func:`~int8attn._rotary.nested_rotary_code`).

    The new globals are the dict of a module registered in ``sys.modules`` under its own name:
    ``torch.compile`` guards a function's globals through the module its ``__name__`` names, so
    they must be that module's, not a loose dict."""
    code = getattr(fn, "__code__", None)
    if code is None or not any(n in code.co_names for n in _ROUTED_NAMES):
        return None
    origin = fn.__globals__
    name = (f"_int8attn_routed_{id(config):x}_"
            f"{str(origin.get('__name__', 'module')).replace('.', '_')}")
    module = sys.modules.get(name)
    if module is None:
        module = types.ModuleType(name)
        module.__dict__.update(origin)
        module.__dict__["__name__"] = name
        rebound = False
        for key, value in origin.items():
            if value is F:  # the module, under whatever name the processor's file imported it
                proxy = types.ModuleType(F.__name__)
                proxy.__dict__.update(F.__dict__)
                proxy.scaled_dot_product_attention = config.sdpa
                module.__dict__[key] = proxy
                rebound = True
            elif getattr(value, "__name__", None) == "dispatch_attention_fn" and callable(value):
                module.__dict__[key] = config.dispatch
                rebound = True
            elif (lean := _lean_rotary_for(value)) is not None:
                module.__dict__[key] = lean
        if not rebound:
            return None
        sys.modules[name] = module
        weakref.finalize(config, sys.modules.pop, name, None)
    if ("apply_rotary_emb" in code.co_names and "apply_rotary_emb" not in origin
            and not module.__dict__.get(_LEAN_BUILTINS)):  # imported inside the call
        module.__dict__["__builtins__"] = lean_builtins(origin.get("__builtins__", builtins))
        module.__dict__[_LEAN_BUILTINS] = True
    nested = nested_rotary_code(code)
    if nested is not None:
        code, original, global_name = nested
        if global_name not in module.__dict__:
            module.__dict__[global_name] = lean_nested_rotary(
                global_name, types.FunctionType(original, origin, "apply_rotary_emb"))
    new = types.FunctionType(code, module.__dict__, fn.__name__, fn.__defaults__,
                             fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    return new


_patch_lock = threading.RLock()


class Int8SDPAProcessor:
    """Wraps another diffusers processor (Flux, SD3 joint attention, video DiTs, …) so that its
    attention runs through int8attn. The wrapped processor's ``__call__`` runs with
    ``F.scaled_dot_product_attention`` and ``dispatch_attention_fn`` bound to ``config`` in
    its own globals (compile-friendly, no global state). A processor whose code calls neither
    by name is run with ``F.scaled_dot_product_attention`` patched for the duration of the
    call instead (under a lock), in eager mode; under ``torch.compile`` it runs as it is (its
    attention, if any, stock). The wrapper advertises the wrapped processor's call signature,
    so diffusers passes it the same keyword arguments (e.g. ``image_rotary_emb``).

    Args:
        inner: The processor to wrap.
        config: The :class:`Int8AttnProcessor` holding mode, policy, routing and stats.
    """

    def __init__(self, inner: Any, config: Int8AttnProcessor) -> None:
        self.inner = inner
        self.config = config
        call = type(inner).__call__
        self._routed = _routed_function(call, config)
        sig = inspect.signature(call)

        def __call__(self: "Int8SDPAProcessor", *args: Any, **kwargs: Any) -> Any:
            return Int8SDPAProcessor._run(self, *args, **kwargs)

        __call__.__signature__ = sig  # type: ignore[attr-defined]
        self.__class__ = type(f"Int8SDPAProcessor[{type(inner).__name__}]",
                              (Int8SDPAProcessor,), {"__call__": __call__})

    def __getattr__(self, name: str) -> Any:
        # diffusers reads attributes of its processors (_attention_backend, _parallel_config)
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        if self._routed is not None:
            return self._routed(self.inner, *args, **kwargs)
        if _torch_op._is_compiling():
            # dynamo cannot enter the lock (a graph break on every call: Sana's linear-attention
            # processors, which call no SDPA at all, broke its graph 9 times in two blocks), so
            # while tracing such a processor runs as it is
            return self.inner(*args, **kwargs)
        with _patch_lock:
            F.scaled_dot_product_attention = self.config.sdpa
            try:
                return self.inner(*args, **kwargs)
            finally:
                F.scaled_dot_product_attention = _ORIGINAL_SDPA

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # replaced per instance
        return self._run(*args, **kwargs)


_STANDARD_PROCESSORS = {"AttnProcessor", "AttnProcessor2_0", "XFormersAttnProcessor",
                        "AttnProcessorNPU", "Int8AttnProcessor"}
# The query/key normalizations of an attention module; the RMS ones among them get the one-pass
# forward of _norms.py.
_QK_NORMS = ("norm_q", "norm_k", "norm_added_q", "norm_added_k")
# SD3's joint attention: replaced by int8attn's own version (_joint.py), which joins the image
# and text tokens without the stock processor's gather over transposed views.
_JOINT_PROCESSORS = {"JointAttnProcessor2_0", "Int8JointAttnProcessor"}


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


def _processor_setter(m: torch.nn.Module) -> Optional[Callable[[Any], None]]:
    """How to give attention module ``m`` another processor: its ``set_processor`` (diffusers'
    ``Attention`` and ``AttentionModuleMixin``); for a module that only holds one of diffusers'
    attention processors in ``.processor`` and calls it from its forward (Mochi's
    ``MochiAttention`` has no ``set_processor``), assigning the attribute; None for any other
    module."""
    if not hasattr(m, "processor"):
        return None
    setter = getattr(m, "set_processor", None)
    if callable(setter):
        return setter
    cur = m.processor
    if isinstance(cur, Int8SDPAProcessor):
        cur = cur.inner
    kind = type(cur)
    if (cur is None or not callable(cur) or not kind.__module__.startswith("diffusers.")
            or "AttnProcessor" not in kind.__name__):
        return None
    return lambda new: setattr(m, "processor", new)


def replace_attention_with_int8(pipe_or_module: Any, *, mode: ModeLike = None,
                                policy: Optional[TimestepPolicy] = None,
                                num_inference_steps: Optional[int] = None,
                                fallback: bool = True, wrap_other_processors: bool = True,
                                route: str = "auto", cache_text_kv: bool = False) -> Any:
    """Swap the attention processors of a diffusers pipeline (or any ``nn.Module``) for
    int8attn ones.

    Every module with a ``set_processor`` method and a ``processor`` attribute is changed (and
    every module holding one of diffusers' attention processors in ``processor`` without a
    ``set_processor``, as Mochi's does):
    standard processors (``AttnProcessor2_0`` and friends) become one shared
    :class:`Int8AttnProcessor`; SD3's ``JointAttnProcessor2_0`` becomes an
    :class:`~int8attn._joint.Int8JointAttnProcessor` over it (both counted as swapped); others
    (the rotary processors of Flux and the video DiTs, …) are wrapped in
    :class:`Int8SDPAProcessor` when ``wrap_other_processors``. The query/key normalizations of
    every changed module that are diffusers' ``RMSNorm`` (SD3.5, HunyuanVideo, Qwen-Image, …)
    or ``torch.nn.RMSNorm`` over per-head rows (Flux) get a one-pass forward by
    :func:`int8attn.rms_norm` (``int8attn._norms``: CUDA tensors in
    eager mode, while the module's processor is int8attn's; a 16-bit result at most two
    last-place units from diffusers' own in about one element in 10⁵).

    Args:
        pipe_or_module: A diffusers pipeline (its ``components``) or a module.
        mode: "exact", "balanced" or "fast". Without ``policy``: the mode of every call, or
            with ``num_inference_steps`` the mode of the policy's ordinary steps; None
            (default) means "balanced" there. With ``policy``: None lets the policy decide; an
            explicit mode wins over it (see :class:`Int8AttnProcessor`, a
            :class:`~int8attn.ModeOverridesPolicyWarning`).
        policy: Optional :class:`~int8attn.TimestepPolicy` over sampler step indices.
        num_inference_steps: Build a policy with this many steps (first and last step EXACT,
            the rest ``mode``); not together with ``policy``.
        fallback: Use PyTorch SDPA for calls int8attn cannot take (masks, …).
        wrap_other_processors: Also wrap non-standard processors.
        route: "auto" (default) runs SDPA on the call shapes int8attn is measured slower on
            (see :class:`Int8AttnProcessor`); "always" runs int8attn wherever it can;
            "sdpa" runs every attention call in SDPA and keeps the rest of the swap (an A/B of
            int8attn's attention inside a step).
        cache_text_kv: Reuse projected text K/V across steps (see :class:`Int8AttnProcessor`).

    Returns:
        ``pipe_or_module`` itself; the shared processor is at ``._int8attn_processor`` (its
        ``stats`` count the swapped and wrapped modules and the lean norms; use
        :func:`set_timestep`, or ``callback_on_step_end=proc.callback_on_step_end``).

    Raises:
        ValueError: both ``policy`` and ``num_inference_steps``.

    Warns:
        UserWarning: no attention module was found (nothing changed).
    """
    if policy is not None and num_inference_steps is not None:
        raise ValueError("num_inference_steps: give either a policy or num_inference_steps "
                         "(to build one), not both")
    if num_inference_steps is not None:
        # The built policy carries `mode` for its ordinary steps, so the processor lets it
        # decide (mode=None) instead of overriding it.
        policy = TimestepPolicy(num_inference_steps,
                                default_mode=mode if mode is not None else "balanced")
        mode = None
    from ._joint import Int8JointAttnProcessor  # (it imports this module)

    proc = Int8AttnProcessor(mode=mode, policy=policy, fallback=fallback, route=route,
                             cache_text_kv=cache_text_kv)
    swapped = wrapped = norms = 0
    for m in _iter_modules(pipe_or_module):
        set_processor = _processor_setter(m)
        if set_processor is None:
            continue
        cur = m.processor
        if isinstance(cur, Int8SDPAProcessor):
            cur = cur.inner
        name = type(cur).__name__ if cur is not None else "AttnProcessor2_0"
        if name in _STANDARD_PROCESSORS:
            set_processor(proc)
            swapped += 1
        elif name in _JOINT_PROCESSORS:
            set_processor(Int8JointAttnProcessor(proc))
            swapped += 1
        elif wrap_other_processors:
            set_processor(Int8SDPAProcessor(cur, proc))
            wrapped += 1
        else:
            continue
        norms += sum(install_lean_norm(getattr(m, n, None), m) for n in _QK_NORMS)
    proc.stats["swapped_modules"] = swapped
    proc.stats["wrapped_modules"] = wrapped
    proc.stats["lean_norms"] = norms
    if swapped + wrapped == 0:
        # Most likely not a diffusers model/pipeline (or one without attention processors):
        # the caller would otherwise see stock speed and no error.
        warnings.warn(f"replace_attention_with_int8: found no attention module (a module with "
                      f"set_processor() and .processor, or holding a diffusers attention "
                      f"processor) in {type(pipe_or_module).__name__}; nothing was changed",
                      UserWarning, stacklevel=2)
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
        if not isinstance(p, Int8AttnProcessor):  # a wrapper or a joint processor: its config
            p = getattr(p, "config", None)
        if isinstance(p, Int8AttnProcessor):
            p.set_timestep(step)
