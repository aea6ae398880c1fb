"""Ulysses: all-to-all between sequence shards and head shards.

Before attention each rank holds its chunk of the sequence for all heads; after
:func:`scatter_heads` it holds the whole sequence of its Ulysses group for 1/U of the heads
(the chunks in rank order), so attention needs no further communication. :func:`gather_heads`
is the inverse, for the output (and the LSE).
"""

from __future__ import annotations

from typing import Any, List, Sequence

import torch


def _all_to_all(recv: torch.Tensor, send: torch.Tensor, recv_splits: List[int],
                send_splits: List[int], group: Any) -> None:
    import torch.distributed as dist

    even = len(set(recv_splits)) == 1 and len(set(send_splits)) == 1
    dist.all_to_all_single(recv, send, None if even else recv_splits,
                           None if even else send_splits, group=group)


def scatter_heads(tensors: Sequence[torch.Tensor], group: Any, seq_lengths: Sequence[int],
                  me: int) -> List[torch.Tensor]:
    """Sequence-sharded [B, H_i, n_me, D] tensors → head-sharded [B, H_i/U, N, D] (one
    all-to-all for all of them; N = Σ seq_lengths, U = len(seq_lengths)).

    Every H_i must divide by U (the caller checks and says which argument is wrong). The
    results are views into one buffer: head slices of [B, Σ H_i/U, N, D]."""
    u_deg = len(seq_lengths)
    b, n, d = tensors[0].shape[0], seq_lengths[me], tensors[0].shape[-1]
    heads = [t.shape[1] // u_deg for t in tensors]
    h_all = sum(heads)
    ref = tensors[0]
    # Pack every destination's heads of q, k and v side by side: one copy, one message.
    send = ref.new_empty((u_deg, b, h_all, n, d))
    off = 0
    for t, h in zip(tensors, heads):
        send[:, :, off:off + h].copy_(t.unflatten(1, (u_deg, h)).transpose(0, 1))
        off += h
    per_token = b * h_all * d
    recv = ref.new_empty((per_token * sum(seq_lengths),))
    _all_to_all(recv, send.view(-1), [per_token * s for s in seq_lengths],
                [per_token * n] * u_deg, group)
    full = ref.new_empty((b, h_all, sum(seq_lengths), d))
    pos = seq = 0
    for s in seq_lengths:
        full[:, :, seq:seq + s].copy_(recv[pos:pos + per_token * s].view(b, h_all, s, d))
        pos += per_token * s
        seq += s
    out, off = [], 0
    for h in heads:
        out.append(full[:, off:off + h])
        off += h
    return out


def gather_heads(x: torch.Tensor, group: Any, seq_lengths: Sequence[int],
                 me: int) -> torch.Tensor:
    """Head-sharded [B, h, N, *rest] → sequence-sharded [B, h·U, n_me, *rest] (the inverse of
    :func:`scatter_heads` for one tensor: the output, or the LSE with no trailing dim)."""
    u_deg = len(seq_lengths)
    b, h, rest = x.shape[0], x.shape[1], tuple(x.shape[3:])
    inner = 1
    for r in rest:
        inner *= r
    per_token = b * h * inner
    chunks, seq = [], 0
    for s in seq_lengths:
        chunks.append(x[:, :, seq:seq + s].reshape(-1))
        seq += s
    send = torch.cat(chunks)
    n = seq_lengths[me]
    recv = x.new_empty((u_deg, b, h, n) + rest)
    _all_to_all(recv.view(-1), send, [per_token * n] * u_deg,
                [per_token * s for s in seq_lengths], group)
    return recv.transpose(0, 1).reshape((b, u_deg * h, n) + rest)
