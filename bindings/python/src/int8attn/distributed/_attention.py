"""``int8attn.distributed.attention``: one entry point for the ring, Ulysses and hybrid
variants (see the package docstring for what each sends)."""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from ._mesh import SequenceParallel
from ._ring import ring_attention
from ._shards import Packing, Shards
from ._split import zigzag_layout
from ._ulysses import gather_heads, scatter_heads

# Arguments of int8attn.attention that this layer sets itself.
_RESERVED = ("k_lengths", "block_mask", "mask_block", "return_lse", "out", "layout")

_meshes: Dict[Tuple[int, str, Optional[int]], SequenceParallel] = {}


def _mesh(group: Any, variant: str, ulysses_degree: Optional[int]) -> SequenceParallel:
    if isinstance(group, SequenceParallel):
        return group
    if variant == "hybrid":
        raise ValueError("group: variant='hybrid' creates sub-groups; build "
                         "SequenceParallel(group, variant='hybrid', ulysses_degree=...) once on "
                         "every process and pass it as group")
    # Ring and Ulysses create no process groups: describe each group once and reuse it (the
    # identity check guards against a new group reusing a destroyed one's id).
    import torch.distributed as dist

    if group is None and dist.is_available() and dist.is_initialized():
        group = dist.group.WORLD
    key = (id(group), variant, ulysses_degree)
    sp = _meshes.get(key)
    if sp is None or sp.group is not group:
        sp = _meshes[key] = SequenceParallel(group, variant=variant,
                                             ulysses_degree=ulysses_degree)
    return sp


def _check_shapes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name}: expected rank 4, got shape {tuple(t.shape)}")
    if k.shape != v.shape:
        raise ValueError(f"v: shape {tuple(v.shape)} differs from k's {tuple(k.shape)}")
    if k.shape[0] != q.shape[0] or k.shape[3] != q.shape[3]:
        raise ValueError(f"k: batch and head dim must match q's ({tuple(q.shape)}), got "
                         f"{tuple(k.shape)} (in [B, H, N, D] order)")
    if k.shape[2] != q.shape[2]:
        raise ValueError(f"k: this rank holds {q.shape[2]} query tokens but {k.shape[2]} keys; "
                         "sequence-parallel self-attention shards q, k and v alike (run "
                         "cross-attention with replicated K/V through int8attn.attention)")
    if q.shape[1] % k.shape[1] != 0:
        raise ValueError(f"k: {k.shape[1]} key/value heads do not divide the {q.shape[1]} "
                         "query heads")


def _heads_for_ulysses(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       degree: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """K/V with a head count the Ulysses degree divides: GQA/MQA K/V heads are repeated (each
    rank then gets the K/V heads its query heads use) when fewer than the degree."""
    hq, hkv = q.shape[1], k.shape[1]
    if hq % degree != 0:
        raise ValueError(f"q: {hq} query heads do not divide by the Ulysses degree {degree}; "
                         "use variant='ring', or 'hybrid' with a ulysses_degree dividing the "
                         "head count")
    if hkv % degree == 0:
        return k, v
    # U divides Hq = G·Hkv, so rep = U/gcd(Hkv, U) divides the group size G: after the repeat
    # every rank's query heads still find their own K/V heads among its K/V heads.
    rep = degree // math.gcd(hkv, degree)
    return k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group: Any = None, *,
              variant: str = "ring", ulysses_degree: Optional[int] = None,
              mode: Any = "balanced", causal: bool = False, sm_scale: Optional[float] = None,
              layout: str = "HND", shard_lengths: Any = None, valid_lengths: Any = None,
              return_lse: bool = False, out: Optional[torch.Tensor] = None,
              kernel: Optional[Callable[..., Any]] = None, zigzag: bool = False,
              **options: Any) -> Any:
    """Sequence-parallel self-attention: this rank's chunk of the queries against every rank's
    keys, with int8attn as the per-rank kernel.

    Rank p of ``group`` holds chunk p of the sequence (rank order = sequence order). The result
    equals :func:`int8attn.attention` on the whole sequence (EXACT: to fp32 rounding; BALANCED
    and FAST: within the mode's accuracy, since INT8/FP8 scales come from each rank's data).

    Args:
        q: This rank's queries [B, Hq, n, D] ("HND") or [B, n, Hq, D] ("NHD"), torch.
        k: This rank's keys, [B, Hkv, n, D] (or NHD); Hq a multiple of Hkv.
        v: This rank's values, same shape as ``k``.
        group: A ``ProcessGroup`` (None = world) or a :class:`SequenceParallel` (required for
            "hybrid", and the way to reuse one description across calls).
        variant: "ring", "ulysses" or "hybrid" (ignored when ``group`` is a SequenceParallel).
        ulysses_degree: See :class:`SequenceParallel`.
        mode: "exact", "balanced", "fast" or None (the ``policy``'s mode, passed in options).
        causal: Causal mask over the global sequence.
        sm_scale: Softmax scale; None = 1/sqrt(D).
        layout: "HND" or "NHD", for q, k, v and the output.
        shard_lengths: Tokens held by each rank, in rank order (uneven shards); None = every
            rank holds as many as this one. Must be the same on every rank.
        valid_lengths: Valid tokens at the start of each rank's shard, in rank order: one int
            per rank, or one sequence of B ints per rank (the rest is padding: never a key,
            output rows zero, LSE −inf). None = no padding. Same on every rank.
        return_lse: Also return the float32 natural-log LSE [B, Hq, n] of this rank's rows.
        out: Optional output, same shape/layout/dtype as ``q``.
        kernel: The per-rank attention; None = :func:`int8attn.attention`. Another function
            (bench/distributed.py passes PyTorch SDPA) is called as ``kernel(q, k, v,
            causal=..., k_lengths=..., return_lse=True, mode=..., sm_scale=..., **options)``
            with [B, H, N, D] tensors and must return ``(o, lse)`` with the library's
            conventions (natural-log LSE of the scaled scores, float32 [B, Hq, N]).
        zigzag: The ranks hold the zigzag split of :func:`shard_sequence` (``zigzag=True``):
            causal rings are then load-balanced. ``shard_lengths`` must be that split's (it
            defines the sequence length); no ``valid_lengths``.
        **options: Passed to each :func:`int8attn.attention` call (policy, timestep, context,
            k_granularity, smooth_k, …).

    Returns:
        The output (like ``q``), or ``(out, lse)`` with ``return_lse``.
    """
    bad = [name for name in _RESERVED if name in options]
    if bad:
        raise ValueError(f"{bad[0]}: set by int8attn.distributed itself; not accepted here")
    lay = layout.upper()
    if lay not in ("HND", "NHD"):
        raise ValueError(f"layout: expected 'HND' or 'NHD', got {layout!r}")
    if lay == "NHD":  # views: the library reads strides, nothing is copied here
        q, k, v = (t.transpose(1, 2) if isinstance(t, torch.Tensor) else t for t in (q, k, v))
    _check_shapes(q, k, v)
    sp = _mesh(group, variant, ulysses_degree)
    batch, n = q.shape[0], q.shape[2]
    shards = Shards.build(shard_lengths, valid_lengths, local_len=n, batch=batch,
                          size=sp.size, rank=sp.rank)
    options = dict(options, mode=mode, sm_scale=sm_scale)
    halves = _zigzag_halves(sp, shards) if zigzag else None
    u_deg = sp.ulysses_degree
    packing = None
    if u_deg > 1:
        k, v = _heads_for_ulysses(q, k, v, u_deg)
        seq = [shards.lengths[p] for p in sp.ulysses_members]
        q, k, v = scatter_heads([q, k, v], sp.ulysses_group, seq, sp.ulysses_pos)
        ring_shards = _ring_shards(sp, shards, batch)
        if shards.padded(sp.ulysses_members):
            packing = Packing(shards, sp.ulysses_members, batch, q.device)
            q, k, v = packing.pack(q), packing.pack(k), packing.pack(v)
    else:
        ring_shards = shards
    o, lse = ring_attention(q, k, v, group=sp.ring_group, global_ranks=sp.ring_global_ranks,
                            me=sp.ring_pos, shards=ring_shards, causal=causal, options=options,
                            kernel=kernel, halves=halves)
    o = o.to(q.dtype)
    if u_deg > 1:
        if packing is not None:
            o = packing.unpack(o)
            lse = packing.unpack(lse, float("-inf"))
        seq = [shards.lengths[p] for p in sp.ulysses_members]
        o = gather_heads(o, sp.ulysses_group, seq, sp.ulysses_pos)
        lse = gather_heads(lse, sp.ulysses_group, seq, sp.ulysses_pos) if return_lse else None
    if out is None:
        out = o.transpose(1, 2) if lay == "NHD" else o  # o is a fresh tensor: no copy
    else:
        (out.transpose(1, 2) if lay == "NHD" else out).copy_(o)
    return (out, lse) if return_lse else out


def _ring_shards(sp: SequenceParallel, shards: Shards, batch: int) -> Shards:
    """Shard and valid lengths of each ring position after the Ulysses exchange: position g
    holds Ulysses group g's sub-sequence, packed (valid tokens first) if it has padding."""
    lengths: List[int] = []
    valid: List[List[int]] = []
    u_deg = sp.ulysses_degree
    for g in range(sp.ring_degree):
        members = [g * u_deg + i for i in range(u_deg)]
        totals = [sum(shards.valid_of(p, batch)[b] for p in members) for b in range(batch)]
        if shards.padded(members):
            lengths.append(max(1, max(totals)))
        else:
            lengths.append(sum(shards.lengths[p] for p in members))
        valid.append(totals)
    return Shards(lengths, valid if shards.valid is not None else None)


def _zigzag_halves(sp: SequenceParallel, shards: Shards) -> List[int]:
    """First-chunk tokens of each ring position, after checking that the ranks hold the zigzag
    split of the sequence their shard lengths add up to."""
    if shards.valid is not None:
        raise ValueError("valid_lengths: padding is not supported with zigzag=True")
    lengths, halves = zigzag_layout(sum(shards.lengths), sp.ring_degree, sp.ulysses_degree)
    if lengths != shards.lengths:
        raise ValueError(f"shard_lengths: zigzag=True needs the split of shard_sequence("
                         f"{sum(shards.lengths)}, zigzag=True), {lengths}; got {shards.lengths}")
    return halves
