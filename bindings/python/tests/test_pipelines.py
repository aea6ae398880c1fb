"""The pipeline integration on the CPU backend (needs torch; the diffusers tests need diffusers).

What a diffusers user relies on: the low-overhead torch call path gives what the general path
gives, the custom op, the ``sageattn`` drop-in, the routing table and its accounting, the text
K/V reuse (equal to no reuse), and real diffusers models (UNet, Flux, SD3 classes at tiny sizes)
with their processors swapped, eager and under ``torch.compile``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import int8attn  # noqa: E402
from int8attn import _processors, _routing  # noqa: E402
from int8attn import torch_integration as ti  # noqa: E402,F401 - registers the op


def randn(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def rel_l1(a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).abs().sum() / b.abs().sum())


# ---- the torch call path ----------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["HND", "NHD"])
@pytest.mark.parametrize("mode", ["exact", "balanced", "fast"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_torch_path_equals_general_path(layout, mode, dtype):
    # more than 512 keys: with fewer every mode runs EXACT and the mode's options go untested
    q = randn(2, 3, 40, 32, seed=0, dtype=dtype)
    k, v = (randn(2, 3, 520, 32, seed=s, dtype=dtype) for s in (1, 2))
    if layout == "NHD":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))  # non-contiguous views, like diffusers
    fast = int8attn.attention(q, k, v, mode=mode, layout=layout)
    # an explicit context is an option the fast path leaves to the general path
    general = int8attn.attention(q, k, v, mode=mode, layout=layout,
                                 context=int8attn.default_context())
    assert fast.shape == q.shape and fast.dtype == q.dtype and fast.stride() == q.stride()
    assert torch.equal(fast, general)
    if dtype == torch.float32:
        ref = int8attn.attention(q.numpy(), k.numpy(), v.numpy(), mode=mode, layout=layout)
        np.testing.assert_array_equal(fast.numpy(), ref)


def test_torch_path_errors_name_the_argument_and_write_nothing():
    q, k, v = (randn(1, 2, 16, 32, seed=s) for s in range(3))
    out = torch.full((1, 2, 16, 16), 7.0)
    with pytest.raises(int8attn.InvalidArgumentError) as ei:
        int8attn.attention(q, k, v, out=out)
    assert ei.value.message.startswith("out")
    assert bool((out == 7.0).all())
    with pytest.raises(int8attn.InvalidArgumentError) as ei:
        int8attn.attention(q, k[..., :16], v)
    assert "k" in ei.value.message
    with pytest.raises(ValueError, match="timestep"):
        int8attn.attention(q, k, v, timestep=3)  # no policy: still rejected


def test_torch_path_policy_and_scale():
    # more than 512 keys: with fewer every mode runs EXACT
    q = randn(1, 2, 64, 32, seed=0)
    k, v = (randn(1, 2, 520, 32, seed=s) for s in (1, 2))
    pol = int8attn.TimestepPolicy(4, default_mode="fast")
    for t in range(4):
        a = int8attn.attention(q, k, v, mode=None, policy=pol, timestep=t, sm_scale=0.1)
        b = int8attn.attention(q, k, v, mode=pol.mode(t), sm_scale=0.1)
        assert torch.equal(a, b), t


def test_custom_op_equals_attention():
    # more than 512 keys: with fewer every mode runs EXACT and K's granularity changes nothing
    q = randn(2, 4, 64, 32, seed=0, dtype=torch.float16)
    k, v = (randn(2, 4, 520, 32, seed=s, dtype=torch.float16) for s in (1, 2))
    a = torch.ops.int8attn.attention(q, k, v, 3, False, 0.0, "HND", 0, -1)
    b = int8attn.attention(q, k, v, mode="fast")
    assert torch.equal(a, b)
    a = torch.ops.int8attn.attention(q, k, v, 3, k_granularity=1)  # INT8ATTN_GRANULARITY_PER_BLOCK
    b = int8attn.attention(q, k, v, mode="fast", k_granularity="block")
    assert torch.equal(a, b)
    assert not torch.equal(a, int8attn.attention(q, k, v, mode="fast"))


# ---- sageattn ---------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["HND", "NHD"])
@pytest.mark.parametrize("causal", [False, True])
def test_sageattn_equals_attention(layout, causal):
    # more than 512 keys: with fewer every mode runs EXACT and the mapped options change nothing
    q, k, v = (randn(1, 2, 520, 64, seed=s, dtype=torch.float16) for s in range(3))
    if layout == "NHD":
        q, k, v = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    a = int8attn.sageattn(q, k, v, tensor_layout=layout, is_causal=causal, sm_scale=0.2,
                          qk_quant_gran="per_warp", pv_accum_dtype="fp32+fp32")
    b = int8attn.attention(q, k, v, mode="fast", causal=causal, sm_scale=0.2, layout=layout,
                           k_granularity="block")
    assert torch.equal(a, b)
    c = int8attn.sageattn(q, k, v, tensor_layout=layout, is_causal=causal, sm_scale=0.2,
                          k_granularity="token", mode="balanced")
    assert torch.equal(c, int8attn.attention(q, k, v, mode="balanced", causal=causal,
                                             sm_scale=0.2, layout=layout))
    o, lse = int8attn.sageattn(q, k, v, tensor_layout=layout, is_causal=causal, return_lse=True)
    assert o.shape == q.shape and lse.shape == (1, 2, 520) and lse.dtype == torch.float32


def test_sageattn_rejects_unknown_arguments():
    q = randn(1, 1, 16, 64, dtype=torch.float16)
    with pytest.raises(TypeError, match="qk_gran"):
        int8attn.sageattn(q, q, q, qk_gran="per_warp")
    with pytest.raises(ValueError, match="tensor_layout"):
        int8attn.sageattn(q, q, q, tensor_layout="BHSD")
    assert "sageattn" in int8attn.__all__ and "sageattn" in dir(int8attn)


def test_sageattn_layout_and_mode_spellings():
    q, k, v = (randn(1, 520, 2, 64, seed=s, dtype=torch.float16) for s in range(3))
    ref = int8attn.sageattn(q, k, v, tensor_layout="NHD")
    assert torch.equal(ref, int8attn.attention(q, k, v, mode="fast", layout="NHD",
                                               k_granularity="block"))
    for layout, mode in (("nhd", "fast"), ("NHD", "FAST"), ("NHD", int8attn.Mode.FAST),
                         ("NHD", int(int8attn.Mode.FAST))):
        assert torch.equal(int8attn.sageattn(q, k, v, tensor_layout=layout, mode=mode), ref)
    for bad in ("bogus", 99, [3]):
        with pytest.raises(ValueError, match="mode: unknown precision mode"):
            int8attn.sageattn(q, k, v, tensor_layout="NHD", mode=bad)


@pytest.mark.parametrize("layout", ["HND", "NHD"])
@pytest.mark.parametrize("hkv", [4, 2])
def test_sageattn_routes_to_sdpa_where_the_table_says(monkeypatch, layout, hkv):
    """A routed call is SDPA on the same inputs (GQA, scale, causal), laid out like q, and
    counted; route="always", return_lse and a causal Nq != Nk call stay int8attn."""
    from int8attn import _sage

    q = randn(2, 4, 40, 64, seed=1, dtype=torch.float32)
    k, v = (randn(2, hkv, 40, 64, seed=s, dtype=torch.float32) for s in (2, 3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.2,
                                                           enable_gqa=hkv != 4)
    if layout == "NHD":
        q, k, v = (x.transpose(1, 2).contiguous() for x in (q, k, v))
        ref = ref.transpose(1, 2)
    asked = []
    monkeypatch.setattr(_sage, "_prefers_sdpa", lambda *a: asked.append(a) or True)
    monkeypatch.setattr(_sage, "stats", {"int8attn": 0, "sdpa_routed": 0, "sdpa_masked": 0})
    monkeypatch.setattr(int8attn.sageattn, "stats", _sage.stats)
    o = int8attn.sageattn(q, k, v, tensor_layout=layout, is_causal=True, sm_scale=0.2)
    assert torch.allclose(o, ref, atol=1e-6) and o.is_contiguous() and o.shape == q.shape
    assert asked == [(q, k, layout, True, "fast")]
    assert int8attn.sageattn.stats == {"int8attn": 0, "sdpa_routed": 1, "sdpa_masked": 0}
    # a routed call takes its mask to SDPA as given: the mask is never read (no host sync)
    monkeypatch.setattr(_sage, "_mask_padding", lambda *a: pytest.fail("mask read"))
    mask = torch.ones(2, 1, 40, 40, dtype=torch.bool).tril()
    o = int8attn.sageattn(q, k, v, tensor_layout=layout, sm_scale=0.2, attn_mask=mask)
    hnd = [x.transpose(1, 2) if layout == "NHD" else x for x in (q, k, v)]
    ref = torch.nn.functional.scaled_dot_product_attention(*hnd, attn_mask=mask, scale=0.2,
                                                           enable_gqa=hkv != 4)
    assert torch.allclose(o, ref.transpose(1, 2) if layout == "NHD" else ref, atol=1e-6)
    assert int8attn.sageattn.stats == {"int8attn": 0, "sdpa_routed": 2, "sdpa_masked": 0}
    qh = q.half()
    kh, vh = k.half(), v.half()
    a = int8attn.sageattn(qh, kh, vh, tensor_layout=layout, route="always")
    assert torch.equal(a, int8attn.attention(qh, kh, vh, mode="fast", layout=layout,
                                             k_granularity="block"))
    o2, _ = int8attn.sageattn(qh, kh, vh, tensor_layout=layout, return_lse=True)
    assert torch.equal(o2, a)
    assert int8attn.sageattn.stats == {"int8attn": 2, "sdpa_routed": 2, "sdpa_masked": 0}
    with pytest.raises(ValueError, match="route"):
        int8attn.sageattn(qh, kh, vh, route="never")


@pytest.mark.parametrize("layout", ["HND", "NHD"])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_sageattn_key_padding_mask_is_computed(monkeypatch, layout, kind):
    """ComfyUI's call, ``sageattn(q, k, v, attn_mask=mask, is_causal=False, tensor_layout=...)``:
    a key-padding mask (SageAttention would ignore it) runs int8attn with the valid key lengths;
    any other mask runs SDPA with it; no mask is the plain call."""
    from int8attn import _sage

    monkeypatch.setattr(_sage, "stats", {"int8attn": 0, "sdpa_routed": 0, "sdpa_masked": 0})
    q, k, v = (randn(2, 2, 160, 64, seed=s, dtype=torch.float16) for s in range(3))
    if layout == "NHD":
        q, k, v = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    lengths = torch.tensor([150, 100], dtype=torch.int32)
    keep = torch.arange(160)[None, :] < lengths[:, None]  # [B, Nk]
    mask = keep if kind == "bool" else torch.zeros(2, 160).masked_fill(~keep, -float("inf"))
    mask = mask[:, None, None, :].to(torch.float16 if kind == "float" else torch.bool)
    o = int8attn.sageattn(q, k, v, attn_mask=mask, is_causal=False, tensor_layout=layout)
    ref = int8attn.attention(q, k, v, mode="fast", layout=layout, k_granularity="block",
                             k_lengths=lengths)
    assert torch.equal(o, ref)
    assert not torch.equal(o, int8attn.sageattn(q, k, v, tensor_layout=layout))
    assert torch.equal(int8attn.sageattn(q, k, v, attn_mask=None, dropout_p=0.0,
                                         tensor_layout=layout),
                       int8attn.sageattn(q, k, v, tensor_layout=layout))
    qh, kh, vh = ((x.float().transpose(1, 2) if layout == "NHD" else x.float())
                  for x in (q, k, v))
    # a key-padding mask with a hole (the kept keys not a prefix): int8attn on K and V with
    # the kept keys first, close to SDPA with the mask
    holed = mask.clone()
    holed[0, 0, 0, 3] = False if kind == "bool" else -float("inf")
    o = int8attn.sageattn(q, k, v, attn_mask=holed, tensor_layout=layout)
    ref = torch.nn.functional.scaled_dot_product_attention(
        qh, kh, vh, attn_mask=holed.float() if kind == "float" else holed)
    ref = ref.transpose(1, 2) if layout == "NHD" else ref
    assert rel_l1(o.float(), ref) < 0.05 and o.shape == q.shape
    # not a key-padding mask (one row per query): SDPA with the mask, laid out like q
    per_query = torch.ones(2, 1, 160, 160, dtype=torch.bool).tril()
    o = int8attn.sageattn(q.float(), k.float(), v.float(), attn_mask=per_query,
                          tensor_layout=layout)
    ref = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, attn_mask=per_query)
    ref = ref.transpose(1, 2) if layout == "NHD" else ref
    assert torch.allclose(o, ref, atol=1e-6) and o.shape == q.shape
    assert _sage.stats == {"int8attn": 5, "sdpa_routed": 0, "sdpa_masked": 1}
    with pytest.raises(ValueError, match="return_lse"):
        int8attn.sageattn(q, k, v, attn_mask=per_query, tensor_layout=layout, return_lse=True)


def test_sageattn_rejects_masks_it_cannot_compute():
    q = randn(1, 1, 16, 64, dtype=torch.float16)
    mask = torch.ones(1, 1, 1, 16, dtype=torch.bool)
    with pytest.raises(ValueError, match="dropout_p"):
        int8attn.sageattn(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match="attn_mask.*is_causal"):
        int8attn.sageattn(q, q, q, attn_mask=mask, is_causal=True)
    with pytest.raises(TypeError, match="attn_mask"):
        int8attn.sageattn(q, q, q, attn_mask=mask.numpy())
    with pytest.raises(TypeError, match="attn_mask"):
        int8attn.sageattn(q.numpy(), q.numpy(), q.numpy(), attn_mask=mask)


def test_sageattn_routing_decision():
    """Only CUDA torch calls are looked up; CPU tensors and numpy arrays always take int8attn,
    and so do causal calls whose query and key lengths differ (on any device)."""
    from int8attn import _sage

    q = randn(1, 2, 16, 64, dtype=torch.float16)
    assert not _sage._prefers_sdpa(q, q, "HND", False, "fast")
    assert not _sage._prefers_sdpa(q.numpy(), q.numpy(), "HND", False, "fast")
    if torch.cuda.is_available():
        qc = torch.zeros(2, 8, 4096, 64, device="cuda", dtype=torch.float16)
        kc = torch.zeros(2, 8, 77, 64, device="cuda", dtype=torch.float16)
        assert not _sage._prefers_sdpa(qc, kc, "HND", True, "fast")  # causal, Nq != Nk
        assert _sage._prefers_sdpa(qc, kc, "HND", False, "exact")  # EXACT: always SDPA


# ---- routing ----------------------------------------------------------------------------------
def _table(ratio_fast, ratio_fast_96=None):
    """A table with batch x heads levels 24 and 96 (the second level as the first unless given)."""
    levels = [ratio_fast, ratio_fast_96 or ratio_fast]
    return _routing.RouteTable({
        "device": "test GPU", "capability": [9, 0], "head_dims": [64, 128],
        "batch_heads": [24, 96], "nq": [1024, 4096], "nk": [77, 1024, 4096],
        "ratio": {"fast": {"64": levels, "128": levels}}})


def test_route_table_nearest_point(monkeypatch):
    t = _table([[0.5, 0.9, None], [0.4, 1.2, 1.5]], [[0.6, 1.1, None], [0.5, 1.3, 1.6]])
    assert t.ratio_for(3, 40, 1000, 77, 24) == 0.5       # D rounds up to 64, nearest lengths
    assert t.ratio_for(3, 64, 5000, 3000, 20) == 1.5
    assert t.ratio_for(3, 96, 1024, 4096, 24) == 0.9     # D rounds up to 128; (1024, 4096)
    #                                                      not measured: the next Nk
    assert t.ratio_for(3, 128, 4096, 900, 24) == 1.2
    assert t.ratio_for(3, 256, 4096, 900, 24) is None    # beyond the largest D: not measured
    assert t.covers_head_dim(8) and t.covers_head_dim(128) and not t.covers_head_dim(136)
    assert t.ratio_for(2, 64, 1024, 77, 24) is None      # mode not measured
    # batch x heads: the largest level not above the call's (the smallest below them all)
    assert t.ratio_for(3, 64, 1024, 1024, 8) == 0.9
    assert t.ratio_for(3, 64, 1024, 1024, 95) == 0.9
    assert t.ratio_for(3, 64, 1024, 1024, 96) == 1.1
    assert t.ratio_for(3, 64, 1024, 1024, 500) == 1.1
    # lengths that are not multiples of 128 read the unaligned table, where there is one
    u = _routing.RouteTable({
        "device": "test GPU", "capability": [9, 0], "head_dims": [64], "batch_heads": [24],
        "nq": [4096], "nk": [4096], "ratio": {"fast": {"64": [[[0.9]]]}},
        "ratio_unaligned": {"fast": {"64": [[[1.1]]]}}, "unaligned_offset": 77})
    assert u.ratio_for(3, 64, 4096, 4096, 48) == 0.9
    assert u.ratio_for(3, 64, 4429, 4429, 48) == 1.1
    assert u.ratio_for(3, 64, 4096, 4429, 48) == 1.1
    assert t.ratio_for(3, 64, 4429, 4429, 24) == 1.5     # no second table: the first serves
    # describe() lists both grids' routed shapes, the unaligned ones at their measured lengths
    monkeypatch.setattr(_routing, "_tables", [u])
    d = _routing.describe()[0]
    assert d["routed_to_sdpa"]["fast"][64][24] == [(4096, 4096)]
    assert d["unaligned_offset"] == 77
    assert d["routed_to_sdpa_unaligned"]["fast"][64][24] == []
    u.ratio_unaligned["fast"][64][0][0][0] = 0.8
    assert _routing.describe()[0]["routed_to_sdpa_unaligned"]["fast"][64][24] == [(4173, 4173)]
    with pytest.raises(ValueError, match="not 1x2x3"):
        _routing.RouteTable({"capability": [9, 0], "head_dims": [64], "batch_heads": [24],
                             "nq": [1, 2], "nk": [1, 2, 3], "ratio": {"fast": {"64": [[[1.0]]]}}})
    with pytest.raises(ValueError, match="not 2x2x3"):
        _routing.RouteTable({"capability": [9, 0], "head_dims": [64], "batch_heads": [24, 48],
                             "nq": [1, 2], "nk": [1, 2, 3],
                             "ratio": {"fast": {"64": [[[1.0, 1.0, 1.0]] * 2]}}})


def test_route_table_exact_model_shapes(monkeypatch):
    """A call of exactly a measured model shape reads its cell, not the grid's nearest point."""
    data = {"device": "test GPU", "capability": [9, 0], "head_dims": [64, 128],
            "batch_heads": [24], "nq": [4096], "nk": [4096],
            "ratio": {"fast": {"64": [[[0.85]]], "128": [[[0.85]]]}},
            "shapes": [{"model": "flux 1024px joint", "batch_heads": 24, "head_dim": 128,
                        "nq": 4608, "nk": 4608, "ratio": {"fast": 1.06, "balanced": 0.9}},
                       {"model": "sd15 4096-token self", "batch_heads": 16, "head_dim": 40,
                        "nq": 4096, "nk": 4096, "ratio": {"fast": 0.97}}]}
    t = _routing.RouteTable(data)
    assert t.ratio_for(3, 128, 4608, 4608, 24) == 1.06   # the exact cell
    assert t.ratio_for(2, 128, 4608, 4608, 24) == 0.9
    assert t.ratio_for(3, 128, 4608, 4608, 48) == 0.85   # other batch x heads: the grid
    assert t.ratio_for(3, 128, 4736, 4736, 24) == 0.85   # other lengths: the grid
    assert t.ratio_for(3, 40, 4096, 4096, 16) == 0.97    # raw head dim, not the padded one
    assert t.ratio_for(3, 64, 4096, 4096, 16) == 0.85
    assert t.ratio_for(1, 128, 4608, 4608, 24) is None     # mode measured nowhere
    monkeypatch.setattr(_routing, "_tables", [t])
    monkeypatch.setattr(_routing, "_devices", {0: ((9, 0), "test GPU")})
    monkeypatch.setattr(_routing, "_decisions", {})
    assert not _routing.prefer_sdpa(0, 3, 128, 4608, 4608, 24)
    assert _routing.prefer_sdpa(0, 3, 128, 4096, 4096, 24)
    assert _routing.prefer_sdpa(0, 3, 40, 4096, 4096, 16)
    shapes = {(s["model"], s["mode"]): s for s in _routing.describe()[0]["shapes"]}
    assert not shapes[("flux 1024px joint", "fast")]["routed_to_sdpa"]
    assert shapes[("flux 1024px joint", "balanced")]["routed_to_sdpa"]
    assert shapes[("sd15 4096-token self", "fast")]["ratio"] == 0.97
    with pytest.raises(ValueError, match="shape cell"):
        _routing.RouteTable(dict(data, shapes=[{"model": "x", "head_dim": 64, "ratio": {}}]))


def test_processor_signature_is_precomputed():
    """diffusers reads inspect.signature(processor.__call__) on every attention call; the
    processor's is precomputed (a lookup), and names the arguments diffusers filters by."""
    proc = int8attn.Int8AttnProcessor(mode="fast")
    assert hasattr(type(proc).__call__, "__signature__")
    params = list(inspect.signature(proc.__call__).parameters)
    assert params[:5] == ["attn", "hidden_states", "encoder_hidden_states", "attention_mask",
                          "temb"]


def test_calls_that_save_less_than_the_host_margin_go_to_sdpa(monkeypatch):
    """int8attn takes a call only where it saves at least HOST_MARGIN_US of GPU time: cuDNN's
    time from the exact model cell, else the nearest grid point scaled by the call's work."""
    margin = _routing.HOST_MARGIN_US
    assert not _routing.routes_to_sdpa(1.5, None)               # no times: the ratio decides
    assert _routing.routes_to_sdpa(0.9, None)
    assert _routing.routes_to_sdpa(1.5, 3 * margin / 1e3 * 0.9)  # saves 0.9 x margin
    assert not _routing.routes_to_sdpa(1.5, 3 * margin / 1e3 * 1.1)
    # a ratio below MIN_RATIO is level within the table's spread: SDPA whatever the saving
    assert _routing.routes_to_sdpa(_routing.MIN_RATIO - 0.01, 100.0)
    assert not _routing.routes_to_sdpa(_routing.MIN_RATIO + 0.01, 100.0)
    data = {"device": "test GPU", "capability": [9, 0], "head_dims": [64],
            "batch_heads": [24], "nq": [4096], "nk": [77, 4096],
            "ratio": {"fast": {"64": [[[1.3, 1.2]]]}},
            "sdpa_ms_batch_heads": 24, "sdpa_ms": {"64": [[0.015, 0.1]]},
            "shapes": [{"model": "text", "batch_heads": 20, "head_dim": 64, "nq": 4096,
                        "nk": 77, "ratio": {"fast": 1.22}, "sdpa_ms": 0.0152}]}
    t = _routing.RouteTable(data)
    assert t.sdpa_ms_for(64, 4096, 77, 20) == 0.0152            # the exact cell
    assert t.sdpa_ms_for(64, 4096, 4096, 48) == pytest.approx(0.2)  # twice the point's work
    assert t.sdpa_ms_for(56, 4096, 4096, 24) == pytest.approx(0.1 * 56 / 64)  # D rounds up
    assert t.sdpa_ms_for(72, 4096, 4096, 24) is None              # above the grid's head dims
    monkeypatch.setattr(_routing, "_tables", [t])
    monkeypatch.setattr(_routing, "_devices", {0: ((9, 0), "test GPU")})
    monkeypatch.setattr(_routing, "_decisions", {})
    assert _routing.prefer_sdpa(0, 3, 64, 4096, 77, 20)        # 1.22x, 2.7 us saved
    assert _routing.prefer_sdpa(0, 3, 64, 4096, 4096, 24)      # 1.2x, 17 us saved
    assert not _routing.prefer_sdpa(0, 3, 64, 4096, 4096, 96)  # 1.2x, 67 us saved
    shapes = _routing.describe()[0]["shapes"]
    assert shapes[0]["sdpa_ms"] == 0.0152 and shapes[0]["routed_to_sdpa"]
    assert _routing.describe()[0]["routed_to_sdpa"]["fast"][64][24] == [(4096, 77),
                                                                        (4096, 4096)]


def test_prefer_sdpa_uses_the_device_table(monkeypatch):
    monkeypatch.setattr(_routing, "_tables", [_table([[0.5, 0.9, None],
                                                              [0.4, 0.8, 1.5]],
                                                             [[0.5, 0.9, None],
                                                              [0.4, 1.2, 1.5]])])
    monkeypatch.setattr(_routing, "_devices", {0: ((9, 0), "test GPU"), 1: ((8, 0), "sm80 GPU")})
    monkeypatch.setattr(_routing, "_decisions", {})
    assert _routing.prefer_sdpa(0, 3, 64, 4096, 77, 24)            # measured slower
    assert not _routing.prefer_sdpa(0, 3, 64, 4096, 4096, 24)      # measured faster
    assert _routing.prefer_sdpa(0, 3, 64, 4096, 1024, 24)          # slower with 24 heads,
    assert not _routing.prefer_sdpa(0, 3, 64, 4096, 1024, 96)      # faster with 96
    assert not _routing.prefer_sdpa(0, 3, 128, 4096, 4096, 24)     # faster at D=128 ...
    assert _routing.prefer_sdpa(0, 3, 256, 4096, 4096, 24)         # ... not extrapolated past
    monkeypatch.setattr(_routing, "_warned", set())
    with pytest.warns(int8attn.NoRoutingTableWarning, match=r"sm80 GPU \(sm_80\).*INT8ATTN_"):
        assert not _routing.prefer_sdpa(1, 3, 64, 4096, 77, 24)    # no table for sm80
    with warnings.catch_warnings():
        warnings.simplefilter("error")                              # once per GPU
        assert not _routing.prefer_sdpa(1, 3, 64, 4096, 4096, 24)
    assert not _routing.prefer_sdpa(-1, 3, 64, 4096, 77, 24)       # CPU
    assert not _routing.prefer_sdpa(0, 2, 64, 4096, 77, 24)        # mode not measured
    # the route rule of the processors: EXACT always SDPA on a GPU, never with "always"
    assert _processors._route("auto", 0, 1, 64, 4096, 4096, 24)
    assert not _processors._route("always", 0, 3, 64, 4096, 77, 24)
    assert _processors._route("auto", 0, 3, 64, 4096, 77, 24)
    assert not _processors._route("auto", -1, 1, 64, 4096, 77, 24)
    desc = _routing.describe()
    assert desc[0]["routed_to_sdpa"]["fast"][64][24] == [(1024, 77), (1024, 1024), (4096, 77),
                                                          (4096, 1024)]
    assert desc[0]["routed_to_sdpa"]["fast"][64][96] == [(1024, 77), (1024, 1024), (4096, 77)]


def test_processors_route_by_batch_times_heads(monkeypatch):
    """The processors pass batch x query heads, from either layout."""
    seen = []
    monkeypatch.setattr(_processors, "_route", lambda *a: seen.append(a[-1]) or True)
    proc = int8attn.Int8AttnProcessor(mode="fast")
    q = randn(2, 3, 16, 8)  # HND: B=2, H=3
    proc.attention(q, q, q, layout="HND", fallback_fn=lambda: q)
    proc.attention(q, q, q, layout="NHD", fallback_fn=lambda: q)  # NHD: B=2, H=16
    assert seen == [6, 32]


def test_shipped_tables_load():
    for path in sorted(_routing._TABLE_DIR.glob("*.json")):
        t = _routing.RouteTable(json.loads(path.read_text()))
        assert t.head_dims and t.nq and t.nk and set(t.ratio) <= {"exact", "balanced", "fast"}


def test_processor_output_is_laid_out_like_sdpa():
    """Eager HND outputs are [B, N, H, D] memory viewed as [B, H, N, D], as SDPA's cuDNN and
    flash backends return theirs: the processors' transpose + reshape is then a view."""
    proc = int8attn.Int8AttnProcessor(mode="fast", route="always")
    q, k, v = (randn(2, 3, 40, 16, seed=s) for s in range(3))
    o = proc.attention(q, k, v, layout="HND")
    ref = int8attn.attention(q, k, v, mode="fast", k_granularity="block")
    assert o.shape == q.shape and torch.equal(o, ref)
    assert o.transpose(1, 2).is_contiguous() and not ref.transpose(1, 2).is_contiguous()
    qn, kn, vn = (x.transpose(1, 2).contiguous() for x in (q, k, v))  # NHD: as given
    on = proc.attention(qn, kn, vn, layout="NHD")
    assert on.is_contiguous() and torch.equal(on.transpose(1, 2), ref)


def test_routed_calls_run_sdpa_and_are_counted(monkeypatch):
    proc = int8attn.Int8AttnProcessor(mode="fast")
    # more than 512 keys: with fewer FAST runs EXACT and K's granularity changes nothing
    q = randn(1, 2, 32, 16, seed=0)
    k, v = (randn(1, 2, 520, 16, seed=s) for s in (1, 2))
    sdpa = lambda: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
    monkeypatch.setattr(_processors, "_route", lambda *a: True)
    o = proc.attention(q, k, v, layout="HND", fallback_fn=sdpa)
    assert torch.equal(o, sdpa()) and proc.stats["sdpa_routed"] == 1
    assert proc.stats["int8attn"] == 0
    monkeypatch.setattr(_processors, "_route", lambda *a: False)
    o = proc.attention(q, k, v, layout="HND", fallback_fn=sdpa)
    # FAST in the processors: K scales per 64 keys unless told otherwise
    assert torch.equal(o, int8attn.attention(q, k, v, mode="fast", k_granularity="block"))
    assert proc.stats["int8attn"] == 1
    per_key = int8attn.Int8AttnProcessor(mode="fast", fast_k_granularity="token")
    o = per_key.attention(q, k, v, layout="HND", fallback_fn=sdpa)
    assert torch.equal(o, int8attn.attention(q, k, v, mode="fast"))
    with pytest.raises(ValueError, match="route"):
        int8attn.Int8AttnProcessor(route="sometimes")


# ---- diffusers --------------------------------------------------------------------------------
# Only these tests need diffusers: the ones above also run where it is not installed (the GPU
# machine).
try:
    import diffusers
    from diffusers.models.attention_processor import Attention, AttnProcessor2_0
except ImportError:
    diffusers = None
needs_diffusers = pytest.mark.skipif(diffusers is None, reason="diffusers is not installed")


def _cross_attention(seed=0):
    torch.manual_seed(seed)
    return Attention(64, cross_attention_dim=48, heads=4, dim_head=16).eval()


@needs_diffusers
def test_text_kv_reuse_equals_no_reuse():
    attn = _cross_attention()
    x = randn(2, 100, 64, seed=1)
    text = randn(2, 77, 48, seed=2)
    plain = int8attn.Int8AttnProcessor(mode="balanced")
    cached = int8attn.Int8AttnProcessor(mode="balanced", cache_text_kv=True)
    with torch.no_grad():
        attn.set_processor(plain)
        ref = attn(x, text)
        attn.set_processor(cached)
        outs = [attn(x * (1 + i), text) for i in range(3)]
        attn.set_processor(plain)
        refs = [attn(x * (1 + i), text) for i in range(3)]
    for a, b in zip(outs, refs):
        assert torch.equal(a, b)
    assert cached.stats["text_kv_hits"] == 2 and cached.stats["int8attn"] == 3
    with torch.no_grad():
        attn.set_processor(cached)
        text2 = text.clone()  # a new tensor (same values): recomputed, not a hit
        attn(x, text2)
        assert cached.stats["text_kv_hits"] == 2
        text2.mul_(2.0)  # changed in place: recomputed
        changed = attn(x, text2)
        assert cached.stats["text_kv_hits"] == 2
        attn.set_processor(plain)
        assert torch.equal(changed, attn(x, text2))
    cached.clear_text_kv_cache()
    assert not cached._text_kv
    assert torch.equal(ref, refs[0])


@needs_diffusers
def test_standard_processor_matches_stock_and_counts_fallbacks():
    attn = _cross_attention(3)
    x = randn(2, 64, 64, seed=4)
    text = randn(2, 77, 48, seed=5)
    proc = int8attn.Int8AttnProcessor(mode="exact")
    with torch.no_grad():
        attn.set_processor(AttnProcessor2_0())
        ref = attn(x, text)
        attn.set_processor(proc)
        out = attn(x, text)
        assert rel_l1(out, ref) < 1e-5
        # A key-padding bias (diffusers' encoder mask: 0 keeps, -10000 or -inf drops) runs
        # int8attn with k_lengths, also with a hole (the kept keys moved to the front); a bias
        # that is not a mask (-5: neither kept nor dropped) falls back to SDPA.
        pad = torch.zeros(2, 1, 77)
        pad[0, :, 60:] = float("-inf")
        pad[1, :, 50:] = -10000.0
        holes = torch.zeros(2, 1, 77)
        holes[:, :, 5] = float("-inf")
        soft = torch.zeros(2, 1, 77)
        soft[:, :, 5] = -5.0
        outs = [attn(x, text, attention_mask=m) for m in (pad, holes, soft)]
        attn.set_processor(AttnProcessor2_0())
        for o, m in zip(outs, (pad, holes, soft)):
            torch.testing.assert_close(o, attn(x, text, attention_mask=m))
    assert proc.stats["fallback"] == 1 and proc.stats["int8attn"] == 3


def test_route_sdpa_runs_every_call_in_sdpa():
    """route="sdpa": every call SDPA's (the table not consulted, also on the CPU), counted."""
    q = randn(1, 2, 32, 16, seed=0)
    k, v = (randn(1, 2, 520, 16, seed=s) for s in (1, 2))
    sdpa = lambda: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
    for mode in ("exact", "balanced", "fast"):
        proc = int8attn.Int8AttnProcessor(mode=mode, route="sdpa")
        assert torch.equal(proc.attention(q, k, v, layout="HND", fallback_fn=sdpa), sdpa())
        assert proc.stats["sdpa_routed"] == 1 and proc.stats["int8attn"] == 0
    with pytest.raises(ValueError, match="route: expected one of .*'sdpa'"):
        int8attn.Int8AttnProcessor(route="never")


@needs_diffusers
def test_route_sdpa_swap_keeps_stock_outputs():
    """replace_attention_with_int8(route="sdpa") on a module: stock's output, no int8attn call."""
    attn = _cross_attention(6)
    x, text = randn(2, 64, 64, seed=7), randn(2, 77, 48, seed=8)
    with torch.no_grad():
        ref = attn(x, text)
        int8attn.replace_attention_with_int8(attn, mode="fast", route="sdpa")
        out = attn(x, text)
    proc = attn._int8attn_processor
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    assert proc.stats["sdpa_routed"] == 1 and proc.stats["int8attn"] == 0


@needs_diffusers
def test_routed_standard_calls_run_the_stock_processor(monkeypatch):
    """A call the table sends to SDPA runs diffusers' own AttnProcessor2_0 (decided before the
    projections, so its host time is stock's), counted; cached text K/V go the long way."""
    attn = _cross_attention(3)
    x = randn(2, 64, 64, seed=4)
    text = randn(2, 77, 48, seed=5)
    seen = []

    def every_call_to_sdpa(route, device, *shape):
        seen.append(shape)
        return route == "auto"

    monkeypatch.setattr(_processors, "_route", every_call_to_sdpa)
    proc = int8attn.Int8AttnProcessor(mode="fast")
    calls = []
    stock = AttnProcessor2_0()
    monkeypatch.setattr(_processors, "_stock", [lambda *a, **k: calls.append(1) or stock(*a, **k)])
    with torch.no_grad():
        attn.set_processor(AttnProcessor2_0())
        ref = attn(x, text)
        attn.set_processor(proc)
        assert torch.equal(attn(x, text), ref)
        assert len(calls) == 1 and proc.stats["sdpa_routed"] == 1 and proc.stats["int8attn"] == 0
        # (mode, head dim, Nq, Nk, batch x heads) as the late decision would see them
        assert seen == [(int(int8attn.Mode.FAST), attn.inner_dim // attn.heads, 64, 77,
                         2 * attn.heads)]
        cached = int8attn.Int8AttnProcessor(mode="fast", cache_text_kv=True)
        attn.set_processor(cached)
        torch.testing.assert_close(attn(x, text), ref)
        assert len(calls) == 1 and cached.stats["sdpa_routed"] == 1
        always = int8attn.Int8AttnProcessor(mode="fast", route="always")
        attn.set_processor(always)
        attn(x, text)
        assert len(calls) == 1 and always.stats["int8attn"] == 1


def _tiny_models():
    """Tiny UNet, Flux, SD3 and Qwen-Image models whose self/joint attention has more than 512
    keys (UNet 576, Flux 520 + 8, SD3 576 + 5, Qwen-Image 7 + 576): with fewer (of their few
    channels) every mode runs EXACT."""
    from diffusers import (FluxTransformer2DModel, QwenImageTransformer2DModel,
                           SD3Transformer2DModel, UNet2DConditionModel)

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        sample_size=24, in_channels=4, out_channels=4, layers_per_block=1,
        block_out_channels=(64, 128), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
        attention_head_dim=8, norm_num_groups=8).eval()
    unet_in = dict(sample=randn(2, 4, 24, 24, seed=1), timestep=torch.tensor(10),
                   encoder_hidden_states=randn(2, 7, 32, seed=2))
    flux = FluxTransformer2DModel(patch_size=1, in_channels=8, num_layers=1,
                                  num_single_layers=1, attention_head_dim=16,
                                  num_attention_heads=2, joint_attention_dim=32,
                                  pooled_projection_dim=16, axes_dims_rope=(4, 6, 6)).eval()
    flux_in = dict(hidden_states=randn(1, 520, 8, seed=3),
                   encoder_hidden_states=randn(1, 8, 32, seed=4),
                   pooled_projections=randn(1, 16, seed=5), timestep=torch.tensor([0.5]),
                   img_ids=torch.zeros(520, 3), txt_ids=torch.zeros(8, 3))
    sd3 = SD3Transformer2DModel(sample_size=48, patch_size=2, in_channels=4, num_layers=1,
                                attention_head_dim=8, num_attention_heads=2,
                                joint_attention_dim=32, caption_projection_dim=16,
                                pooled_projection_dim=16, out_channels=4,
                                pos_embed_max_size=24).eval()
    sd3_in = dict(hidden_states=randn(2, 4, 48, 48, seed=6),
                  encoder_hidden_states=randn(2, 5, 32, seed=7),
                  pooled_projections=randn(2, 16, seed=8), timestep=torch.tensor([3, 3]))
    qwen = QwenImageTransformer2DModel(
        patch_size=2, in_channels=16, out_channels=4, num_layers=1, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=32, axes_dims_rope=(4, 6, 6)).eval()
    qwen_in = dict(hidden_states=randn(1, 576, 16, seed=9),
                   encoder_hidden_states=randn(1, 7, 32, seed=10),
                   timestep=torch.tensor([0.5]), img_shapes=[[(1, 24, 24)]])
    return {"unet": (unet, unet_in), "flux": (flux, flux_in), "sd3": (sd3, sd3_in),
            "qwen": (qwen, qwen_in)}


def _out(model, inputs):
    with torch.no_grad():
        o = model(**inputs, return_dict=False)[0]
    return o.sample if hasattr(o, "sample") else o


def _bench_models():
    """bench/pipeline.py and its model table (the benchmark's tiny configs, one source)."""
    import sys
    from pathlib import Path

    bench = str(Path(__file__).resolve().parents[3] / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import pipeline
    import pipeline_models

    return pipeline, pipeline_models


def _tiny_bench_model_run(name):
    """bench/pipeline.py's tiny ``name`` on the CPU: (pipeline module, model, inputs, its stock
    output, the output with int8attn's processors in, BALANCED, every call int8attn's)."""
    P, pm = _bench_models()
    spec = pm.TINY[name]
    cpu = torch.device("cpu")
    model = P.build_model(spec, cpu)
    inputs = pm.make_inputs(spec, cpu)
    with torch.no_grad():
        ref = P.prediction(model(**inputs))
        int8attn.replace_attention_with_int8(model, mode="balanced", route="always")
        out = P.prediction(model(**inputs))
    return P, model, inputs, ref, out


@needs_diffusers
@pytest.mark.parametrize("name", ["zimage", "ltx", "wan", "hunyuan", "flux2"])
def test_models_with_rotary_stand_ins_compile_whole(name):
    """The models whose rotary and norms the processors replace (Z-Image's nested complex
    rotary, LTX-Video's flat one, Wan's, HunyuanVideo's masked joint attention, FLUX.2's
    four-axis interleaved one): under
    torch.compile the stand-ins step aside, the graph has no break and the compiled model
    gives what the eager one gives."""
    import dataclasses

    P, pm = _bench_models()
    spec = dataclasses.replace(pm.TINY[name], dtype="float32")
    model = P.build_model(spec, torch.device("cpu"))
    inputs = pm.make_inputs(spec, torch.device("cpu"))
    int8attn.replace_attention_with_int8(model, mode="balanced", route="always")
    with torch.no_grad():
        eager = P.prediction(model(**inputs))
        torch._dynamo.reset()
        explanation = torch._dynamo.explain(model)(**inputs)
        assert explanation.graph_break_count == 0, explanation.break_reasons
        compiled = P.prediction(torch.compile(model, backend="aot_eager")(**inputs))
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0)


@needs_diffusers
@pytest.mark.parametrize("name", ["unet", "flux", "sd3"])
def test_diffusers_models_eager(name):
    model, inputs = _tiny_models()[name]
    ref = _out(model, inputs)
    int8attn.replace_attention_with_int8(model, mode="balanced", route="always")
    proc = model._int8attn_processor
    out = _out(model, inputs)
    assert rel_l1(out, ref) < 0.02
    assert proc.stats["int8attn"] > 0 and proc.stats["fallback"] == 0
    assert proc.stats["swapped_modules"] + proc.stats["wrapped_modules"] > 0
    if name == "flux":  # the rotary processors are wrapped, their code rebound
        assert proc.stats["wrapped_modules"] > 0
        wrapped = [m.processor for m in model.modules()
                   if isinstance(getattr(m, "processor", None), int8attn.Int8SDPAProcessor)]
        assert all(w._routed is not None for w in wrapped)
        # diffusers' rotary embedding became the bit-identical leaner one in their globals
        assert all(getattr(w._routed.__globals__["apply_rotary_emb"], "__int8attn_lean__", False)
                   for w in wrapped)
    if name == "sd3":  # SD3's joint processors are replaced, over the shared processor
        joint = [m.processor for m in model.modules() if hasattr(m, "set_processor")]
        assert joint and all(isinstance(j, int8attn.Int8JointAttnProcessor) and j.config is proc
                             for j in joint)
        assert proc.stats["wrapped_modules"] == 0
    assert F.scaled_dot_product_attention is _processors._ORIGINAL_SDPA


# bench/pipeline.py's models whose calls int8attn does not all take: HunyuanVideo's token
# refiner masks text padding with key 0 kept for the padded queries (neither key padding nor a
# joint mask), one call a step.
_KNOWN_FALLBACKS = {"hunyuan": 1}


@needs_diffusers
@pytest.mark.parametrize("name", sorted(_bench_models()[1].TINY) if diffusers else [])
def test_every_benchmark_model_runs_int8attn(name):
    """Every model of the pipeline benchmark (tiny, inputs as its pipeline passes them): its
    attention modules are swapped or wrapped, int8attn takes its calls (masks included), and
    the output stays close to stock."""
    _, model, _, ref, out = _tiny_bench_model_run(name)
    stats = model._int8attn_processor.stats
    assert stats["swapped_modules"] + stats["wrapped_modules"] > 0
    assert stats["int8attn"] > 0 and stats["fallback"] == _KNOWN_FALLBACKS.get(name, 0)
    assert rel_l1(out, ref) < 0.01


@needs_diffusers
def test_pixart_prompt_masks_run_int8attn():
    """PixArt-Sigma (the standard processor on a DiT; bench/pipeline.py's tiny config): its
    cross-attention under the prompts' padding masks (diffusers' additive -10000 bias, a valid
    length per row, 1 for an empty negative prompt) runs int8attn with k_lengths, close to stock
    (and far from it without the mask); its 144-token self-attention runs BALANCED; under
    torch.compile the graph has no break."""
    P, model, inputs, ref, out = _tiny_bench_model_run("pixart")
    proc = model._int8attn_processor
    assert rel_l1(out, ref) < 0.002
    with torch.no_grad():
        unmasked = P.prediction(model(**{**inputs, "encoder_attention_mask": None}))
    assert rel_l1(unmasked, ref) > 0.02  # the mask was applied, not ignored
    assert proc.stats["swapped_modules"] == 4  # two blocks' self- and cross-attention
    assert proc.stats["int8attn"] == 8 and proc.stats["fallback"] == 0
    with torch.no_grad():
        torch._dynamo.reset()
        explanation = torch._dynamo.explain(model)(**inputs)
        assert explanation.graph_break_count == 0, explanation.break_reasons
        compiled = P.prediction(torch.compile(model, backend="aot_eager")(**inputs))
    assert rel_l1(compiled, ref) < 0.002


@needs_diffusers
def test_flux2_runs_int8attn():
    """FLUX.2 (bench/pipeline.py's tiny config): its double-stream and parallel single-stream
    processors are wrapped, every joint call runs int8attn, diffusers' rotary function in their
    globals is int8attn's one-pass version, and the output is close to stock."""
    _, model, _, ref, out = _tiny_bench_model_run("flux2")
    proc = model._int8attn_processor
    assert rel_l1(out, ref) < 0.01
    assert proc.stats["wrapped_modules"] == 3 and proc.stats["swapped_modules"] == 0
    assert proc.stats["int8attn"] == 3 and proc.stats["fallback"] == 0
    wrapped = [m.processor for m in model.modules()
               if isinstance(getattr(m, "processor", None), int8attn.Int8SDPAProcessor)]
    assert {type(w.inner).__name__ for w in wrapped} == {"Flux2AttnProcessor",
                                                         "Flux2ParallelSelfAttnProcessor"}
    assert all(getattr(w._routed.__globals__["apply_rotary_emb"], "__int8attn_lean__", False)
               for w in wrapped)


@needs_diffusers
def test_sana_linear_attention_compiles_without_breaks():
    """Sana's linear-attention processors name no SDPA, so their wrapper patches
    ``F.scaled_dot_product_attention`` around each eager call (under a lock); while
    torch.compile traces, they run as they are: no graph break (the lock had broken the graph
    at every one), and the compiled model gives what the eager one gives."""
    torch.manual_seed(0)
    model = diffusers.SanaTransformer2DModel(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
        num_layers=2, num_cross_attention_heads=2, cross_attention_head_dim=16,
        cross_attention_dim=32, caption_channels=24, sample_size=16).eval()
    mask = torch.zeros(2, 20, dtype=torch.long)
    mask[0, :3], mask[1, :14] = 1, 1
    inputs = dict(hidden_states=randn(2, 4, 16, 16, seed=61),
                  encoder_hidden_states=randn(2, 20, 24, seed=62),
                  timestep=torch.tensor([500, 500]), encoder_attention_mask=mask,
                  return_dict=False)
    with torch.no_grad():
        ref = model(**inputs)[0]
    int8attn.replace_attention_with_int8(model, mode="balanced", route="always")
    assert model._int8attn_processor.stats["wrapped_modules"] == 4
    with torch.no_grad():
        eager = model(**inputs)[0]
        torch._dynamo.reset()
        explanation = torch._dynamo.explain(model)(**inputs)
        assert explanation.graph_break_count == 0, explanation.break_reasons
        compiled = torch.compile(model, backend="aot_eager")(**inputs)[0]
    assert rel_l1(eager, ref) < 0.01
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0)


@needs_diffusers
def test_hunyuan_video_15_joint_masks_run_int8attn():
    """HunyuanVideo-1.5 (bench/pipeline.py's tiny t2v config, inputs as its pipeline passes
    them: right-padded prompt tokens, no glyph text, zero image tokens): its processor builds a
    joint padding mask [B, 1, N, N] in every call, which now runs int8attn with k_lengths
    (before, every call fell back to SDPA), close to stock; the token refiner's mask too."""
    _, model, _, ref, out = _tiny_bench_model_run("hunyuan15")
    proc = model._int8attn_processor
    assert rel_l1(out, ref) < 0.01
    assert proc.stats["int8attn"] == 2 and proc.stats["fallback"] == 0


@needs_diffusers
def test_mochi_attention_without_set_processor_is_wrapped():
    """Mochi's attention modules hold their processor in ``.processor`` but have no
    ``set_processor``: they are wrapped all the same (before, the model kept stock attention
    with a "found no attention module" warning), each sample's joint call (video + its valid
    text tokens) runs int8attn, and the benchmark's restore puts the stock processors back."""
    P, pm = _bench_models()
    spec = pm.TINY["mochi"]
    cpu = torch.device("cpu")
    model = P.build_model(spec, cpu)
    inputs = pm.make_inputs(spec, cpu)
    saved = P.attention_processors(model)
    assert len(saved) == 2 and not any(hasattr(m, "set_processor") for m in model.modules()
                                       if hasattr(m, "processor"))
    with torch.no_grad():
        ref = P.prediction(model(**inputs))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "found no attention module"
        int8attn.replace_attention_with_int8(model, mode="balanced", route="always")
    proc = model._int8attn_processor
    with torch.no_grad():
        out = P.prediction(model(**inputs))
    assert rel_l1(out, ref) < 0.01
    assert proc.stats["wrapped_modules"] == 2
    assert proc.stats["int8attn"] == 4 and proc.stats["fallback"] == 0  # 2 blocks x 2 samples
    P.restore(model, saved)
    with torch.no_grad():
        assert torch.equal(P.prediction(model(**inputs)), ref)


@needs_diffusers
def test_mochi_compiles_with_a_policy():
    """Mochi's two samples keep different numbers of text tokens, so dynamo traces the second
    sample's joint call with symbolic lengths: compiled with a policy the model runs (it failed
    to compile before) and gives what the eager one gives at every step."""
    P, pm = _bench_models()
    spec = pm.TINY["mochi"]
    cpu = torch.device("cpu")
    model = P.build_model(spec, cpu)
    inputs = pm.make_inputs(spec, cpu)
    int8attn.replace_attention_with_int8(model, mode="balanced", num_inference_steps=3)
    eager = []
    with torch.no_grad():
        for step in range(3):
            int8attn.set_timestep(model, step)
            eager.append(P.prediction(model(**inputs)))
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="aot_eager")
        for step in range(3):
            int8attn.set_timestep(model, step)
            torch.testing.assert_close(P.prediction(compiled(**inputs)), eager[step],
                                       rtol=1e-4, atol=1e-4)


@needs_diffusers
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("sequence_dim", [1, 2])
def test_lean_rotary_is_bit_identical(dtype, sequence_dim):
    """int8attn's apply_rotary_emb (one pass) rounds exactly as diffusers' does, with Flux's
    interleaved tables and with arbitrary ones; other variants go to diffusers' own."""
    from diffusers.models.embeddings import apply_rotary_emb, get_1d_rotary_pos_embed

    from int8attn._rotary import lean_apply_rotary_emb

    lean = lean_apply_rotary_emb(apply_rotary_emb)
    S, D = 37, 16
    shape = (2, S, 3, D) if sequence_dim == 1 else (2, 3, S, D)
    x = (randn(*shape, seed=21) * 4).to(dtype)
    tables = [get_1d_rotary_pos_embed(D, torch.arange(S, dtype=torch.float32),
                                      repeat_interleave_real=True, use_real=True),
              (randn(S, D, seed=22), randn(S, D, seed=23))]
    for cos, sin in tables:
        ref = apply_rotary_emb(x, (cos, sin), sequence_dim=sequence_dim)
        out = lean(x, (cos, sin), sequence_dim=sequence_dim)
        assert out.dtype == ref.dtype and out.shape == ref.shape
        assert torch.equal(out.view(torch.uint8), ref.view(torch.uint8))  # every bit
    # The half-split variant (Stable Audio, CogView4) is diffusers' own code path.
    ref = apply_rotary_emb(x, tables[1], use_real_unbind_dim=-2, sequence_dim=sequence_dim)
    out = lean(x, tables[1], use_real_unbind_dim=-2, sequence_dim=sequence_dim)
    assert torch.equal(out.view(torch.uint8), ref.view(torch.uint8))


def test_rotary_first_call_check_waits_for_a_call_outside_a_capture(monkeypatch):
    """A rotary stand-in's first call compares int8attn's result with the original's bit for
    bit: a host synchronisation, which a CUDA-graph capture cannot contain. Inside one the
    original's result is used unchecked; the first call outside checks."""
    from int8attn import _rotary

    class CapturedOut:  # stands in for a CUDA tensor written inside the capture
        is_cuda = True

    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    state = {"checked": False, "ok": False}
    ref = randn(2, 3, seed=90)
    assert _rotary._first_call_checked(state, CapturedOut(), lambda: ref) is ref
    assert not state["checked"]
    out = ref.clone()
    assert _rotary._first_call_checked(state, out, lambda: ref) is out  # a CPU call: checked
    assert state == {"checked": True, "ok": True}


def test_rotary_fast_path_matches_the_general_one():
    """The per-call path for torch tensors (what the processors use) gives int8attn.rotary's
    bits, declines what it does not cover, and raises the library's errors."""
    from int8attn import _fastpath

    x = randn(2, 9, 3, 8, seed=41).to(torch.bfloat16)  # [B, S, H, D]
    cos, sin = randn(9, 8, seed=42), randn(9, 8, seed=43)
    out = torch.empty_like(x)
    assert _fastpath.rotary(x, cos, sin, out, True)
    ref = int8attn.rotary(x, cos, sin, layout="NHD")
    assert torch.equal(out.view(torch.uint8), ref.view(torch.uint8))
    assert not _fastpath.rotary(x, cos.double(), sin, out, True)  # float64 tables: not covered
    with pytest.raises(int8attn.InvalidArgumentError, match="sin"):
        _fastpath.rotary(x, cos, sin[:8], out, True)  # 8 tokens of angles for 9


def _ulps_apart(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """How many representable values of their (common) dtype lie between a and b, elementwise
    (same-sign finite values)."""
    bits = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}
    it = bits[a.dtype]
    return (a.view(it).to(torch.int64) - b.view(it).to(torch.int64)).abs()


@needs_diffusers
@pytest.mark.parametrize("x_dtype,w_dtype", [(torch.bfloat16, torch.bfloat16),
                                             (torch.float16, torch.float32),
                                             (torch.float32, None)])
@pytest.mark.parametrize("shape", [(2, 9, 3, 16), (2, 17, 96)])
def test_lean_rms_norm_matches_diffusers(monkeypatch, x_dtype, w_dtype, shape):
    """diffusers' RMSNorm with the one-pass forward: its dtype and shape; a 16-bit result within
    two units in the last place of diffusers' own in under 1% of the elements, a float32 one
    within a few float32 roundings; with gradients needed the original runs."""
    from diffusers.models.normalization import RMSNorm

    from int8attn import _norms

    monkeypatch.setattr(_norms, "DEVICE_TYPES", ("cuda", "cpu"))
    D = shape[-1]
    m = RMSNorm(D, eps=1e-6, elementwise_affine=w_dtype is not None)
    if w_dtype is not None:
        m.weight.data = (1 + 0.3 * randn(D, seed=51)).to(w_dtype)
    x = (randn(*shape, seed=52) * 3).to(x_dtype)
    owner = torch.nn.Module()  # the attention module whose processor decides
    owner.processor = _processors.Int8AttnProcessor()
    with torch.no_grad():
        ref = m(x)
        assert _norms.install(m, owner) and _norms.install(m, owner)  # once
        assert m.forward.__func__ is _norms.lean_forward
        out = m(x)
        owner.processor = object()  # a stock processor set back: diffusers' own again
        assert torch.equal(m(x), ref)
        owner.processor = _processors.Int8AttnProcessor()
    assert out.dtype == ref.dtype and out.shape == ref.shape
    apart = _ulps_apart(out, ref)
    if out.dtype == torch.float32:
        assert int(apart.max()) <= 4
    else:
        assert int(apart.max()) <= 2 and float((apart > 0).float().mean()) < 0.01
    # Where gradients are needed the original runs (same bits as diffusers').
    xg = x.float().requires_grad_() if x_dtype == torch.float32 else None
    if xg is not None:
        assert torch.equal(m(xg), type(m).forward(m, xg))
    with torch.no_grad():
        assert torch.equal(m(x), out)


@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")
@pytest.mark.parametrize("dtype,affine,eps", [(torch.bfloat16, True, 1e-6),
                                               (torch.float16, False, None),
                                               (torch.float32, True, 1e-5)])
def test_lean_torch_rms_norm_matches_torch(monkeypatch, dtype, affine, eps):
    """torch.nn.RMSNorm over per-head rows with the one-pass forward: torch's dtype, its single
    rounding (the weight as float32), its default eps; a 16-bit result within two units in the
    last place of torch's own; wider rows keep torch's kernel; a weight of another dtype
    (torch's promotion) runs the original."""
    from int8attn import _norms

    monkeypatch.setattr(_norms, "DEVICE_TYPES", ("cuda", "cpu"))
    owner = torch.nn.Module()
    owner.processor = _processors.Int8AttnProcessor()
    m = torch.nn.RMSNorm(64, eps=eps, elementwise_affine=affine).to(dtype)
    if affine:
        m.weight.data = (1 + 0.3 * randn(64, seed=53)).to(dtype)
    x = (randn(2, 33, 3, 64, seed=54) * 3).to(dtype)
    with torch.no_grad():
        ref = m(x)
        assert _norms.install(m, owner)
        out = m(x)
        assert out.dtype == ref.dtype and out.shape == ref.shape
        # (PyTorch's CPU evaluation, not its CUDA kernel: the share differing is not asserted)
        assert int(_ulps_apart(out, ref).max()) <= (4 if dtype == torch.float32 else 2)
        if affine and dtype != torch.float32:
            m.weight.data = m.weight.data.float()  # 16-bit x, float32 weight: torch's own
            assert torch.equal(m(x), type(m).forward(m, x))
    assert not _norms.install(torch.nn.RMSNorm(1536), owner)  # Wan's rows: torch's kernel


@needs_diffusers
def test_replace_attention_gives_sd35_norms_the_lean_forward(monkeypatch):
    """SD3.5's query/key RMSNorms (diffusers' class) get the one-pass forward when the attention
    is swapped, counted in stats; a deep copy of the model is bound to its own modules; the
    output stays close to stock."""
    import copy

    from diffusers import SD3Transformer2DModel

    from int8attn import _norms

    monkeypatch.setattr(_norms, "DEVICE_TYPES", ("cuda", "cpu"))
    torch.manual_seed(0)
    sd35 = SD3Transformer2DModel(sample_size=24, patch_size=2, in_channels=4, num_layers=2,
                                 attention_head_dim=8, num_attention_heads=2,
                                 joint_attention_dim=32, caption_projection_dim=16,
                                 pooled_projection_dim=16, out_channels=4, pos_embed_max_size=12,
                                 qk_norm="rms_norm").eval()
    inputs = dict(hidden_states=randn(2, 4, 24, 24, seed=6),
                  encoder_hidden_states=randn(2, 5, 32, seed=7),
                  pooled_projections=randn(2, 16, seed=8), timestep=torch.tensor([3, 3]))
    ref = _out(sd35, inputs)
    int8attn.replace_attention_with_int8(sd35, mode="balanced", route="always")
    norms = [m for m in sd35.modules() if _norms.is_diffusers_rms_norm(m)]
    # 2 joint blocks × (q, k, added q, added k); the last block has no added (context_pre_only)
    assert sd35._int8attn_processor.stats["lean_norms"] == len(norms) >= 6
    assert all(m.forward.__func__ is _norms.lean_forward for m in norms)
    copied = copy.deepcopy(sd35)
    for m in copied.modules():
        if _norms.is_diffusers_rms_norm(m):
            assert m.forward.__self__ is m
    assert rel_l1(_out(sd35, inputs), ref) < 0.02
    from diffusers.models.attention_processor import JointAttnProcessor2_0

    sd35.set_attn_processor(JointAttnProcessor2_0())  # stock processors: stock norms
    torch.testing.assert_close(_out(sd35, inputs), ref, rtol=0, atol=0)


def test_rms_norm_fast_path_matches_the_general_one():
    """The per-call path for torch tensors gives int8attn.rms_norm's bits (rank 3 and 4, with and
    without a weight), declines what it does not cover, and raises the library's errors."""
    from int8attn import _fastpath

    for shape in [(2, 9, 3, 16), (2, 9, 48)]:
        x = randn(*shape, seed=61).to(torch.bfloat16)
        for w in [None, (1 + 0.2 * randn(shape[-1], seed=62)).to(torch.bfloat16)]:
            out = torch.empty_like(x)
            assert _fastpath.rms_norm(x, w, out, 1e-6)
            ref = int8attn.rms_norm(x, w, eps=1e-6)
            assert torch.equal(out.view(torch.uint8), ref.view(torch.uint8))
    assert not _fastpath.rms_norm(x.double(), None, out, 1e-6)  # float64: not covered
    with pytest.raises(int8attn.InvalidArgumentError, match="weight"):
        _fastpath.rms_norm(x, torch.ones(47, dtype=torch.bfloat16), out, 1e-6)


@needs_diffusers
def test_hunyuan_video_rotary_import_and_padding_mask(monkeypatch):
    """HunyuanVideo imports diffusers' apply_rotary_emb inside its processor's call: the wrapped
    processor's globals import int8attn's version (each call counted), and its joint attention
    with a text-padding mask runs int8attn with k_lengths, close to stock."""
    from diffusers import HunyuanVideoTransformer3DModel

    from int8attn import _rotary

    torch.manual_seed(0)
    model = HunyuanVideoTransformer3DModel(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
        num_layers=1, num_single_layers=1, num_refiner_layers=1, patch_size=2, patch_size_t=1,
        text_embed_dim=32, pooled_projection_dim=16, rope_axes_dim=(4, 6, 6)).eval()
    mask = torch.ones(2, 6)
    mask[1, 4:] = 0  # the second prompt has 4 tokens, then padding
    inputs = dict(hidden_states=randn(2, 4, 3, 8, 8, seed=71), timestep=torch.tensor([500, 500]),
                  encoder_hidden_states=randn(2, 6, 32, seed=72), encoder_attention_mask=mask,
                  pooled_projections=randn(2, 16, seed=73),
                  guidance=torch.tensor([3500.0, 3500.0]))
    ref = _out(model, inputs)
    int8attn.replace_attention_with_int8(model, mode="balanced", route="always")
    calls = []
    rotate = _rotary.rotate_pairs
    monkeypatch.setattr(_rotary, "rotate_pairs", lambda *a: calls.append(1) or rotate(*a))
    out = _out(model, inputs)
    assert len(calls) == 4  # Q and K of the double and the single block
    stats = model._int8attn_processor.stats
    assert stats["int8attn"] == 2  # both joint attentions, with k_lengths
    assert rel_l1(out, ref) < 0.02


@needs_diffusers
def test_qwen_image_gets_the_complex_rotary_and_lean_norms():
    """Qwen-Image's processor module defines its own complex rotary function: the wrapped
    processor's globals hold int8attn's stand-in for it (on CUDA the COMPLEX_FMA arithmetic; on
    the CPU the original runs), its Q/K RMSNorms get the one-pass forward, and a tiny model's
    joint attention runs int8attn close to stock."""
    from int8attn import _rotary

    model, inputs = _tiny_models()["qwen"]
    ref = _out(model, inputs)
    int8attn.replace_attention_with_int8(model, mode="balanced", route="always")
    wrapped = [m.processor for m in model.modules()
               if isinstance(getattr(m, "processor", None), int8attn.Int8SDPAProcessor)]
    assert len(wrapped) == 1
    lean = wrapped[0]._routed.__globals__[_rotary.QWEN_ROTARY_NAME]
    assert getattr(lean, "__int8attn_lean__", False)
    out = _out(model, inputs)
    stats = model._int8attn_processor.stats
    assert stats["int8attn"] == 1 and stats["lean_norms"] == 4
    assert lean.state == {"checked": False, "ok": True}  # CPU tensors: the original ran
    assert rel_l1(out, ref) < 0.02


@needs_diffusers
def test_z_image_gets_the_nested_complex_rotary():
    """Z-Image's processor defines its complex rotary function inside its call: the wrapped
    processor's code calls int8attn's stand-in instead (on CUDA the COMPLEX_FMA arithmetic; on
    the CPU the original runs), and a tiny model (no processor property of its own) runs its
    attention in int8attn close to stock."""
    from diffusers import ZImageTransformer2DModel
    from diffusers.models.transformers.transformer_z_image import ZSingleStreamAttnProcessor

    from int8attn import _rotary

    _, nested, name = _rotary.nested_rotary_code(ZSingleStreamAttnProcessor.__call__.__code__)
    assert name == _rotary.COMPLEX_ROTARY_GLOBAL and nested.co_varnames[:2] == ("x_in",
                                                                                 "freqs_cis")
    torch.manual_seed(0)
    model = ZImageTransformer2DModel(
        all_patch_size=(2,), all_f_patch_size=(1,), in_channels=4, dim=64, n_layers=2,
        n_refiner_layers=1, n_heads=2, n_kv_heads=2, cap_feat_dim=32, axes_dims=(8, 12, 12),
        axes_lens=(64, 32, 32)).eval()
    inputs = dict(x=[randn(4, 1, 8, 8, seed=93)], cap_feats=[randn(32, 32, seed=94)],
                  t=torch.tensor([0.5]))

    def run():
        with torch.no_grad():
            return model(**inputs, return_dict=False)[0][0]

    ref = run()
    int8attn.replace_attention_with_int8(model, mode="balanced", route="always")
    wrapped = [m.processor for m in model.modules()
               if isinstance(getattr(m, "processor", None), int8attn.Int8SDPAProcessor)]
    assert len(wrapped) == 4
    lean = wrapped[0]._routed.__globals__[_rotary.COMPLEX_ROTARY_GLOBAL]
    out = run()
    assert model._int8attn_processor.stats["int8attn"] == 4
    assert lean.state == {"checked": False, "ok": True}  # CPU tensors: the original ran
    assert rel_l1(out, ref) < 0.02


@needs_diffusers
def test_ltx_video_gets_the_flat_rotary():
    """LTX-Video's module (and LTX-2's) defines its own rotary function over the flattened heads
    ([B, S, C], per-batch tables): the wrapped processors' globals hold int8attn's stand-in,
    bit-identical to it (checked on its first call), and a tiny model runs close to stock."""
    from diffusers import LTXVideoTransformer3DModel
    from diffusers.models.transformers import transformer_ltx

    from int8attn import _rotary

    from diffusers.models.transformers import transformer_ltx2

    x = (randn(2, 30, 48, seed=95) * 4).to(torch.bfloat16)
    cos, sin = randn(2, 30, 48, seed=96), randn(2, 30, 48, seed=97)
    # LTX-2's copy of the function (apply_interleaved_rotary_emb) gets the same stand-in
    for original in (transformer_ltx.apply_rotary_emb,
                     transformer_ltx2.apply_interleaved_rotary_emb):
        assert (original.__module__, original.__name__) in _rotary.FLAT_ROTARY_FUNCTIONS
        lean = _rotary.lean_flat_rotary(original)
        for freqs in [(cos, sin), (cos[:1], sin[:1])]:  # per-batch tables, then one for all
            out, ref = lean(x, freqs), original(x, freqs)
            assert torch.equal(out.view(torch.uint8), ref.view(torch.uint8))
        assert lean.state == {"checked": True, "ok": True}

    torch.manual_seed(0)
    model = LTXVideoTransformer3DModel(in_channels=8, out_channels=8, num_attention_heads=2,
                                       attention_head_dim=16, cross_attention_dim=32,
                                       num_layers=1, caption_channels=32).eval()
    mask = torch.ones(2, 8, dtype=torch.bool)
    mask[:, 5:] = False
    inputs = dict(hidden_states=randn(2, 2 * 4 * 4, 8, seed=98),
                  encoder_hidden_states=randn(2, 8, 32, seed=99),
                  timestep=torch.tensor([500.0] * 2), encoder_attention_mask=mask, num_frames=2, height=4, width=4,
                  rope_interpolation_scale=(8 / 25, 32, 32))
    ref = _out(model, inputs)
    int8attn.replace_attention_with_int8(model, mode="exact", route="always")
    wrapped = [m.processor for m in model.modules()
               if isinstance(getattr(m, "processor", None), int8attn.Int8SDPAProcessor)]
    stand_in = wrapped[0]._routed.__globals__["apply_rotary_emb"]
    assert getattr(stand_in, "__int8attn_lean__", False)
    assert rel_l1(_out(model, inputs), ref) < 1e-3
    assert stand_in.state == {"checked": True, "ok": True}


@pytest.mark.parametrize("policy", [False, True])
def test_symbolic_lengths_under_torch_compile(policy):
    """Lengths dynamo traces as symbolic (``dynamic=True`` here; in a model, a length that
    varied between calls, as Mochi's per-sample text tokens do) cannot be looked up in the
    routing table while tracing (that failed: "SymNodeVariable() is not a constant"): the call
    becomes one processor_attention node that routes when it runs, with or without a policy,
    counted at run time, and a new length compiles nothing new."""
    torch._dynamo.reset()
    proc = (_processors.Int8AttnProcessor(
        policy=int8attn.TimestepPolicy(4, default_mode="balanced")) if policy
        else _processors.Int8AttnProcessor(mode="balanced"))

    def call(q, k, v):
        return _processors.sdpa_int8(q, k, v, processor=proc)

    counters = torch._dynamo.utils.counters
    counters.clear()
    compiled = torch.compile(call, backend="aot_eager", dynamic=True)
    for i, n in enumerate((96, 161, 230)):
        q, k, v = (randn(2, 2, n, 32, seed=90 + 3 * i + s) for s in range(3))
        out = compiled(q, k, v)
        assert rel_l1(out, F.scaled_dot_product_attention(q, k, v)) < 0.02, n
    assert proc.stats["int8attn"] == 3
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


@pytest.mark.parametrize("layout", ["HND", "NHD"])
def test_key_padding_mask_under_torch_compile(layout):
    """Compiled, a key-padding mask is one processor_masked_attention node deciding at run
    time: int8attn with k_lengths (counted), close to masked SDPA, also with holes (the kept
    keys moved to the front); a mask with an empty row runs masked SDPA inside the node."""
    torch._dynamo.reset()
    proc = _processors.Int8AttnProcessor(mode="balanced", route="always")
    B, H, N, D = 2, 2, 520, 32  # more than 512 keys: the quantized path
    q, k, v = (randn(B, H, N, D, seed=s) for s in (81, 82, 83))
    mask = torch.ones(B, 1, 1, N, dtype=torch.bool)
    mask[1, ..., 140:] = False
    if layout == "HND":
        def call(q, k, v, m):
            return _processors.sdpa_int8(q, k, v, attn_mask=m, processor=proc)
        args = (q, k, v)
    else:
        def call(q, k, v, m):
            return proc.dispatch(q, k, v, attn_mask=m)
        args = tuple(x.transpose(1, 2) for x in (q, k, v))
    compiled = torch.compile(call, fullgraph=True, backend="eager")
    out = compiled(*args, mask)
    if layout == "NHD":
        out = out.transpose(1, 2)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert proc.stats["int8attn"] == 1
    assert rel_l1(out, ref) < 0.02
    holes = mask.clone()
    holes[0, ..., 3] = False
    out = compiled(*args, holes)
    if layout == "NHD":
        out = out.transpose(1, 2)
    assert rel_l1(out, F.scaled_dot_product_attention(q, k, v, attn_mask=holes)) < 0.02
    assert proc.stats["int8attn"] == 2
    empty = mask.clone()
    empty[0] = False  # a row without a key: SDPA's answer (zeros), not int8attn's
    out = compiled(*args, empty)
    if layout == "NHD":
        out = out.transpose(1, 2)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=empty))
    assert proc.stats["int8attn"] == 2 and proc.stats["fallback"] == 1


def test_key_lengths_of_padding_masks():
    """Key-padding prefix masks give int32 lengths (broadcast over the batch, kept for the same
    mask or a new view of it), float biases too where allowed (bf16's -10000 included); other masks, empty rows and
    masks that differ between heads give None."""
    kl = _processors._KeyLengths()
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    mask[1, ..., 5:] = False
    lengths = kl.get(mask, 2, 7)
    assert lengths.dtype == torch.int32 and lengths.tolist() == [7, 5]
    assert kl.get(mask, 2, 7) is lengths  # kept
    mask[0, ..., 6] = False  # changed in place: the version counter
    assert kl.get(mask, 2, 7).tolist() == [6, 5]
    assert kl.get(torch.ones(1, 1, 1, 7, dtype=torch.bool), 3, 7).tolist() == [7, 7, 7]
    # A processor's view made anew in every call (Z-Image: mask[:, None, None, :]) is kept by
    # its base: the second call reads nothing; a change to the base is still seen.
    flat = torch.ones(2, 7, dtype=torch.bool)
    flat[1, 3:] = False
    lengths = kl.get(flat[:, None, None, :], 2, 7)
    assert lengths.tolist() == [7, 3] and kl.get(flat[:, None, None, :], 2, 7) is lengths
    flat[0, 6] = False
    assert kl.get(flat[:, None, None, :], 2, 7).tolist() == [6, 3]
    holes = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    holes[0, ..., 2] = False
    assert kl.get(holes, 2, 7) is None  # not a prefix
    padding = kl.padding(holes, 2, 7, holes=True)  # the kept keys first, in their order
    assert padding.lengths.tolist() == [6, 7] and padding.order.shape == (2, 7)
    assert padding.order[0, :6].tolist() == [0, 1, 3, 4, 5, 6]
    assert padding.order[1].tolist() == list(range(7)) and padding.rows is None
    assert kl.padding(mask, 2, 7, holes=True).order is None  # a prefix: K and V as they are
    assert kl.get(torch.zeros(2, 1, 1, 7, dtype=torch.bool), 2, 7) is None  # no key at all
    bias = torch.zeros(2, 1, 1, 7)
    assert kl.get(bias, 2, 7) is None  # float masks only where the caller allows them (the
    # compiled graph's key-padding node takes bool masks)
    bias[0, ..., 4:] = -10000.0
    bias16 = bias.to(torch.bfloat16)  # -10000 rounds to -9984
    assert kl.get(bias16, 2, 7, floats=True).tolist() == [4, 7]
    bias[1, ..., 6] = -5.0  # neither kept (0) nor dropped
    assert kl.get(bias, 2, 7, floats=True) is None
    heads = torch.zeros(2, 3, 1, 7, dtype=torch.bool)
    heads[:, :2] = True
    assert kl.get(heads, 2, 7) is None  # heads that differ
    assert kl.get(torch.ones(2, 1, 7, 7, dtype=torch.bool), 2, 7) is None  # per-query mask


def test_joint_padding_masks():
    """A joint padding mask (HunyuanVideo-1.5: M[q, k] = m[q] & m[k], m a prefix) gives each
    row's valid token count (a host list, broadcast over the batch, kept for the same mask);
    one True too many or too few, a key-only prefix, a hole, an empty row or a per-head mask
    gives None."""
    kl = _processors._KeyLengths()

    def joint(*valid, n=9):
        m = torch.arange(n)[None, :] < torch.tensor(valid)[:, None]
        return (m[:, None, :] & m[:, :, None])[:, None]  # [B, 1, N, N]

    mask = joint(9, 6)
    assert kl.get(mask, 2, 9) is None  # not a key-padding mask
    assert kl.get_joint(mask, 2, 9).rows == [9, 6]
    assert kl.get_joint(mask, 2, 9) is kl.get_joint(mask, 2, 9)  # kept
    assert kl.get_joint(joint(4), 3, 9).rows == [4, 4, 4]
    extra = joint(9, 6)
    extra[1, 0, 7, 0] = True  # a padded query that sees a key
    missing = joint(9, 6)
    missing[1, 0, 2, 3] = False  # a valid query that misses a valid key
    keys_only = joint(9, 6)
    keys_only[1, 0, 6:, :6] = True  # every query sees the valid keys: not joint
    assert all(kl.get_joint(m, 2, 9) is None for m in (extra, missing, keys_only))
    hole = torch.ones(9, dtype=torch.bool)
    hole[3] = False
    assert kl.get_joint((hole[None, :] & hole[:, None])[None, None], 1, 9) is None
    assert kl.get_joint(joint(0, 6), 2, 9) is None  # no valid token in a row
    assert kl.get_joint(joint(9, 6).expand(2, 2, 9, 9), 2, 9) is None  # per head: not taken
    assert kl.get_joint(joint(9, 6).float(), 2, 9) is None  # bool only


def test_masks_not_read_inside_a_cuda_graph_capture(monkeypatch):
    """Inside a CUDA-graph capture a mask cannot be read on the host (a synchronisation there is
    an error): a mask not read before reads as no padding mask, so its call runs SDPA with it,
    and nothing is kept, so the next call outside the capture reads it. A mask read before
    the capture keeps its answer (nothing to read)."""
    kl = _processors._KeyLengths()
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    mask[1, ..., 5:] = False
    m = torch.arange(9)[None, :] < torch.tensor([9, 6])[:, None]
    joint = (m[:, None, :] & m[:, :, None])[:, None]
    capturing = {"now": True}
    monkeypatch.setattr(_processors._KeyLengths, "unreadable",
                        staticmethod(lambda x: capturing["now"]))
    assert kl.get(mask, 2, 7) is None and kl.get_joint(joint, 2, 9) is None
    capturing["now"] = False
    lengths = kl.get(mask, 2, 7)
    assert lengths.tolist() == [7, 5]
    capturing["now"] = True
    assert kl.get(mask, 2, 7) is lengths  # read before: its answer, without a read
    # The processor's masked call then runs its SDPA fallback, counted.
    proc = int8attn.Int8AttnProcessor(mode="fast", route="always")
    q = randn(2, 7, 2, 32, seed=80)
    k, v = randn(2, 600, 2, 32, seed=81), randn(2, 600, 2, 32, seed=82)
    pad = torch.ones(2, 1, 1, 600, dtype=torch.bool)
    pad[1, ..., 550:] = False

    def sdpa():
        return _processors.stock_sdpa_nhd(q, k, v, pad)

    out = proc._masked(q, k, v, pad, "NHD", False, None, sdpa)
    assert proc.stats["fallback"] == 1 and proc.stats["int8attn"] == 0
    torch.testing.assert_close(out, sdpa())
    capturing["now"] = False
    proc._masked(q, k, v, pad, "NHD", False, None, sdpa)
    assert proc.stats["int8attn"] == 1  # outside the capture the mask is read


@pytest.mark.parametrize("layout", ["HND", "NHD"])
def test_wrapped_calls_take_joint_and_float_padding_masks(layout):
    """Through the wrapped processors' SDPA and dispatch entry points, eager: a joint padding
    mask runs int8attn with k_lengths and zeroes the padded query rows, as SDPA leaves them; a
    float key-padding bias made anew for the call (diffusers' prepare_attention_mask, LTX-2's
    and Sana's cross-attention) and a key-padding mask with the padding in the middle of a row
    (QwenImage-2.1's batched prompts; the kept keys moved to the front) run int8attn too; all
    close to SDPA with the mask, and compiled as eager. A joint mask with a hole runs SDPA
    (counted as a fallback)."""
    proc = _processors.Int8AttnProcessor(mode="balanced", route="always")
    B, H, N, D = 2, 2, 520, 32  # more than 512 keys: the quantized path
    q, k, v = (randn(B, H, N, D, seed=s) for s in (91, 92, 93))
    valid = torch.arange(N)[None, :] < torch.tensor([N, 131])[:, None]
    joint = (valid[:, None, :] & valid[:, :, None])[:, None]
    bias = torch.where(valid, 0.0, -10000.0)[:, None, None, :].expand(B, H, 1, N).clone()
    middle = torch.ones(B, 1, 1, N, dtype=torch.bool)  # valid text, text padding, image
    middle[1, ..., 20:50] = False
    holes = joint.clone()
    holes[0, 0, :, 3] = False

    def call(mask):
        if layout == "HND":
            return _processors.sdpa_int8(q, k, v, attn_mask=mask, processor=proc)
        t = [x.transpose(1, 2) for x in (q, k, v)]
        return proc.dispatch(*t, attn_mask=mask).transpose(1, 2)

    for i, mask in enumerate((joint, bias, middle)):
        out = call(mask)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        assert rel_l1(out, ref) < 0.02
        assert proc.stats["int8attn"] == i + 1 and proc.stats["fallback"] == 0
    assert rel_l1(call(middle), F.scaled_dot_product_attention(q, k, v)) > 0.02  # it masks
    assert torch.count_nonzero(call(joint)[1, :, 131:]) == 0  # the padded queries
    torch.testing.assert_close(call(holes), F.scaled_dot_product_attention(q, k, v,
                                                                             attn_mask=holes))
    assert proc.stats["fallback"] == 1
    # Compiled, both are one processor_masked_attention node deciding at run time.
    torch._dynamo.reset()
    compiled = torch.compile(call, fullgraph=True, backend="eager")
    for mask in (joint, bias, middle):
        torch.testing.assert_close(compiled(mask), call(mask), rtol=0, atol=0)


@needs_diffusers
def test_dispatch_reads_rank_two_masks_as_diffusers_does():
    """diffusers' native attention backend reads a [B, Nk] mask as [B, 1, 1, Nk] (Kandinsky 6
    passes its prompt mask so): through the wrapped processors' dispatch it runs int8attn with
    k_lengths, close to diffusers' own dispatch with that mask."""
    from diffusers.models.attention_dispatch import dispatch_attention_fn

    proc = _processors.Int8AttnProcessor(mode="balanced", route="always")
    q, k, v = (randn(2, 160, 2, 32, seed=s) for s in (94, 95, 96))  # [B, N, H, D]
    mask = torch.ones(2, 160, dtype=torch.bool)
    mask[1, 140:] = False
    out = proc.dispatch(q, k, v, attn_mask=mask)
    ref = dispatch_attention_fn(q, k, v, attn_mask=mask)
    assert proc.stats["int8attn"] == 1 and proc.stats["fallback"] == 0
    assert rel_l1(out, ref) < 0.02
    assert rel_l1(out, dispatch_attention_fn(q, k, v)) > 0.02  # the mask was applied


@needs_diffusers
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_wan_nested_rotary_is_bit_identical(dtype):
    """Wan's processor defines its rotary function inside __call__: the wrapped processor's code
    gets a stand-in calling int8attn.rotary, bit-identical to the nested original (Wan's tables
    and arbitrary ones), and a tiny Wan model runs through it."""
    from diffusers import WanTransformer3DModel
    from diffusers.models.transformers.transformer_wan import WanAttnProcessor

    from int8attn import _rotary

    code = WanAttnProcessor.__call__.__code__
    _, nested, _ = _rotary.nested_rotary_code(code)
    original = type(lambda: 0)(nested, {"torch": torch})
    lean = _rotary.lean_wan_rotary(original)
    S, H, D = 30, 3, 16
    x = (randn(2, S, H, D, seed=31) * 4).to(dtype)
    rope = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=H, attention_head_dim=D,
                                 in_channels=4, out_channels=4, text_dim=32, freq_dim=16,
                                 ffn_dim=32, num_layers=1, rope_max_seq_len=64).rope
    cos, sin = rope(randn(1, 4, 1, 10, 12, seed=32))  # [1, S=30, 1, D]
    for c, s in [(cos, sin), (randn(1, S, 1, D, seed=33), randn(1, S, 1, D, seed=34))]:
        for _ in range(2):  # the first call is checked against the original, the second is not
            out, ref = lean(x, c, s), original(x, c, s)
            assert torch.equal(out.view(torch.uint8), ref.view(torch.uint8))

    torch.manual_seed(0)
    model = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2,
                                  attention_head_dim=16, in_channels=4, out_channels=4,
                                  text_dim=32, freq_dim=16, ffn_dim=64, num_layers=1,
                                  rope_max_seq_len=64).eval()
    inputs = dict(hidden_states=randn(1, 4, 3, 8, 8, seed=35), timestep=torch.tensor([500.0]),
                  encoder_hidden_states=randn(1, 8, 32, seed=36))
    ref = _out(model, inputs)
    int8attn.replace_attention_with_int8(model, mode="exact", route="always")
    wrapped = [m.processor for m in model.modules()
               if isinstance(getattr(m, "processor", None), int8attn.Int8SDPAProcessor)]
    assert wrapped and all(_rotary.WAN_ROTARY_GLOBAL in w._routed.__globals__ for w in wrapped)
    assert rel_l1(_out(model, inputs), ref) < 1e-3
    state = wrapped[0]._routed.__globals__[_rotary.WAN_ROTARY_GLOBAL].state
    assert state == {"checked": True, "ok": True}  # ran int8attn.rotary, equal to the original


def _joint_attention(context_pre_only, qk_norm):
    from diffusers.models.attention_processor import Attention, JointAttnProcessor2_0

    torch.manual_seed(1)
    return Attention(query_dim=48, cross_attention_dim=None, added_kv_proj_dim=48, dim_head=16,
                     heads=3, out_dim=48, context_pre_only=context_pre_only, bias=True,
                     qk_norm=qk_norm, eps=1e-6, processor=JointAttnProcessor2_0()).eval()


@needs_diffusers
@pytest.mark.parametrize("context_pre_only,qk_norm,text", [
    (False, None, True), (True, "rms_norm", True), (False, "rms_norm", False)])
def test_joint_processor_matches_stock(context_pre_only, qk_norm, text):
    """SD3's joint attention with the tokens joined in [B, N, H, D]: the stock processor's
    outputs (EXACT, and SDPA where routed there), the text branch included, counted."""
    attn = _joint_attention(context_pre_only, qk_norm)
    x = randn(2, 150, 48, seed=11)
    ctx = randn(2, 9, 48, seed=12) if text else None
    with torch.no_grad():
        ref = attn(x, ctx)
        proc = int8attn.Int8AttnProcessor(mode="exact", route="always")
        attn.set_processor(int8attn.Int8JointAttnProcessor(proc))
        out = attn(x, ctx)
    refs = ref if isinstance(ref, tuple) else (ref,)
    outs = out if isinstance(out, tuple) else (out,)
    assert len(outs) == len(refs) == (2 if text else 1)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape
        torch.testing.assert_close(o, r, rtol=1e-4, atol=1e-5)
    assert proc.stats["int8attn"] == 1 and proc.stats["sdpa_routed"] == 0
    fast = int8attn.Int8AttnProcessor(mode="fast", route="always")
    attn.set_processor(int8attn.Int8JointAttnProcessor(fast))
    with torch.no_grad():
        approx = attn(x, ctx)
    approx = approx if isinstance(approx, tuple) else (approx,)
    assert rel_l1(approx[0], refs[0]) < 0.05 and not torch.equal(approx[0], refs[0])


@needs_diffusers
def test_joint_processor_routed_calls_run_sdpa(monkeypatch):
    attn = _joint_attention(False, None)
    x, ctx = randn(2, 150, 48, seed=13), randn(2, 9, 48, seed=14)
    monkeypatch.setattr(_processors, "_route", lambda route, device, *shape: route == "auto")
    proc = int8attn.Int8AttnProcessor(mode="fast")
    with torch.no_grad():
        ref = attn(x, ctx)
        attn.set_processor(int8attn.Int8JointAttnProcessor(proc))
        out = attn(x, ctx)
    for o, r in zip(out, ref):
        torch.testing.assert_close(o, r, rtol=1e-5, atol=1e-6)
    assert proc.stats["sdpa_routed"] == 1 and proc.stats["int8attn"] == 0


@needs_diffusers
def test_set_timestep_reaches_joint_processors():
    model, _ = _tiny_models()["sd3"]
    int8attn.replace_attention_with_int8(model, mode="fast", num_inference_steps=4)
    proc = model._int8attn_processor
    del model.__dict__["_int8attn_processor"]  # found through the modules' processors
    int8attn.set_timestep(model, 2)
    assert proc.timestep == 2


@needs_diffusers
@pytest.mark.parametrize("name", ["unet", "flux", "sd3", "qwen"])
def test_diffusers_models_compiled_fixed_mode(name):
    """torch.compile without a policy: one graph, no recompiles across calls."""
    torch._dynamo.reset()
    model, inputs = _tiny_models()[name]
    int8attn.replace_attention_with_int8(model, mode="balanced", route="always")
    eager = _out(model, inputs)
    counters = torch._dynamo.utils.counters
    counters.clear()
    compiled = torch.compile(model, backend="aot_eager")
    for _ in range(3):
        torch.testing.assert_close(_out(compiled, inputs), eager, rtol=0, atol=0)
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])


@needs_diffusers
@pytest.mark.parametrize("name", ["unet", "flux"])
def test_diffusers_models_compiled_with_policy(name):
    """torch.compile with a policy: the mode changes per step without recompiling, and the
    compiled model gives what the eager one gives at every step."""
    torch._dynamo.reset()
    model, inputs = _tiny_models()[name]
    int8attn.replace_attention_with_int8(model, mode="fast", num_inference_steps=3)
    proc = model._int8attn_processor
    eager = []
    for step in range(3):
        int8attn.set_timestep(model, step)
        eager.append(_out(model, inputs))
    assert not torch.equal(eager[0], eager[1])  # EXACT and FAST steps are distinguishable
    calls = proc.stats["int8attn"]
    counters = torch._dynamo.utils.counters
    counters.clear()
    compiled = torch.compile(model, backend="aot_eager")
    for step in range(3):
        int8attn.set_timestep(model, step)
        torch.testing.assert_close(_out(compiled, inputs), eager[step], rtol=0, atol=0)
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])  # no recompiles
    assert proc.stats["int8attn"] == 2 * calls  # counted at run time, every step
    explanation = torch._dynamo.explain(model)(**inputs, return_dict=False)
    assert explanation.graph_break_count == 0, explanation.break_reasons


def test_a_gpu_reads_its_own_table_else_its_capabilitys(monkeypatch):
    """sm<cc>-<gpu>.json serves only GPUs of its device name; sm<cc>.json every other GPU of
    that capability."""
    general = _table([[0.5, 0.9, None], [0.4, 0.8, 1.5]])
    own = _table([[0.5, 0.9, None], [0.4, 1.2, 1.5]])
    own.device, own.general = "NVIDIA H200", False
    monkeypatch.setattr(_routing, "_tables", [own, general])
    assert _routing.table_for((9, 0), "NVIDIA H200") is own
    assert _routing.table_for((9, 0), "NVIDIA H100 80GB HBM3") is general
    assert _routing.table_for((9, 0)) is general
    assert _routing.table_for((8, 0), "NVIDIA H200") is None
    monkeypatch.setattr(_routing, "_devices", {0: ((9, 0), "NVIDIA H200"),
                                               1: ((9, 0), "NVIDIA H100 80GB HBM3")})
    monkeypatch.setattr(_routing, "_decisions", {})
    assert not _routing.prefer_sdpa(0, 3, 64, 4096, 1024, 24)    # 1.2x in the H200's table
    assert _routing.prefer_sdpa(1, 3, 64, 4096, 1024, 24)        # 0.8x in the general one
    monkeypatch.setattr(_routing, "_tables", [own])
    assert _routing.table_for((9, 0), "NVIDIA H100 80GB HBM3") is None
    assert [d["general"] for d in _routing.describe()] == [False]


def test_shipped_tables_name_their_gpu():
    """Each capability has one general table; the others are named after their GPU."""
    shipped = _routing.tables()
    general = [t.capability for t in shipped if t.general]
    assert len(general) == len(set(general))
    for t in shipped:
        assert t.device
        assert t.general or t.capability in general


def _table_file(path, device, ratio):
    data = {"device": device, "capability": [9, 0], "head_dims": [64], "batch_heads": [24],
            "nq": [4096], "nk": [4096], "ratio": {"fast": {"64": [[[ratio]]]}}}
    path.write_text(json.dumps(data))


def test_tables_measured_on_the_users_machine_come_first(monkeypatch, tmp_path):
    """INT8ATTN_ROUTING_DIR's tables are read before the package's: one for the user's own GPU
    serves it (over a shipped table of the same GPU), named sm<cc>.json it serves the whole
    capability; a file that is not a table is an error naming it."""
    mine, also = tmp_path / "a", tmp_path / "b"
    mine.mkdir()
    also.mkdir()
    _table_file(mine / "my-h200.json", "NVIDIA H200", 0.5)
    _table_file(also / "sm90.json", "NVIDIA H100 80GB HBM3", 2.0)
    monkeypatch.setenv(_routing.ROUTING_DIR_ENV, os.pathsep.join([str(mine), str(also), ""]))
    monkeypatch.setattr(_routing, "_tables", None)
    assert _routing.table_dirs()[:2] == [mine, also]
    assert _routing.table_dirs()[-1] == _routing._TABLE_DIR
    read = _routing.tables()
    assert [t.path for t in read[:2]] == [str(mine / "my-h200.json"), str(also / "sm90.json")]
    assert not read[0].general and read[1].general
    assert len(read) == 2 + len(list(_routing._TABLE_DIR.glob("*.json")))
    assert _routing.table_for((9, 0), "NVIDIA H200") is read[0]      # over sm90-h200.json
    assert _routing.table_for((9, 0), "NVIDIA H800") is read[1]      # over the shipped sm90
    assert _routing.describe()[0]["path"] == str(mine / "my-h200.json")
    (also / "broken.json").write_text("{not json")
    monkeypatch.setattr(_routing, "_tables", None)
    with pytest.raises(ValueError, match="broken.json"):
        _routing.tables()
    monkeypatch.setenv(_routing.ROUTING_DIR_ENV, str(tmp_path / "typo"))
    monkeypatch.setattr(_routing, "_tables", None)
    with pytest.raises(ValueError, match="INT8ATTN_ROUTING_DIR: no such folder: .*typo"):
        _routing.tables()
    monkeypatch.setattr(_routing, "_tables", None)  # the next test reads the shipped ones


def _route_table_module():
    """bench/route_table.py as a module (skips outside a checkout of the repository)."""
    bench = Path(__file__).resolve().parents[3] / "bench"
    if not (bench / "route_table.py").is_file():
        pytest.skip("needs the repository's bench/ (tests run outside a checkout)")
    sys.path.insert(0, str(bench))
    try:
        import route_table
    finally:
        sys.path.pop(0)
    return route_table


def test_route_table_compares_with_the_faster_stock_path():
    """bench/route_table.py's baseline: the faster of SDPA's cuDNN backend and PyTorch's
    default, so a table measured where the default is faster (flash) stays conservative; its
    markdown routes by the package's rule."""
    rt = _route_table_module()
    assert rt.stock_ms({"cudnn": 0.4, "sdpa": 0.3}) == 0.3
    assert rt.stock_ms({"cudnn": 0.4}) == 0.4                      # rows of older runs
    assert rt.stock_ms({"cudnn": None, "sdpa": 0.3}) == 0.3          # cuDNN refused the shape
    assert rt.stock_ms({"flash": 0.1}) is None                       # flash is not the baseline
    assert rt.routed_to(1.04, 1.0) == "SDPA"                         # under MIN_RATIO
    assert rt.routed_to(1.2, 0.05) == "SDPA"                         # saves 8 us
    assert rt.routed_to(1.2, 0.5) == "int8attn"


def test_route_table_averages_runs_of_several_machines(tmp_path):
    """bench/route_table.py --merge given once per run: each run's parts joined, every time the
    geometric mean over the runs, the ratios recomputed from those; runs of other cells or of
    another GPU refused."""
    rt = _route_table_module()
    cells = [rt.Cell(2, 12, 64, 4096, 4096), rt.Cell(2, 12, 64, 4096, 77)]

    def row(c, cudnn, fast, balanced=None):
        ms = {"cudnn": cudnn, "sdpa": None, "fast": fast, "balanced": balanced}
        ms["stock"] = rt.stock_ms(ms)
        return {"batch_heads": c.batch * c.heads, "head_dim": c.d, "nq": c.nq, "nk": c.nk,
                "offset": c.offset, "ms": ms, "method": {},
                "ratio": {m: ms["stock"] / t if t else None for m, t in ms.items()}}

    def write_run(name, gpu, rows, parts=2):
        dirs = []
        for i in range(parts):
            d = tmp_path / f"{name}{i}"
            d.mkdir()
            meta = {"gpu": gpu, "capability": [9, 0], "torch": "t", "cudnn": 1,
                    "int8attn": "0", "date": f"2026-11-2{len(name)}", "part": f"{i + 1}/{parts}",
                    "command": f"route_table.py --part {i + 1}/{parts}", "source": ""}
            (d / "route_table.json").write_text(
                json.dumps({"meta": meta, "rows": rows[i::parts]}))
            dirs.append(str(d))
        return dirs

    a = write_run("a", "H200", [row(cells[0], 0.44, 0.40), row(cells[1], 0.02, 0.015, 0.016)])
    b = write_run("bb", "H200", [row(cells[0], 0.42, 0.40), row(cells[1], 0.02, 0.015, None)])
    rows, meta = rt.merged_runs([a, b], cells)
    fast = rows[0]["ms"]["fast"]
    assert rows[0]["ms"]["cudnn"] == pytest.approx(math.sqrt(0.44 * 0.42))
    assert fast == pytest.approx(0.40)
    assert rows[0]["ratio"]["fast"] == pytest.approx(math.sqrt(0.44 * 0.42) / 0.40)
    assert rows[1]["ms"]["balanced"] == pytest.approx(0.016)  # the one run that has it
    assert rows[0]["runs"] == 2 and meta["runs"] == 2 and meta["date"] == "2026-11-22"
    assert [m["cudnn"] for m in rows[0]["ms_runs"]] == [0.44, 0.42]  # each run's own times
    assert "run 2:" in meta["command"] and "part" not in meta
    one, meta1 = rt.merged_runs([a], cells)                   # one run: its own times
    assert one[0]["ms"]["cudnn"] == pytest.approx(0.44) and "runs" not in meta1
    other_gpu = write_run("ccc", "H100", [row(cells[0], 0.5, 0.5), row(cells[1], 0.02, 0.02)])
    with pytest.raises(SystemExit, match="different GPUs"):
        rt.merged_runs([a, other_gpu], cells)
    with pytest.raises(SystemExit, match="different cells"):
        rt.average_runs([rows, rows[:1]])


def test_route_table_replaces_the_cells_of_a_head_dim_rerun(tmp_path):
    """bench/route_table.py --head-dims measures the grid's cells of those head dims only, and
    --merge ... --over DIR puts them in place of the same cells of a full table (the rest as
    measured); a head dim the table has no cell of joins it; cells of a head dim it has but not
    those cells, or another GPU's, refused."""
    rt = _route_table_module()
    cells = list(rt.grid(False, (32,)))
    assert cells and {c.d for c in cells} == {32} and not any(c.model for c in cells)
    full = list(rt.grid(False))
    assert len(full) > len(cells) and any(c.model for c in full)

    def row(c, fast):
        ms = {"cudnn": 1.0, "sdpa": None, "fast": fast}
        ms["stock"] = rt.stock_ms(ms)
        r = {"batch_heads": c.batch * c.heads, "head_dim": c.d, "nq": c.nq, "nk": c.nk,
             "offset": c.offset, "ms": ms, "method": {}, "ratio": {"fast": 1.0 / fast}}
        if c.model:
            r.update(model=c.model, batch=c.batch)
        return r

    meta = {"gpu": "H200", "capability": [9, 0], "torch": "t", "cudnn": 1, "int8attn": "0",
            "date": "2026-11-28", "command": "route_table.py", "source": ""}
    base = tmp_path / "full"
    base.mkdir()
    (base / "route_table.json").write_text(
        json.dumps({"meta": meta, "rows": [row(c, 2.0) for c in full]}))
    part = tmp_path / "d32"
    part.mkdir()
    (part / "route_table.json").write_text(json.dumps({
        "meta": dict(meta, date="2026-11-29", head_dims=[32], command="route_table.py "
                     "--head-dims 32"), "rows": [row(c, 0.5) for c in cells]}))
    rows, m = rt.merged_runs([[str(part)]], cells)
    assert m["head_dims"] == [32]
    rows, m = rt.replace_cells(rows, m, str(base))
    assert [rt.row_key(r) for r in rows] == [rt.row_key(row(c, 1.0)) for c in full]
    assert all(r["ratio"]["fast"] == (2.0 if r["head_dim"] == 32 and not r.get("model")
                                      else 0.5) for r in rows)
    assert m["date"] == "2026-11-29" and "head dims 32 replaced by" in m["command"]
    assert "head_dims" not in m
    other = tmp_path / "h100"
    other.mkdir()
    (other / "route_table.json").write_text(
        json.dumps({"meta": dict(meta, gpu="H100"), "rows": [row(c, 2.0) for c in full]}))
    with pytest.raises(SystemExit, match="of H100"):
        rt.replace_cells(rows, dict(meta, head_dims=[32]), str(other))
    with pytest.raises(SystemExit, match="no .*route_table.json"):
        rt.replace_cells(rows, dict(meta, head_dims=[32]), str(tmp_path / "missing"))
    assert rt.parse_head_dims("32,256") == (32, 256)
    with pytest.raises(argparse.ArgumentTypeError, match="not in the grid"):
        rt.parse_head_dims("48")
    with pytest.raises(argparse.ArgumentTypeError, match="expected D,D"):
        rt.parse_head_dims("32,x")
    with pytest.raises(SystemExit, match="has no cell"):
        rt.replace_cells([row(rt.Cell(2, 12, 32, 3000, 3000), 1.0)],
                         dict(meta, head_dims=[32]), str(base))
    # A head dim new to the grid: its cells join a table measured without it.
    no192 = tmp_path / "no192"
    no192.mkdir()
    (no192 / "route_table.json").write_text(json.dumps(
        {"meta": meta, "rows": [row(c, 2.0) for c in full if c.d != 192 or c.model]}))
    d192 = list(rt.grid(False, (192,)))
    rows, m = rt.replace_cells([row(c, 0.5) for c in d192], dict(meta, head_dims=[192]),
                               str(no192))
    assert sorted(map(rt.row_key, rows)) == sorted(rt.row_key(row(c, 1.0)) for c in full)
    assert all(r["ratio"]["fast"] == (2.0 if r["head_dim"] == 192 and not r.get("model")
                                      else 0.5) for r in rows)
    assert "head dims 192 added by" in m["command"]
