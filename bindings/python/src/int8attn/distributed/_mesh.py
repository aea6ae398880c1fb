"""Which ranks exchange what: the Ulysses and ring groups of a sequence-parallel group.

Rank p of the sequence-parallel group (its rank *within* that group) holds chunk p of the
sequence. With Ulysses degree U and ring degree R = size / U, rank p = g·U + u belongs to
Ulysses group g (ranks g·U … g·U+U−1: consecutive chunks, so after the all-to-all each of them
holds the contiguous sub-sequence g, for 1/U of the heads) and to ring u (ranks u, U+u, …,
ordered by g: ring position g holds sub-sequence g, so causal skipping follows ring positions).
"""

from __future__ import annotations

from typing import Any, List, Optional

_VARIANTS = ("ring", "ulysses", "hybrid")


def _dist() -> Any:
    import torch.distributed as dist

    if not dist.is_available():
        raise RuntimeError("int8attn.distributed: this torch build has no torch.distributed")
    if not dist.is_initialized():
        raise RuntimeError("int8attn.distributed: call torch.distributed.init_process_group() "
                           "first (e.g. run under torchrun)")
    return dist


class SequenceParallel:
    """A process group and how attention is spread over it.

    Args:
        group: The sequence-parallel ``ProcessGroup``; None = the default (world) group.
        variant: "ring" (K/V shards go around the ring, LSE-merged), "ulysses" (all-to-all to
            head shards; the head counts must divide by the group size) or "hybrid" (Ulysses
            inside groups of ``ulysses_degree`` consecutive ranks, ring across them).
        ulysses_degree: Ranks per Ulysses group ("hybrid" only; must divide the group size).
            With "ulysses" it may be omitted or equal to the group size; with "ring", 1.

    "hybrid" creates sub-groups with ``torch.distributed.new_group``, which every process of
    the default group must call in the same order: build the object on every process, once,
    and pass it to :func:`attention` (building it per call would create groups per call).
    """

    def __init__(self, group: Any = None, *, variant: str = "ring",
                 ulysses_degree: Optional[int] = None) -> None:
        dist = _dist()
        if variant not in _VARIANTS:
            raise ValueError(f"variant: expected one of {_VARIANTS}, got {variant!r}")
        self.group = group if group is not None else dist.group.WORLD
        self.ranks: List[int] = list(dist.get_process_group_ranks(self.group))
        self.size = len(self.ranks)
        self.rank = dist.get_rank(self.group)
        if self.rank < 0:
            raise ValueError("group: this process is not a member of the group")
        self.variant = variant
        if variant == "ring":
            if ulysses_degree not in (None, 1):
                raise ValueError(f"ulysses_degree: must be None or 1 with variant='ring', got "
                                 f"{ulysses_degree}")
            u_deg = 1
        elif variant == "ulysses":
            if ulysses_degree not in (None, self.size):
                raise ValueError(f"ulysses_degree: must be None or the group size {self.size} "
                                 f"with variant='ulysses', got {ulysses_degree} (use "
                                 "variant='hybrid' for a smaller degree)")
            u_deg = self.size
        else:
            if ulysses_degree is None or int(ulysses_degree) < 1 or \
                    self.size % int(ulysses_degree) != 0:
                raise ValueError(f"ulysses_degree: variant='hybrid' needs a divisor of the group "
                                 f"size {self.size}, got {ulysses_degree}")
            u_deg = int(ulysses_degree)
        self.ulysses_degree = u_deg
        self.ring_degree = self.size // u_deg
        self.ring_pos, self.ulysses_pos = divmod(self.rank, u_deg)
        # Group ranks (within self.group) of my Ulysses group and my ring, then global ranks.
        self.ulysses_members = [self.ring_pos * u_deg + i for i in range(u_deg)]
        self.ring_members = [g * u_deg + self.ulysses_pos for g in range(self.ring_degree)]
        self.ulysses_group = self._subgroup(dist, u_deg, lambda k: [k * u_deg + i
                                                                    for i in range(u_deg)],
                                            self.size // u_deg, self.ring_pos)
        self.ring_group = self._subgroup(dist, self.ring_degree,
                                         lambda k: [g * u_deg + k
                                                    for g in range(self.ring_degree)],
                                         u_deg, self.ulysses_pos)
        self.ring_global_ranks = [self.ranks[p] for p in self.ring_members]

    def _subgroup(self, dist: Any, degree: int, members: Any, count: int, mine: int) -> Any:
        """The whole group when degree covers it, None when degree is 1, else new groups (all
        created by every process, in the same order, as new_group requires)."""
        if degree == self.size:
            return self.group
        if degree == 1:
            return None
        made = None
        for k in range(count):
            g = dist.new_group([self.ranks[p] for p in members(k)])
            if k == mine:
                made = g
        return made

    def __repr__(self) -> str:
        return (f"SequenceParallel(variant={self.variant!r}, size={self.size}, "
                f"ulysses_degree={self.ulysses_degree}, ring_degree={self.ring_degree})")
