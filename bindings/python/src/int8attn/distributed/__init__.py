"""Sequence-parallel attention on ``torch.distributed`` with int8attn as the per-rank kernel.

Each rank of a process group holds one chunk of the sequence (rank p holds chunk p: rank order
is sequence order) and calls :func:`attention` with its chunk of Q, K and V; it gets its chunk
of the output, equal to :func:`int8attn.attention` over the whole sequence (EXACT to fp32
rounding; BALANCED/FAST within the mode's accuracy, since the INT8/FP8 scales are computed from
each rank's own data).

Variants (B batch, N global tokens, P ranks, n = N/P tokens per rank, Hq/Hkv heads, D head
dim, e bytes per element of the input dtype (2 for fp16/bf16); bytes *sent by one rank* per
attention call; receives are the same):

- ``"ulysses"`` (degree U = P): all-to-all of Q, K, V from sequence to head shards, attention
  of the whole sequence for Hq/U heads on each rank, all-to-all of the output back.
  ``(U−1)/U · B·n·D·e · (2·Hq + 2·Hkv')``, where Hkv' = Hkv, or Hkv repeated up to a multiple
  of U when U does not divide Hkv (GQA/MQA); ``+ (U−1)/U · 4·B·n·Hq`` with ``return_lse``.
  Needs Hq % U == 0.
- ``"ring"`` (degree R = P): K/V shards travel around the ring (``batch_isend_irecv``, one
  message per hop holding K and V) while the shard at hand is computed; partial results are
  merged exactly with the LSE (:func:`merge_partials`). Non-causal: ``(R−1) · 2·B·Hkv·n·D·e``
  per rank. Causal: shard s is needed only by ranks s…R−1, so it stops there: rank r sends
  ``r+1`` shards (r < R−1, none for r = R−1), ``R(R−1)/2`` shards in all, half of non-causal.
  Any head count. With the contiguous split rank R−1 computes R blocks and rank 0 one; the
  zigzag split (:func:`shard_sequence` and ``zigzag=True``: position g holds chunks g and
  2R−1−g of 2R) balances causal rings, every shard then going all the way round:
  ``(R−1) · 2·B·Hkv·n·D·e`` per rank, as non-causal.
- ``"hybrid"`` (U·R = P): Ulysses inside groups of U consecutive ranks, ring across the R
  groups: ``(U−1)/U · B·n·D·e·(2·Hq + 2·Hkv') + (R−1) · 2·B·(Hkv'/U)·(U·n)·D·e``.

K/V are sent in their input dtype (fp16/bf16), once per call. They are *not* sent quantized:
the library's attention takes K/V in floating point and quantizes them itself (K smoothed by its
mean over the keys of the call, channel balancing between Q and K, FP8 V with per-channel
scales in FAST); no public call takes pre-quantized K/V except the :class:`~int8attn.KVCache`,
which quantizes on append and cannot be shipped. Sending ``quantize()``'s int8 form would halve
the bytes but the receiver would have to dequantize and the library would quantize again: a
second rounding FAST/BALANCED do not have on one GPU. See docs/distributed.md.

Padding and uneven shards: ``shard_lengths`` gives every rank's token count; ``valid_lengths``
every rank's valid prefix (per batch entry). The global sequence is the concatenation of the
valid tokens in rank order; padding is never a key, and its output rows are 0 (LSE −inf).
"""

from ._attention import attention
from ._merge import merge_partials
from ._mesh import SequenceParallel
from ._split import shard_sequence


def __getattr__(name: str):  # the processor needs diffusers-style torch code: import on use
    if name == "Int8DistributedAttnProcessor":
        from ._processor import Int8DistributedAttnProcessor

        return Int8DistributedAttnProcessor
    raise AttributeError(f"module 'int8attn.distributed' has no attribute {name!r}")


__all__ = ["Int8DistributedAttnProcessor", "SequenceParallel", "attention", "merge_partials",
           "shard_sequence"]
