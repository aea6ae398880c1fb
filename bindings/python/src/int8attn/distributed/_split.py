"""How a sequence is cut into rank shards: contiguous, or zigzag for balanced causal rings.

Contiguous: rank p holds chunk p of P (the first N mod P chunks one token longer). Zigzag
(causal attention): the sequence is cut into 2R chunks and ring position g holds chunks g and
2R−1−g, in that order, so every position has as much past as future; with a Ulysses degree U
(hybrid), the U ranks of position g split that pair of chunks contiguously among themselves.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import torch


def split_sizes(total: int, parts: int) -> List[int]:
    """``total`` tokens in ``parts`` nearly equal pieces, the longer ones first."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def zigzag_layout(total: int, ring: int, ulysses: int) -> Tuple[List[int], List[int]]:
    """(tokens of each rank in group rank order, first-chunk tokens of each ring position)."""
    if total < 2 * ring:
        raise ValueError(f"zigzag: a sequence of {total} tokens cannot be cut into the "
                         f"{2 * ring} chunks a ring of {ring} needs")
    chunks = split_sizes(total, 2 * ring)
    lengths: List[int] = []
    for g in range(ring):
        lengths += split_sizes(chunks[g] + chunks[2 * ring - 1 - g], ulysses)
    return lengths, chunks[:ring]


def shard_sequence(seq_len: int, group: Any = None, *, variant: str = "ring",
                   ulysses_degree: Optional[int] = None, zigzag: bool = False,
                   device: Any = None) -> Tuple[torch.Tensor, List[int]]:
    """Which tokens of a ``seq_len``-token sequence this rank holds.

    Args:
        seq_len: Tokens in the whole sequence.
        group: A ``ProcessGroup`` (None = world) or a :class:`SequenceParallel`.
        variant: As for :func:`attention` (when ``group`` is not a SequenceParallel).
        ulysses_degree: As for :func:`attention`.
        zigzag: The balanced split for causal attention (pass ``zigzag=True`` to
            :func:`attention` too).
        device: Device of the returned index.

    Returns:
        ``(index, shard_lengths)``: this rank's token positions in the sequence, in the order
        it must hold them (``x.index_select(seq_dim, index)`` gives its shard, and the same
        index puts its output back), and every rank's token count (``shard_lengths`` of
        :func:`attention`).
    """
    from ._attention import _mesh

    sp = _mesh(group, variant, ulysses_degree)
    if zigzag:
        lengths, halves = zigzag_layout(seq_len, sp.ring_degree, sp.ulysses_degree)
        chunks = split_sizes(seq_len, 2 * sp.ring_degree)
        starts = [sum(chunks[:i]) for i in range(len(chunks))]
        g = sp.ring_pos
        pair = torch.cat([torch.arange(starts[g], starts[g] + chunks[g]),
                          torch.arange(starts[-1 - g], starts[-1 - g] + chunks[-1 - g])])
        pieces = split_sizes(len(pair), sp.ulysses_degree)
        lo = sum(pieces[:sp.ulysses_pos])
        index = pair[lo:lo + pieces[sp.ulysses_pos]]
    else:
        lengths = split_sizes(seq_len, sp.size)
        lo = sum(lengths[:sp.rank])
        index = torch.arange(lo, lo + lengths[sp.rank])
    return index.to(device) if device is not None else index, lengths
