"""Who holds which tokens: shard lengths, valid lengths, and packing padded shards together.

Sequence order is rank order: the global sequence is the concatenation, in group rank order, of
every rank's *valid* tokens (the first ``valid_lengths[p][b]`` tokens of rank p's shard; the rest
of a shard is padding, which is never a key and whose output rows are zero). Everything here is
plain host arithmetic on lengths every rank already knows, so no collective is needed for it.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

import torch


def _as_ints(x: Any, name: str) -> List[int]:
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, (int,)):
        return [int(x)]
    try:
        return [int(v) for v in x]
    except TypeError:
        raise ValueError(f"{name}: expected an int or a sequence of ints, got {x!r}") from None


class Shards:
    """Every rank's shard length and valid lengths, in group rank order.

    Attributes:
        lengths: Tokens held by each rank (padding included), ``lengths[p] ≥ 1``.
        valid: None (every token valid) or ``valid[p][b]``: valid tokens of rank p's shard for
            batch entry b, in [0, lengths[p]].
    """

    def __init__(self, lengths: List[int], valid: Optional[List[List[int]]]) -> None:
        self.lengths = lengths
        self.valid = valid

    @classmethod
    def build(cls, shard_lengths: Any, valid_lengths: Any, *, local_len: int, batch: int,
              size: int, rank: int) -> "Shards":
        """Validate the caller's tables against this rank's tensors (see ``attention``)."""
        if shard_lengths is None:
            lengths = [local_len] * size
        else:
            lengths = _as_ints(shard_lengths, "shard_lengths")
            if len(lengths) != size:
                raise ValueError(f"shard_lengths: expected one length per rank ({size}), got "
                                 f"{len(lengths)}")
            if lengths[rank] != local_len:
                raise ValueError(f"shard_lengths: entry {rank} (this rank) is {lengths[rank]} but "
                                 f"this rank's q has {local_len} tokens")
        if min(lengths) < 1:
            raise ValueError(f"shard_lengths: every shard needs at least one token (pad an "
                             f"empty shard and give it valid length 0), got {lengths}")
        if valid_lengths is None:
            return cls(lengths, None)
        rows = list(valid_lengths.tolist() if hasattr(valid_lengths, "tolist")
                    else valid_lengths)
        if len(rows) != size:
            raise ValueError(f"valid_lengths: expected one entry per rank ({size}), got "
                             f"{len(rows)}")
        valid = []
        for p, row in enumerate(rows):
            vals = _as_ints(row, f"valid_lengths[{p}]")
            if len(vals) == 1:
                vals = vals * batch
            if len(vals) != batch:
                raise ValueError(f"valid_lengths[{p}]: expected an int or {batch} ints (one per "
                                 f"batch entry), got {len(vals)}")
            if min(vals) < 0 or max(vals) > lengths[p]:
                raise ValueError(f"valid_lengths[{p}]: each must be in [0, {lengths[p]}] (the "
                                 f"shard length), got {vals}")
            valid.append(vals)
        if all(v == lengths[p] for p, row in enumerate(valid) for v in row):
            valid = None  # nothing padded: take the cheaper path
        return cls(lengths, valid)

    def valid_of(self, p: int, batch: int) -> List[int]:
        """Valid lengths of rank p's shard, one per batch entry."""
        return [self.lengths[p]] * batch if self.valid is None else self.valid[p]

    def padded(self, members: Sequence[int]) -> bool:
        """Whether any of these ranks' shards holds padding."""
        return self.valid is not None and any(
            v < self.lengths[p] for p in members for v in self.valid[p])


class Packing:
    """Moves the valid tokens of consecutive shards (a Ulysses group's gathered sequence, with
    padding between the shards) to the front of one shard, per batch entry, and back.

    After :meth:`pack`, batch entry b holds its ``totals[b]`` valid tokens first, in sequence
    order, then padding: the layout :func:`ring_attention` expects from a padded shard."""

    def __init__(self, shards: Shards, members: Sequence[int], batch: int,
                 device: torch.device) -> None:
        pos_b, pos_n, row_n = [], [], []
        self.totals = []
        offset = 0
        starts = []
        for p in members:
            starts.append(offset)
            offset += shards.lengths[p]
        self.full_len = offset
        for b in range(batch):
            m = 0
            for p, start in zip(members, starts):
                n = shards.valid_of(p, batch)[b]
                pos_b.extend([b] * n)
                pos_n.extend(range(start, start + n))
                row_n.extend(range(m, m + n))
                m += n
            self.totals.append(m)
        # A shard of at least one token even when nothing is valid (the row is then all padding).
        self.length = max(1, max(self.totals))
        idx = torch.zeros(batch, self.length, dtype=torch.long)
        self._b = torch.tensor(pos_b, dtype=torch.long)
        self._n = torch.tensor(pos_n, dtype=torch.long)
        self._row = torch.tensor(row_n, dtype=torch.long)
        idx[self._b, self._row] = self._n
        self._grid_b = torch.arange(batch).unsqueeze(1).expand(batch, self.length).to(device)
        self._idx = idx.to(device)
        self._b, self._n, self._row = (t.to(device) for t in (self._b, self._n, self._row))

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """[B, H, full_len, ...] → [B, H, length, ...] (valid tokens first)."""
        # Advanced indices around a slice put their dims first: [B, length, H, ...].
        return x[self._grid_b, :, self._idx].transpose(1, 2)

    def unpack(self, x: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
        """[B, H, length, ...] → [B, H, full_len, ...], ``fill`` at the padding."""
        shape = (x.shape[0], x.shape[1], self.full_len) + tuple(x.shape[3:])
        out = x.new_full(shape, fill)
        out[self._b, :, self._n] = x[self._b, :, self._row]
        return out
