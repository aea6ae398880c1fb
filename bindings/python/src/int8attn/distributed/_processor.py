"""A diffusers attention processor for sequence-parallel models.

It is :class:`~int8attn.Int8AttnProcessor` (same call signature and projections, same
mode/policy handling) with the self-attention call replaced by
:func:`int8attn.distributed.attention` over a process group. The model wrapper around it must
already shard ``hidden_states`` along the sequence (rank p holds chunk p); cross-attention K/V
(``encoder_hidden_states``: text tokens, not sharded) stay local, with no communication.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

import torch

from .._api import ModeLike, TimestepPolicy
from .._processors import Int8AttnProcessor
from ._attention import attention as _sp_attention
from ._mesh import SequenceParallel


class Int8DistributedAttnProcessor(Int8AttnProcessor):
    """``Int8AttnProcessor`` whose self-attention is sequence-parallel over ``group``.

    Args:
        group: A ``ProcessGroup`` (None = world) or a :class:`SequenceParallel`.
        variant: "ring", "ulysses" or "hybrid" (see :class:`SequenceParallel`).
        ulysses_degree: For "hybrid".
        mode: Precision without a policy ("balanced" by default).
        policy: Optional :class:`~int8attn.TimestepPolicy` (set the step with
            :meth:`set_timestep`, as for Int8AttnProcessor).
        shard_lengths: Tokens held by each rank when the shards are uneven (see
            :func:`int8attn.distributed.attention`); None = all equal.
        causal: Causal self-attention (diffusion models: False).

    Self-attention never falls back to PyTorch SDPA (SDPA on the local shard alone would be
    wrong); attention masks are refused. Eager mode only (not traced by ``torch.compile``).
    ``stats["distributed"]`` counts the sequence-parallel calls, ``stats["int8attn"]`` the local
    cross-attention calls.
    """

    def __init__(self, group: Any = None, *, variant: str = "ring",
                 ulysses_degree: Optional[int] = None, mode: ModeLike = "balanced",
                 policy: Optional[TimestepPolicy] = None, shard_lengths: Any = None,
                 causal: bool = False) -> None:
        # route="always": routing to SDPA would be per shard, and a shard is not the sequence.
        super().__init__(mode=mode, policy=policy, fallback=True, route="always")
        self.sp = group if isinstance(group, SequenceParallel) else SequenceParallel(
            group, variant=variant, ulysses_degree=ulysses_degree)
        self.shard_lengths = shard_lengths
        self.causal = bool(causal)
        self.stats["distributed"] = 0
        self._call = threading.local()

    def __call__(self, attn: Any, hidden_states: torch.Tensor,
                 encoder_hidden_states: Optional[torch.Tensor] = None,
                 attention_mask: Optional[torch.Tensor] = None,
                 temb: Optional[torch.Tensor] = None, *args: Any, **kwargs: Any) -> torch.Tensor:
        """As ``Int8AttnProcessor.__call__``, on this rank's sequence chunk."""
        if attention_mask is not None:
            raise ValueError("attention_mask: not supported by sequence-parallel attention "
                             "(pass padding as valid lengths to int8attn.distributed.attention)")
        # The base class calls self.attention() for both kinds; remember which one this is.
        self._call.cross = encoder_hidden_states is not None
        try:
            return super().__call__(attn, hidden_states, encoder_hidden_states, None, temb,
                                    *args, **kwargs)
        finally:
            self._call.cross = False

    def attention(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *,
                  layout: str, causal: bool = False, scale: Optional[float] = None,
                  fallback_fn: Optional[Callable[[], torch.Tensor]] = None) -> torch.Tensor:
        """Self-attention through the process group; cross-attention locally."""
        if getattr(self._call, "cross", False):
            return self.run(query, key, value, layout=layout, causal=causal, scale=scale,
                            fallback_fn=None)
        use_policy = self.policy is not None and self.timestep is not None
        opts: dict = {}
        if use_policy:
            opts = {"policy": self.policy, "timestep": self.timestep}
        # GPU kernels take fp16/bf16; fp32 CUDA activations run in bf16 (as Int8AttnProcessor).
        cd = torch.bfloat16 if query.is_cuda and query.dtype == torch.float32 else None
        q, k, v = (query, key, value) if cd is None else (query.to(cd), key.to(cd), value.to(cd))
        o = _sp_attention(q, k, v, self.sp, mode=None if use_policy else self._mode_now(),
                          causal=causal or self.causal, sm_scale=scale, layout=layout,
                          shard_lengths=self.shard_lengths, **opts)
        self._count("distributed")
        return o if cd is None else o.to(query.dtype)
