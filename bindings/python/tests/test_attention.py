"""int8attn.attention on the CPU backend against a float64 numpy reference."""

from __future__ import annotations

import numpy as np
import pytest

import int8attn
from reference import attention_ref, cosine, randn, rel_l1

# Accuracy bars on Gaussian inputs (rel-L1 against float64; see docs/precision-modes.md).
BARS = {"exact": 2e-3, "balanced": 3e-2, "fast": 6e-2}
COS = {"exact": 0.99999, "balanced": 0.999, "fast": 0.995}


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def check(o, ref, mode, dtype=np.float32):
    bar = BARS[mode] + (2e-3 if dtype == np.float16 else 0.0)
    assert np.isfinite(o).all()
    assert rel_l1(o, ref) < bar, (mode, rel_l1(o, ref))
    assert cosine(o, ref) > COS[mode] - (1e-4 if dtype == np.float16 else 0.0)


@pytest.mark.parametrize("mode", ["exact", "balanced", "fast"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("d", [40, 64, 128])
def test_modes_match_reference(rng, mode, dtype, d):
    # more than 512 keys: with fewer every mode runs EXACT
    q = randn(rng, 2, 3, 77, d, dtype=dtype)
    k, v = (randn(rng, 2, 3, 520, d, dtype=dtype) for _ in range(2))
    o = int8attn.attention(q, k, v, mode=mode)
    assert o.shape == q.shape and o.dtype == q.dtype
    ref, _ = attention_ref(q, k, v)
    check(o, ref, mode, dtype)


def test_default_mode_is_balanced(rng):
    # more than 512 keys: with fewer every mode runs EXACT
    q = randn(rng, 1, 2, 64, 64)
    k, v = (randn(rng, 1, 2, 520, 64) for _ in range(2))
    a = int8attn.attention(q, k, v, mode=None)
    b = int8attn.attention(q, k, v, mode="balanced")
    np.testing.assert_array_equal(a, b)


def test_nhd_layout(rng):
    b, n, h, d = 2, 70, 4, 64
    q, k, v = (randn(rng, b, n, h, d) for _ in range(3))
    o = int8attn.attention(q, k, v, layout="NHD", mode="balanced")
    assert o.shape == (b, n, h, d)
    t = lambda x: x.transpose(0, 2, 1, 3)  # noqa: E731
    ref, _ = attention_ref(t(q), t(k), t(v))
    check(t(o), ref, "balanced")
    # HND call on the transposed views gives the same numbers.
    o2 = int8attn.attention(t(q), t(k), t(v), mode="balanced")
    np.testing.assert_allclose(o2, t(o), rtol=1e-6, atol=1e-6)


def test_non_contiguous_and_broadcast(rng):
    q = randn(rng, 2, 2, 40, 128)[..., ::2]  # strided head dim 64
    k = np.broadcast_to(randn(rng, 1, 2, 50, 64), (2, 2, 50, 64))  # stride 0 on B
    v = np.broadcast_to(randn(rng, 1, 2, 50, 64), (2, 2, 50, 64))
    o = int8attn.attention(q, k, v, mode="balanced")
    ref, _ = attention_ref(q, k, v)
    check(o, ref, "balanced")


@pytest.mark.parametrize("hkv", [1, 2])
def test_gqa_mqa(rng, hkv):
    q = randn(rng, 1, 4, 60, 64)
    k, v = randn(rng, 1, hkv, 90, 64), randn(rng, 1, hkv, 90, 64)
    for mode in ("exact", "balanced"):
        o = int8attn.attention(q, k, v, mode=mode)
        ref, _ = attention_ref(q, k, v)
        check(o, ref, mode)


@pytest.mark.parametrize("nq,nk", [(50, 80), (64, 64), (1, 33)])
def test_causal(rng, nq, nk):
    q, k, v = randn(rng, 1, 2, nq, 64), randn(rng, 1, 2, nk, 64), randn(rng, 1, 2, nk, 64)
    o = int8attn.attention(q, k, v, causal=True, mode="exact")
    ref, _ = attention_ref(q, k, v, causal=True)
    check(o, ref, "exact")
    o = int8attn.attention(q, k, v, causal=True, mode="balanced")
    check(o, ref, "balanced")


def test_return_lse_and_sm_scale(rng):
    # more than 512 keys: with fewer BALANCED runs EXACT
    q = randn(rng, 2, 2, 45, 64)
    k, v = (randn(rng, 2, 2, 520, 64) for _ in range(2))
    o, lse = int8attn.attention(q, k, v, mode="exact", return_lse=True, sm_scale=0.07)
    ref, ref_lse = attention_ref(q, k, v, sm_scale=0.07)
    assert lse.shape == (2, 2, 45) and lse.dtype == np.float32
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-4, atol=1e-4)
    check(o, ref, "exact")
    _, lse_b = int8attn.attention(q, k, v, mode="balanced", return_lse=True, sm_scale=0.07,
                                  smooth_k=False)
    np.testing.assert_allclose(lse_b, ref_lse, atol=5e-2)


def test_lse_with_k_smoothing(rng):
    """LSE is of the real scores: K smoothing's per-row shift sm_scale·q·mean(K) is added back."""
    # more than 512 keys: with fewer BALANCED runs EXACT, without K smoothing
    q = randn(rng, 1, 2, 45, 64)
    k, v = (randn(rng, 1, 2, 520, 64) for _ in range(2))
    k += 1.0  # a channel bias in K makes the smoothing shift visible
    _, lse = int8attn.attention(q, k, v, mode="balanced", return_lse=True)
    _, ref_lse = attention_ref(q, k, v)
    np.testing.assert_allclose(lse, ref_lse, atol=5e-2)


def test_k_lengths(rng):
    q, k, v = randn(rng, 2, 2, 20, 64), randn(rng, 2, 2, 80, 64), randn(rng, 2, 2, 80, 64)
    o, lse = int8attn.attention(q, k, v, k_lengths=[30, 80], mode="exact", return_lse=True)
    ref, ref_lse = attention_ref(q, k, v, k_lengths=[30, 80])
    check(o, ref, "exact")
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-4, atol=1e-4)
    # numpy int64 lengths are converted; a zero length gives O = 0, LSE = -inf.
    o, lse = int8attn.attention(q, k, v, k_lengths=np.array([0, 5]), mode="balanced",
                                return_lse=True)
    assert np.all(o[0] == 0) and np.all(np.isneginf(lse[0]))


def test_block_mask(rng):
    q, k, v = randn(rng, 1, 2, 100, 64), randn(rng, 1, 2, 200, 64), randn(rng, 1, 2, 200, 64)
    mask = (rng.random((1, 2, 4, 4)) > 0.4).astype(np.uint8)
    mask[..., 0] = 1
    o = int8attn.attention(q, k, v, block_mask=mask, mask_block=(32, 64), mode="exact")
    ref, _ = attention_ref(q, k, v, block_mask=mask, mask_block=(32, 64))
    check(o, ref, "exact")
    # bool masks and broadcast (size-1) dims are accepted
    o2 = int8attn.attention(q, k, v, block_mask=mask[:, :1].astype(bool), mask_block=(32, 64),
                            mode="exact")
    ref2, _ = attention_ref(q, k, v, block_mask=mask[:, :1], mask_block=(32, 64))
    check(o2, ref2, "exact")


def test_predict_block_mask(rng):
    q, k, v = (randn(rng, 1, 2, 256, 64) for _ in range(3))
    m = int8attn.predict_block_mask(q, k, q_block=64, k_block=64, keep_ratio=0.5)
    assert m.shape == (1, 2, 4, 4) and m.dtype == np.uint8
    assert set(np.unique(m)) <= {0, 1}
    assert np.all(m[..., 0] == 1)  # the first key block is always kept
    assert np.all(m.sum(-1) >= 2)
    o = int8attn.attention(q, k, v, block_mask=m, mask_block=(64, 64), mode="exact")
    ref, _ = attention_ref(q, k, v, block_mask=m, mask_block=(64, 64))
    check(o, ref, "exact")
    dense = int8attn.predict_block_mask(q, k, q_block=64, k_block=64, threshold=1.0)
    assert dense.sum() >= m.sum()


def test_out_parameter(rng):
    q, k, v = (randn(rng, 1, 2, 30, 64) for _ in range(3))
    out = np.zeros_like(q)
    res = int8attn.attention(q, k, v, out=out, mode="exact")
    assert res is out
    ref, _ = attention_ref(q, k, v)
    check(out, ref, "exact")


def test_options_are_exact_transformations(rng):
    # outlier channels in Q and K, channel bias in K and V; more than 512 keys: with fewer
    # BALANCED runs EXACT and the options change nothing
    q = randn(rng, 1, 2, 128, 64)
    k, v = (randn(rng, 1, 2, 520, 64) for _ in range(2))
    q[..., 3] *= 20
    k[..., 7] *= 20
    k += 3.0 * randn(rng, 1, 1, 1, 64)
    v += 2.0 * randn(rng, 1, 1, 1, 64)
    ref, _ = attention_ref(q, k, v)
    for kw in ({}, {"balance_channels": True}, {"q_granularity": "block"},
               {"k_granularity": "token"}, {"smooth_v": False}):
        o = int8attn.attention(q, k, v, mode="balanced", **kw)
        assert np.isfinite(o).all()
        assert rel_l1(o, ref) < 0.06, (kw, rel_l1(o, ref))


def test_workspace_size(rng):
    q, k, v = (randn(rng, 1, 2, 30, 64) for _ in range(3))
    assert int8attn.forward_workspace_size(q, k, v, mode="balanced") >= 0


def test_explicit_context(rng):
    q, k, v = (randn(rng, 1, 2, 30, 64) for _ in range(3))
    with int8attn.Context(num_threads=1) as ctx:
        o = int8attn.attention(q, k, v, context=ctx, mode="exact")
        ctx.synchronize()
        ctx.reserve_workspace(1 << 16, device="cpu")
    assert ctx.closed
    ctx.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        int8attn.attention(q, k, v, context=ctx)
    ref, _ = attention_ref(q, k, v)
    check(o, ref, "exact")
