"""int8attn.distributed on the CPU backend over gloo: 2 and 4 spawned processes.

Every variant (ring, ulysses, hybrid at 4 ranks) × mode × causal × GQA × shard pattern (even
shards of odd length, uneven shards, padded shards with per-rank valid lengths, the zigzag
split of load-balanced causal rings) is checked
against single-process ``int8attn.attention`` on the whole sequence, in one process group per
world size (spawning costs seconds, a case milliseconds). EXACT must match to fp32 rounding;
BALANCED/FAST are compared with a float64 reference: the distributed error must stay within
the mode's bar (shared/BENCHMARKS.md) and close to the single-process error (INT8/FP8 scales
come from each rank's data, so the two are not bit-equal). The LSE merge is tested alone.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import math
import os
import socket
import traceback

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available", allow_module_level=True)

import int8attn  # noqa: E402
from int8attn.distributed import merge_partials  # noqa: E402

MODES = ("exact", "balanced", "fast")
# Relative-L1 bars against float64 (shared/BENCHMARKS.md, Gaussian inputs).
BAR = {"balanced": 0.012, "fast": 0.040}
HQ, D, B = 4, 256, 2


# ---- float64 reference ------------------------------------------------------------------------
def ref_attention(q, k, v, causal, sm_scale=None, rows=None):
    """O and natural-log LSE in float64, q [B,Hq,N,D], k/v [B,Hkv,N,D]; with ``rows`` (an index
    or a boolean mask over N) only those query rows."""
    n = q.shape[2]
    pos = torch.arange(n)
    if rows is not None:
        q, pos = q[:, :, rows], pos[rows]
    q, k, v = q.double(), k.double(), v.double()
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = (q @ k.transpose(-1, -2)) * (sm_scale or 1.0 / math.sqrt(q.shape[-1]))
    if causal:
        s = s.masked_fill(torch.arange(n)[None, :] > pos[:, None], float("-inf"))
    lse = torch.logsumexp(s, -1)
    return torch.softmax(s, -1) @ v, lse


def rel_l1(o, ref):
    return float((o.double() - ref).abs().sum() / ref.abs().sum().clamp_min(1e-30))


# ---- the merge maths alone (no processes) ------------------------------------------------------
def _partial(q, k, v, scale):
    s = (q @ k.transpose(-1, -2)) * scale
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def test_merge_partials_exact_against_one_softmax():
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 3, 17, 32, generator=g, dtype=torch.float64)
    k = torch.randn(2, 3, 50, 32, generator=g, dtype=torch.float64) * 3  # peaky softmax
    v = torch.randn(2, 3, 50, 32, generator=g, dtype=torch.float64)
    scale = 0.3
    full_o, full_lse = _partial(q, k, v, scale)
    o = lse = None
    for lo, hi in ((0, 7), (7, 31), (31, 50)):  # three disjoint key sets, merged in turn
        o_i, lse_i = _partial(q, k[:, :, lo:hi], v[:, :, lo:hi], scale)
        o_i, lse_i = o_i.float(), lse_i.float()
        o, lse = (o_i, lse_i) if o is None else merge_partials(o, lse, o_i, lse_i)
    assert o.dtype == torch.float32 and lse.dtype == torch.float32
    # fp32 rounding of the inputs and of a few operations: a few ulps.
    torch.testing.assert_close(o.double(), full_o, rtol=0, atol=2e-6)
    torch.testing.assert_close(lse.double(), full_lse, rtol=4e-7, atol=4e-7)


def test_merge_partials_empty_parts():
    o = torch.randn(1, 2, 3, 8)
    lse = torch.randn(1, 2, 3)
    empty_o, empty_lse = torch.zeros_like(o), torch.full_like(lse, float("-inf"))
    mo, ml = merge_partials(o, lse, empty_o, empty_lse)
    torch.testing.assert_close(mo, o)
    torch.testing.assert_close(ml, lse)
    mo, ml = merge_partials(empty_o, empty_lse, empty_o, empty_lse)
    assert torch.equal(mo, empty_o) and torch.isneginf(ml).all()


def test_merge_partials_shape_errors():
    o, lse = torch.zeros(1, 2, 3, 8), torch.zeros(1, 2, 3)
    with pytest.raises(ValueError, match="o_b"):
        merge_partials(o, lse, torch.zeros(1, 2, 4, 8), lse)
    with pytest.raises(ValueError, match="lse_a"):
        merge_partials(o, torch.zeros(1, 2, 4), o, lse)


def test_merge_matches_library_lse_convention():
    """Partials from int8attn (EXACT, CPU, fp32) merge to int8attn's full result: the merge
    uses the library's LSE convention (natural log of the scaled scores)."""
    g = torch.Generator().manual_seed(2)
    q = torch.randn(1, 4, 23, 64, generator=g)
    k = torch.randn(1, 2, 41, 64, generator=g)
    v = torch.randn(1, 2, 41, 64, generator=g)
    full, full_lse = int8attn.attention(q, k, v, mode="exact", sm_scale=0.07, return_lse=True)
    o1, l1 = int8attn.attention(q, k[:, :, :20], v[:, :, :20], mode="exact", sm_scale=0.07,
                                return_lse=True)
    o2, l2 = int8attn.attention(q, k[:, :, 20:], v[:, :, 20:], mode="exact", sm_scale=0.07,
                                return_lse=True)
    o, lse = merge_partials(o1, l1, o2, l2)
    torch.testing.assert_close(o, full, rtol=0, atol=2e-6)
    torch.testing.assert_close(lse, full_lse, rtol=1e-6, atol=1e-6)


# ---- the spawned workers -----------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Every shard holds more than 128 keys at head dim 256: a ring step attends to one shard's K/V,
# and with at most 128 keys, or at most 512 keys of fewer channels (keys × head dim ≤ 32768),
# every mode runs EXACT (BALANCED/FAST would go untested).
SHARDS = {  # world size → pattern → (shard lengths, valid lengths per rank per batch or None)
    2: {"even": ([141, 141], None),
        "uneven": ([145, 140], None),
        "padded": ([144, 144], [[144, 139], [137, 144]])},
    4: {"even": ([135, 135, 135, 135], None),
        "uneven": ([137, 142, 135, 139], None),
        "padded": ([140, 140, 140, 140], [[140, 133], [0, 140], [135, 140], [140, 131]])},
}


def _variants(world):
    out = [("ring", None), ("ulysses", None)]
    if world == 4:
        out.append(("hybrid", 2))
    return out


def _global_inputs(lengths, hkv, seed):
    g = torch.Generator().manual_seed(seed)
    n = sum(lengths)
    q = torch.randn(B, HQ, n, D, generator=g)
    # Channel bias in K and V, as in real activations (smoothing must cope per shard).
    k = torch.randn(B, hkv, n, D, generator=g) + torch.randn(1, hkv, 1, D, generator=g)
    v = torch.randn(B, hkv, n, D, generator=g) + 0.5 * torch.randn(1, hkv, 1, D, generator=g)
    return q, k, v


def _valid_index(lengths, valid, b):
    """Positions of batch b's valid tokens in the padded global sequence."""
    idx, start = [], 0
    for p, n in enumerate(lengths):
        m = n if valid is None else valid[p][b]
        idx.extend(range(start, start + m))
        start += n
    return torch.tensor(idx, dtype=torch.long)


def _cached(cache, key, fn):
    """fn() once per key: the single-process results and the float64 reference do not depend on
    the variant (nor the reference on the mode), so each is computed once per process."""
    if key not in cache:
        cache[key] = fn()
    return cache[key]


def _check_case(ctx, sp, world, rank, variant, mode, causal, hkv, pattern, layout, failures,
                refs):
    lengths, valid = SHARDS[world][pattern]
    # The same inputs on every rank (no hash(): string hashes differ between processes).
    q, k, v = _global_inputs(lengths, hkv, seed=100 * list(SHARDS[world]).index(pattern) + hkv)
    lo = sum(lengths[:rank])
    sl = slice(lo, lo + lengths[rank])
    lq, lk, lv = q[:, :, sl], k[:, :, sl], v[:, :, sl]
    if layout == "NHD":
        lq, lk, lv = (t.transpose(1, 2).contiguous() for t in (lq, lk, lv))
    o, lse = int8attn.distributed.attention(
        lq, lk, lv, sp, mode=mode, causal=causal, layout=layout, shard_lengths=lengths,
        valid_lengths=valid, return_lse=True, context=ctx)
    if layout == "NHD":
        o = o.transpose(1, 2)
    name = f"{variant} {mode} causal={causal} hkv={hkv} {pattern} {layout}"
    for b in range(B):
        idx = _valid_index(lengths, valid, b)
        mine = (idx >= sl.start) & (idx < sl.stop)  # which global valid tokens are on this rank
        rows = idx[mine] - sl.start
        qb, kb, vb = (t[b:b + 1, :, idx] for t in (q, k, v))
        single, single_lse = _cached(refs, ("single", pattern, hkv, mode, causal, b),
                                     lambda: int8attn.attention(qb, kb, vb, mode=mode,
                                                                causal=causal, return_lse=True,
                                                                context=ctx))
        # only this rank's rows of the reference
        ref, ref_lse = _cached(refs, (pattern, hkv, causal, b),
                               lambda: ref_attention(qb, kb, vb, causal, rows=mine))
        got, got_lse = o[b:b + 1, :, rows], lse[b:b + 1, :, rows]
        single, single_lse = single[:, :, mine], single_lse[:, :, mine]
        pad = torch.ones(lengths[rank], dtype=torch.bool)
        pad[rows] = False
        if pad.any() and (o[b, :, pad].abs().max() > 0 or not torch.isneginf(
                lse[b, :, pad]).all()):
            failures.append(f"{name}: padding rows of batch {b} are not 0 / -inf")
        if rows.numel() == 0:
            continue
        if not torch.isfinite(got).all():
            failures.append(f"{name}: non-finite output")
            continue
        if mode == "exact":
            err = (got - single).abs().max().item()
            lerr = (got_lse - single_lse).abs().max().item()
            if err > 5e-5 or lerr > 5e-5:
                failures.append(f"{name} b={b}: |o - single| {err:.2e}, |lse - single| "
                                f"{lerr:.2e} (want ≤ 5e-5)")
        else:
            e_dist, e_single = rel_l1(got, ref), rel_l1(single, ref)
            lerr = (got_lse.double() - ref_lse).abs().max().item()
            if e_dist > BAR[mode] or e_dist > 1.5 * e_single + 0.002 or lerr > 0.05:
                failures.append(f"{name} b={b}: rel-L1 {e_dist:.4f} (single-process "
                                f"{e_single:.4f}, bar {BAR[mode]}), |lse - ref| {lerr:.3f}")


def _check_zigzag(ctx, sp, world, mode, causal, hkv, failures, refs):
    """The balanced causal split: this rank's tokens come from two places of the sequence."""
    # 2·world chunks of more than 128 tokens (a ring step may attend to one chunk's K/V; at
    # head dim 256 they run the quantized modes)
    n = 29 + 512 if world == 2 else 43 + 1024
    q, k, v = _global_inputs([n], hkv, seed=7 + hkv)
    index, lengths = int8attn.distributed.shard_sequence(n, sp, zigzag=True)
    lq, lk, lv = (t.index_select(2, index) for t in (q, k, v))
    o, lse = int8attn.distributed.attention(lq, lk, lv, sp, mode=mode, causal=causal,
                                            shard_lengths=lengths, zigzag=True,
                                            return_lse=True, context=ctx)
    single, single_lse = _cached(refs, ("zigzag single", hkv, mode, causal),
                                 lambda: int8attn.attention(q, k, v, mode=mode, causal=causal,
                                                            return_lse=True, context=ctx))
    ref, ref_lse = _cached(refs, ("zigzag", sp.variant, hkv, causal),  # this rank's rows
                           lambda: ref_attention(q, k, v, causal, rows=index))
    single, single_lse = (t[:, :, index] for t in (single, single_lse))
    name = f"zigzag {sp.variant} {mode} causal={causal} hkv={hkv}"
    if mode == "exact":
        err = (o - single).abs().max().item()
        lerr = (lse - single_lse).abs().max().item()
        if err > 5e-5 or lerr > 5e-5:
            failures.append(f"{name}: |o - single| {err:.2e}, |lse - single| {lerr:.2e}")
    else:
        e_dist, e_single = rel_l1(o, ref), rel_l1(single, ref)
        if e_dist > BAR[mode] or e_dist > 1.5 * e_single + 0.002:
            failures.append(f"{name}: rel-L1 {e_dist:.4f} (single-process {e_single:.4f})")


def _check_errors(failures):
    q = torch.randn(1, 3, 5, 32)
    cases = [
        (dict(variant="ulysses"), q, "q:"),
        (dict(variant="ring", shard_lengths=[5]), torch.randn(1, 4, 5, 32), "shard_lengths"),
        (dict(variant="ring", valid_lengths=[6, 5]), torch.randn(1, 4, 5, 32), "valid_lengths"),
        (dict(variant="bogus"), torch.randn(1, 4, 5, 32), "variant"),
        (dict(variant="hybrid", ulysses_degree=1), torch.randn(1, 4, 5, 32), "group"),
        (dict(variant="ring", k_lengths=[1]), torch.randn(1, 4, 5, 32), "k_lengths"),
        (dict(variant="ring", zigzag=True, causal=True, shard_lengths=[6, 5]),
         torch.randn(1, 4, 6 - dist.get_rank(), 32),
         "shard_lengths"),  # zigzag cuts 11 tokens into chunks 3,3,3,2: ranks hold 5 and 6
        (dict(variant="ring", zigzag=True, valid_lengths=[5, 4]), torch.randn(1, 4, 5, 32),
         "valid_lengths"),
    ]
    for kwargs, x, needle in cases:
        try:
            int8attn.distributed.attention(x, x, x, **kwargs)
        except ValueError as exc:
            if needle not in str(exc):
                failures.append(f"error for {kwargs}: {exc!r} does not name {needle!r}")
        else:
            failures.append(f"no ValueError for {kwargs}")


def _check_processor(ctx, sp, rank, world, failures):
    """The diffusers processor on this rank's chunk vs Int8AttnProcessor on the whole
    sequence (EXACT), self- and cross-attention."""
    from diffusers.models.attention_processor import Attention

    from int8attn.distributed import Int8DistributedAttnProcessor

    torch.manual_seed(0)  # the same weights on every rank
    modules = {False: Attention(query_dim=64, heads=4, dim_head=16),
               True: Attention(query_dim=64, heads=4, dim_head=16, cross_attention_dim=32)}
    h = torch.randn(2, 31, 64)
    text = torch.randn(2, 7, 32)
    lengths = [16, 15] if world == 2 else [8, 8, 8, 7]
    lo = sum(lengths[:rank])
    local = h[:, lo:lo + lengths[rank]]
    single = int8attn.Int8AttnProcessor(mode="exact", route="always")
    proc = Int8DistributedAttnProcessor(sp, mode="exact", shard_lengths=lengths)
    with torch.no_grad():
        for cross in (None, text):
            attn = modules[cross is not None]
            want = single(attn, h, cross)[:, lo:lo + lengths[rank]]
            got = proc(attn, local, cross)
            err = (got - want).abs().max().item()
            if err > 5e-5:
                failures.append(f"processor {sp.variant} (cross={cross is not None}): "
                                f"|diff| {err:.2e}")
    if proc.stats["distributed"] != 1 or proc.stats["int8attn"] != 1:
        failures.append(f"processor {sp.variant} stats {proc.stats}")


def _worker(rank, world, port, out_dir):
    failures = []
    try:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        torch.set_num_threads(1)  # the CI machine has 2 cores for all the ranks
        # A timeout, so that a rank failing mid-collective fails its peers instead of hanging.
        dist.init_process_group("gloo", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=90))
        import int8attn.distributed as idist

        ctx = int8attn.Context(num_threads=1)
        refs: dict = {}
        for variant, degree in _variants(world):
            sp = idist.SequenceParallel(variant=variant, ulysses_degree=degree)
            for mode in MODES:
                for causal in (False, True):
                    for hkv in (4, 2, 1):
                        for pattern in SHARDS[world]:
                            layout = "NHD" if hkv == 2 else "HND"
                            _check_case(ctx, sp, world, rank, variant, mode, causal, hkv,
                                        pattern, layout, failures, refs)
        for variant, degree in _variants(world):
            if variant == "ulysses":
                continue  # one ring position: zigzag is the contiguous split there
            sp = idist.SequenceParallel(variant=variant, ulysses_degree=degree)
            for mode in MODES:
                for causal, hkv in ((True, 4), (True, 1), (False, 2)):
                    _check_zigzag(ctx, sp, world, mode, causal, hkv, failures, refs)
        if world == 2:
            _check_errors(failures)
        if importlib.util.find_spec("diffusers") is not None:
            for variant, degree in _variants(world):
                sp = idist.SequenceParallel(variant=variant, ulysses_degree=degree)
                _check_processor(ctx, sp, rank, world, failures)
        dist.barrier()  # nobody tears down while a peer still sends
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - reported to the parent, which fails the test
        failures.append(traceback.format_exc())
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(failures, f)


@pytest.mark.parametrize("world", [2, 4])
def test_sequence_parallel_matches_single_process(world, tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(world, _free_port(), str(tmp_path)), nprocs=world, join=True)
    failures = []
    for r in range(world):
        with open(tmp_path / f"rank{r}.json") as f:
            failures += [f"rank {r}: {msg}" for msg in json.load(f)]
    assert not failures, "\n".join(failures[:40]) + f"\n({len(failures)} failures)"
