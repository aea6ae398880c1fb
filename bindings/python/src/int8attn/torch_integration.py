"""PyTorch integration: a custom op, the ``Int8Attention`` module and diffusers processors.

Importing this module imports torch (``import int8attn`` alone does not; the names below are
reachable as ``int8attn.Int8Attention`` etc. and import this module on first use).

- ``torch.ops.int8attn.attention`` — a ``torch.library`` op with a fake (meta) implementation,
  so ``torch.compile(fullgraph=True)`` traces through it without graph breaks
  (:mod:`int8attn._torch_op`).
- :class:`Int8Attention` — the seeds' module: ``Int8Attention(num_heads, head_dim,
  num_timesteps=1000, use_adaptive_scaling=True, timestep_scales=None)``, ``forward(Q, K, V,
  timestep)``.
- :class:`Int8AttnProcessor`, :class:`Int8JointAttnProcessor`, :class:`Int8SDPAProcessor`,
  :func:`replace_attention_with_int8`, :func:`set_timestep`, :func:`sdpa_int8` — diffusers
  processors (:mod:`int8attn._processors`, :mod:`int8attn._joint`).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import torch

from . import _lib
from ._api import Mode, ModeLike, TimestepPolicy, parse_mode
from ._processors import (Int8AttnProcessor, Int8SDPAProcessor, replace_attention_with_int8,
                          sdpa_int8, set_timestep, _compute_dtype)
from ._processors import _ORIGINAL_SDPA  # noqa: F401 - the unpatched SDPA, for tests
from ._joint import Int8JointAttnProcessor
from ._torch_op import attention_op, call as _call_op_raw

__all__ = [
    "attention_op", "Int8Attention", "Int8AttnProcessor", "Int8JointAttnProcessor",
    "Int8SDPAProcessor", "replace_attention_with_int8", "set_timestep", "sdpa_int8",
]


def _call_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mode: int, causal: bool,
             sm_scale: Optional[float], layout: str, policy: Optional[TimestepPolicy],
             timestep: Optional[int]) -> torch.Tensor:
    ph = policy.handle if policy is not None else 0
    t = int(timestep) if (policy is not None and timestep is not None) else -1
    if ph and t < 0:
        t = 0
    return _call_op_raw(q, k, v, int(mode), bool(causal), sm_scale, layout, ph, t)


def _timestep_index(timestep: Any, num_timesteps: int) -> Optional[int]:
    """The policy's step for a diffusion ``timestep`` in [0, num_timesteps]: ``num_timesteps``
    itself maps to the last step (flow-matching schedulers start at t = 1000·σ with σ = 1);
    anything further out is an error rather than silently the first or last step."""
    if timestep is None:
        return None
    if isinstance(timestep, torch.Tensor):
        # Reading a device tensor synchronises with the host, which ends a CUDA graph capture
        # with an error that names neither the argument nor a remedy.
        if timestep.device.type != "cpu" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                f"timestep: a {timestep.device.type} tensor cannot be read while a CUDA graph is "
                "capturing (reading it waits for the device); pass the step as a Python int or "
                "a CPU tensor (the graph then replays that step's mode at every replay), or "
                "build Int8Attention(use_adaptive_scaling=False) for one mode at every step")
        timestep = timestep.flatten()[0].item() if timestep.numel() else None
        if timestep is None:
            return None
    t = int(timestep)
    if not 0 <= t <= num_timesteps:
        raise ValueError(
            f"timestep: {timestep} is outside [0, {num_timesteps}] (this module's "
            f"num_timesteps={num_timesteps}); build Int8Attention(num_timesteps=...) over the "
            "range the scheduler's timesteps take (1000 for diffusers' schedulers), or pass "
            "timestep=None to run `mode` without the policy")
    return min(t, num_timesteps - 1)


# ---- the module -----------------------------------------------------------------------------
class Int8Attention(torch.nn.Module):
    """Multi-head attention with INT8 Q·Kᵀ (the seeds' ``Int8Attention`` API).

    Args:
        num_heads: Number of query heads (checked against the inputs).
        head_dim: Head dimension D (a multiple of 8 in [8, 256]; anything else raises
            ValueError here, not at the first call).
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
        # Checked here, once, rather than as a library error on the first forward call.
        if int(num_heads) < 1:
            raise ValueError(f"num_heads: expected a positive number of heads, got {num_heads}")
        if not (int(head_dim) % 8 == 0 and 8 <= int(head_dim) <= _lib.MAX_HEAD_DIM):
            raise ValueError(f"head_dim: {head_dim} is not supported; int8attn takes multiples "
                             f"of 8 in [8, {_lib.MAX_HEAD_DIM}] (pad the heads to the next one)")
        if int(num_timesteps) < 1:
            raise ValueError(f"num_timesteps: expected at least 1, got {num_timesteps}")
        if str(layout).upper() not in ("HND", "NHD"):
            raise ValueError(f"layout: expected 'HND' or 'NHD', got {layout!r}")
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
                selects mode and scale multiplier; ``num_timesteps`` itself counts as the last
                step, anything outside [0, num_timesteps] raises ValueError); None = ``mode``
                for every call.

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
