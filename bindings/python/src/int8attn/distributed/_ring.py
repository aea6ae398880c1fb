"""Ring attention: K/V shards travel around the ring while the current shard is computed.

At step t, ring position r holds the K/V of position s = (r − t) mod R. It starts sending that
shard to r+1 and receiving the next one from r−1 (``batch_isend_irecv``), computes attention of
its queries against the shard it holds (int8attn, with the LSE), waits for the transfer, and
merges the partial result into its running (output, LSE) with :func:`merge_partials`.

Causal: position s holds sequence chunk s, so shard s is in the future of every query of
r < s (skipped), is the diagonal block at s = r (causal, top-left = bottom-right since the block
is square) and is fully in the past for s < r (non-causal). Shard s is therefore needed only by
positions s … R−1, and it stops there instead of going on around the ring: position r sends at
steps t ≤ r (r < R−1) and receives at steps t < r, which halves the bytes on the wire. With this
contiguous split position R−1 computes R blocks and position 0 one; the zigzag split
(``halves``) balances that: every position computes about half a block per step and every
shard goes all the way round.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from .._api import attention as _attention
from ._merge import merge_partials
from ._shards import Shards


def _valid_mask(shards: Shards, me: int, batch: int, device: torch.device) -> torch.Tensor:
    """[B, n] True where the token of shard ``me`` is valid."""
    n = shards.lengths[me]
    lengths = torch.tensor(shards.valid_of(me, batch), device=device).unsqueeze(1)
    return torch.arange(n, device=device).unsqueeze(0) < lengths


def _blocks(causal: bool, halves: Optional[List[int]], s: int, me: int, n_me: int
            ) -> Optional[Tuple[slice, slice, bool]]:
    """(query rows, keys, causal) of the block of ring position ``me`` against shard ``s``, or
    None when no query sees any of its keys.

    Contiguous split (``halves`` None): position s holds chunk s; see the module docstring.
    Zigzag split (``halves[p]`` = tokens of position p's first chunk): position p holds chunks
    p and 2R−1−p of 2R, in that order. Then shard s < me: only its first chunk (s) is in the
    past of all my rows, its second chunk (2R−1−s) in the future of all; s > me: only my second
    chunk sees it, and all of it; s = me: causal over the two chunks in order. Every step does
    about half a block of work, on every position."""
    everything = slice(None)
    if not causal:
        return everything, everything, False
    if s == me:
        return everything, everything, True
    if halves is None:
        return (everything, everything, False) if s < me else None
    if s < me:
        return everything, slice(0, halves[s]), False
    return slice(halves[me], n_me), everything, False


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, group: Any,
                   global_ranks: List[int], me: int, shards: Shards, causal: bool,
                   options: Dict[str, Any], kernel: Optional[Callable[..., Any]] = None,
                   halves: Optional[List[int]] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Attention of this position's queries over every position's keys.

    Args:
        q: [B, Hq, n_me, D] (HND view, any strides the library takes).
        k: [B, Hkv, n_me, D].
        v: Same shape as ``k``.
        group: The ring's ProcessGroup (None when the ring has one position).
        global_ranks: Global rank of each ring position (P2P peers).
        me: This process's ring position.
        shards: Shard and valid lengths per ring position.
        causal: Causal over the global sequence.
        options: Passed to every :func:`int8attn.attention` call (mode, sm_scale, …).
        kernel: The per-block attention (default :func:`int8attn.attention`), called as
            ``kernel(q, k, v, causal=, k_lengths=, return_lse=True, **options)``.
        halves: Zigzag split: tokens of each position's first chunk (see :func:`_blocks`);
            None = contiguous split. Not with padding (``shards.valid`` must be None).

    Returns:
        ``(o, lse)``: o [B, Hq, n_me, D] (float32 after a merge, else q's dtype) and the fp32
        natural-log LSE [B, Hq, n_me]. Padding rows have o = 0 and lse = −inf.
    """
    import torch.distributed as dist

    kernel = kernel or _attention
    size = len(global_ranks)
    batch, n_me = q.shape[0], q.shape[2]
    zigzag = causal and halves is not None
    k_lengths: Dict[int, Optional[torch.Tensor]] = {}

    def lengths_of(s: int) -> Optional[torch.Tensor]:
        if shards.valid is None:
            return None
        if s not in k_lengths:
            k_lengths[s] = torch.tensor(shards.valid[s], dtype=torch.int32, device=q.device)
        return k_lengths[s]

    # K and V travel as one tensor: one message per hop instead of two.
    cur: Optional[torch.Tensor] = torch.stack((k, v)) if size > 1 else None
    acc_o: Optional[torch.Tensor] = None
    acc_lse: Optional[torch.Tensor] = None
    for t in range(size):
        s = (me - t) % size
        nxt = None
        reqs: list = []
        if t < size - 1:
            # A contiguous causal split needs shard s only at positions s … R−1 (see above).
            send = not causal or zigzag or (me < size - 1 and t <= me)
            recv = not causal or zigzag or (me >= 1 and t < me)
            ops = []
            if send:
                ops.append(dist.P2POp(dist.isend, cur, global_ranks[(me + 1) % size], group))
            if recv:
                sn = (me - t - 1) % size
                shape = (2, batch, k.shape[1], shards.lengths[sn], k.shape[3])
                nxt = k.new_empty(shape)
                ops.append(dist.P2POp(dist.irecv, nxt, global_ranks[(me - 1) % size], group))
            if ops:
                reqs = dist.batch_isend_irecv(ops)
        block = _blocks(causal, halves, s, me, n_me)
        if block is not None:
            rows, keys, block_causal = block
            kc, vc = (k, v) if t == 0 else (cur[0], cur[1])  # type: ignore[index]
            # Causal diagonal block: rows i < valid length see only keys j ≤ i, all valid, so
            # no key lengths are needed (and the library's bottom-right alignment would shift
            # the diagonal if they were given).
            kl = None if block_causal else lengths_of(s)
            o_t, lse_t = kernel(q[:, :, rows], kc[:, :, keys], vc[:, :, keys],
                                causal=block_causal, k_lengths=kl, return_lse=True, **options)
            if acc_o is None:  # step 0, the diagonal block: every row
                acc_o, acc_lse = o_t, lse_t
            elif rows == slice(None):
                acc_o, acc_lse = merge_partials(acc_o, acc_lse, o_t, lse_t)
            else:  # zigzag: only the second chunk's rows see this shard
                acc_o = acc_o.float()
                acc_o[:, :, rows], acc_lse[:, :, rows] = merge_partials(  # type: ignore[index]
                    acc_o[:, :, rows], acc_lse[:, :, rows], o_t, lse_t)  # type: ignore[index]
        for r in reqs:
            r.wait()
        cur = nxt
    assert acc_o is not None and acc_lse is not None  # the diagonal step always runs
    if shards.valid is not None:
        valid = _valid_mask(shards, me, batch, q.device).unsqueeze(1)  # [B, 1, n]
        acc_o = acc_o.masked_fill(~valid.unsqueeze(-1), 0.0)
        acc_lse = acc_lse.masked_fill(~valid, float("-inf"))
    return acc_o, acc_lse
