"""torch tests of the int8attn bindings: CUDA tensors (fp16/bf16, HND/NHD) against PyTorch SDPA,
the Int8Attention module, the diffusers-style processor, and torch.compile of the custom op.

Run on the GPU machine (torch + CUDA + numpy + pytest; no diffusers, no network):

    INT8ATTN_LIBRARY=build/lib/libint8attn.so python3 -m pytest bindings/python/tests/gpu -q

Every test also runs on CPU torch tensors when torch is installed; CUDA cases skip when torch has
no CUDA device or the library was built without the CUDA backend.
"""

from __future__ import annotations

import inspect
from typing import Optional

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import int8attn  # noqa: E402
from int8attn import torch_integration as ti  # noqa: E402

HAS_CUDA = torch.cuda.is_available() and "cuda" in int8attn.features()
CUDA_REASON = ("no CUDA device visible to torch" if not torch.cuda.is_available()
               else "libint8attn was built without the CUDA backend")
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA,
                                                                 reason=CUDA_REASON))]

# rel-L1 bars against float64 SDPA (Gaussian inputs). fp16/bf16 inputs add their own rounding.
BARS = {"exact": 1e-2, "balanced": 4e-2, "fast": 8e-2}


def _dtypes(device: str):
    return [torch.float16, torch.bfloat16] + ([torch.float32] if device == "cpu" else [])


def ref_sdpa(q, k, v, *, causal: bool = False, layout: str = "HND", scale=None):
    """float64 SDPA on the CPU (GQA by repeating K/V heads)."""
    if layout == "NHD":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    q, k, v = (x.detach().to("cpu", torch.float64) for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    return o.transpose(1, 2) if layout == "NHD" else o


def rel_l1(o, ref) -> float:
    o = o.detach().to("cpu", torch.float64)
    return float((o - ref).abs().sum() / ref.abs().sum().clamp_min(1e-30))


def randn(*shape, device="cpu", dtype=torch.float16, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float32).to(device=device, dtype=dtype)


# ---- attention() on torch tensors ---------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["HND", "NHD"])
@pytest.mark.parametrize("mode", ["exact", "balanced", "fast"])
@pytest.mark.parametrize("d", [64, 128])
def test_attention_vs_sdpa(device, layout, mode, d):
    for dtype in _dtypes(device):
        b, h, n = 2, 4, 600  # N not a multiple of 64; past 512 (with fewer keys all run EXACT)
        shape = (b, h, n, d) if layout == "HND" else (b, n, h, d)
        q, k, v = (randn(*shape, device=device, dtype=dtype, seed=s) for s in range(3))
        o = int8attn.attention(q, k, v, mode=mode, layout=layout)
        assert o.shape == q.shape and o.dtype == dtype and o.device == q.device
        assert torch.isfinite(o).all()
        err = rel_l1(o, ref_sdpa(q, k, v, layout=layout))
        assert err < BARS[mode] + (1e-2 if dtype == torch.bfloat16 else 0), (dtype, err)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("d", [40, 72, 80, 96, 160, 192, 256])
def test_head_dims(device, d):
    # more than 512 keys: with fewer (or at most 128) every mode runs EXACT
    q, k, v = (randn(1, 2, 530, d, device=device, seed=s) for s in range(3))
    o = int8attn.attention(q, k, v, mode="balanced")
    assert rel_l1(o, ref_sdpa(q, k, v)) < BARS["balanced"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("d", [72, 128])
def test_q_as_a_view_of_fused_qkv(device, d):
    """Q, K and V as views of one fused projection [B, N, 3, H, D] (Flux's and SD3's fused QKV):
    rows 3·H·D apart. The same results as from contiguous copies (on Hopper the Q rows then
    come by TMA from the strided view)."""
    qkv = randn(2, 1024, 3, 4, d, device=device, seed=11)
    q, k, v = qkv.unbind(2)  # NHD views, not contiguous
    for mode in ("balanced", "fast"):
        o = int8attn.attention(q, k, v, mode=mode, layout="NHD", k_granularity="block")
        c = int8attn.attention(*(x.contiguous() for x in (q, k, v)), mode=mode, layout="NHD",
                               k_granularity="block")
        ref = ref_sdpa(q, k, v, layout="NHD")
        assert rel_l1(o, ref) < BARS[mode]
        # the strided views and the copies may take different load paths
        assert rel_l1(o, c.double().cpu()) < 2e-3


@pytest.mark.parametrize("device", DEVICES)
def test_gqa_causal_lse(device):
    # 300 keys of 128 channels: more than 256, so BALANCED runs quantized (fewer run EXACT)
    q = randn(2, 8, 300, 128, device=device, seed=1)
    k, v = randn(2, 2, 300, 128, device=device, seed=2), randn(2, 2, 300, 128, device=device,
                                                               seed=3)
    o, lse = int8attn.attention(q, k, v, mode="exact", causal=True, return_lse=True)
    assert rel_l1(o, ref_sdpa(q, k, v, causal=True)) < BARS["exact"]
    assert lse.dtype == torch.float32 and lse.shape == (2, 8, 300) and lse.device == q.device
    qd, kd = q.double().cpu(), k.double().cpu().repeat_interleave(4, 1)
    s = qd @ kd.transpose(-1, -2) / 128 ** 0.5
    s = s.masked_fill(torch.ones(300, 300, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(lse.double().cpu(), torch.logsumexp(s, -1), atol=2e-2, rtol=0)
    o = int8attn.attention(q, k, v, mode="balanced", causal=True)
    assert rel_l1(o, ref_sdpa(q, k, v, causal=True)) < BARS["balanced"]


@pytest.mark.skipif(not HAS_CUDA, reason=CUDA_REASON)
def test_cuda_side_stream_and_out():
    q, k, v = (randn(1, 4, 256, 64, device="cuda", seed=s) for s in range(3))
    out = torch.empty_like(q)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        res = int8attn.attention(q, k, v, out=out)
    s.synchronize()
    assert res is out
    assert rel_l1(out, ref_sdpa(q, k, v)) < BARS["balanced"]


@pytest.mark.skipif(not HAS_CUDA, reason=CUDA_REASON)
def test_cuda_kv_cache_decode():
    b, hkv, hq, d = 2, 2, 8, 128
    k, v = randn(b, hkv, 1000, d, device="cuda", seed=1), randn(b, hkv, 1000, d, device="cuda",
                                                                seed=2)
    with int8attn.KVCache(b, hkv, 2048, d, device="cuda") as cache:
        cache.append(k[:, :, :600], v[:, :, :600])
        cache.append(k[:, :, 600:], v[:, :, 600:])
        q = randn(b, hq, 1, d, device="cuda", seed=3)
        o = cache.forward(q)
        assert rel_l1(o, ref_sdpa(q, k, v)) < BARS["balanced"]


@pytest.mark.parametrize("device", DEVICES)
def test_quantize_and_mask_on_torch(device):
    x = randn(1, 2, 128, 64, device=device, seed=4)
    x8, scales, mean = int8attn.quantize(x, smooth=True)
    assert x8.dtype == torch.int8 and x8.device == x.device
    assert scales.shape == (1, 2, 2) and mean.shape == (1, 2, 64)
    m = int8attn.predict_block_mask(x, x, q_block=64, k_block=64, keep_ratio=0.5)
    assert m.dtype == torch.uint8 and m.shape == (1, 2, 2, 2) and m.device == x.device


# ---- Int8Attention module -----------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_int8attention_module(device):
    dtype = torch.float16
    attn = int8attn.Int8Attention(num_heads=4, head_dim=64, num_timesteps=1000,
                                  use_adaptive_scaling=True)
    # more than 512 keys: with fewer every mode runs EXACT
    q, k, v = (randn(2, 4, 520, 64, device=device, dtype=dtype, seed=s) for s in range(3))
    o = attn(q, k, v, 500)
    assert o.shape == q.shape and o.dtype == dtype
    ref = ref_sdpa(q, k, v)
    assert rel_l1(o, ref) < BARS["balanced"]
    exact = int8attn.attention(q, k, v, mode="exact")
    torch.testing.assert_close(attn(q, k, v, 0), exact, rtol=0, atol=0)  # first step: exact
    torch.testing.assert_close(attn(q, k, v, torch.tensor([999])), exact, rtol=0, atol=0)
    with pytest.raises(ValueError):
        attn(q[:, :2], k, v, 5)
    lut = torch.full((1000,), 0.95)
    attn2 = int8attn.Int8Attention(4, 64, 1000, True, lut, mode="balanced")
    assert abs(attn2.policy.scale_multiplier(10) - 0.95) < 1e-6
    assert rel_l1(attn2(q, k, v, 10), ref) < BARS["balanced"] * 2


# ---- torch.compile and the custom op ------------------------------------------------------------
class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = int8attn.Int8Attention(num_heads=4, head_dim=64, use_adaptive_scaling=False,
                                           mode="balanced")
        self.proj = nn.Linear(64, 64)

    def forward(self, q, k, v):
        return self.proj(self.attn(q * 1.0, k, v)) + 1


@pytest.mark.parametrize("device", DEVICES)
def test_custom_op_opcheck(device):
    q, k, v = (randn(1, 2, 64, 64, device=device, seed=s) for s in range(3))
    args = (q, k, v, 2, False, 0.0, "HND", 0, -1)
    torch.library.opcheck(torch.ops.int8attn.attention.default, args,
                          test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()
    mod = _Block().to(device=device, dtype=torch.float16)
    q, k, v = (randn(2, 4, 128, 64, device=device, seed=s) for s in range(3))
    with torch.no_grad():
        eager = mod(q, k, v)
        backend = "inductor" if device == "cuda" else "aot_eager"
        compiled = torch.compile(mod, fullgraph=True, backend=backend)
        out = compiled(q, k, v)
        torch.testing.assert_close(out, eager, rtol=2e-2, atol=2e-2)
        explanation = torch._dynamo.explain(mod)(q, k, v)
        assert explanation.graph_break_count == 0


# ---- diffusers-style processor --------------------------------------------------------------------
class AttnProcessor2_0:
    """What diffusers' AttnProcessor2_0 does (the reference)."""

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None,
                 temb=None, *args, **kwargs):
        b = hidden_states.shape[0]
        ctx = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        q, k, v = attn.to_q(hidden_states), attn.to_k(ctx), attn.to_v(ctx)
        hd = q.shape[-1] // attn.heads
        q, k, v = (x.view(b, -1, attn.heads, hd).transpose(1, 2) for x in (q, k, v))
        if attention_mask is not None:
            attention_mask = attn.prepare_attention_mask(attention_mask, ctx.shape[1], b)
            attention_mask = attention_mask.view(b, attn.heads, -1, attention_mask.shape[-1])
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask)
        o = o.transpose(1, 2).reshape(b, -1, attn.heads * hd)
        return attn.to_out[1](attn.to_out[0](o))


class TinyAttention(nn.Module):
    """A minimal diffusers-style Attention: to_q/to_k/to_v/to_out, heads, set_processor."""

    def __init__(self, dim: int, heads: int, cross_dim: Optional[int] = None):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(cross_dim or dim, dim, bias=False)
        self.to_v = nn.Linear(cross_dim or dim, dim, bias=False)
        self.to_out = nn.ModuleList([nn.Linear(dim, dim), nn.Dropout(0.0)])
        self.residual_connection = False
        self.rescale_output_factor = 1.0
        self.processor = AttnProcessor2_0()

    def set_processor(self, processor) -> None:
        self.processor = processor

    def prepare_attention_mask(self, mask, target_length, batch_size):
        return mask.repeat_interleave(self.heads, dim=0)

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, **kw):
        params = set(inspect.signature(self.processor.__call__).parameters)
        kw = {k: v for k, v in kw.items() if k in params}  # what diffusers does
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask, **kw)


class RotaryProcessor:
    """A non-standard processor (Flux-style keyword argument) that calls F.sdpa itself."""

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None,
                 image_rotary_emb=None):
        assert image_rotary_emb is not None, "the wrapper must pass image_rotary_emb through"
        b = hidden_states.shape[0]
        q, k, v = attn.to_q(hidden_states), attn.to_k(hidden_states), attn.to_v(hidden_states)
        hd = q.shape[-1] // attn.heads
        q, k, v = (x.view(b, -1, attn.heads, hd).transpose(1, 2) for x in (q, k, v))
        q = q * image_rotary_emb
        o = F.scaled_dot_product_attention(q, k, v)
        return attn.to_out[0](o.transpose(1, 2).reshape(b, -1, attn.heads * hd))


class TinyUNet(nn.Module):
    def __init__(self, dim=128, heads=2, cross_dim=96):
        super().__init__()
        self.self_attn = TinyAttention(dim, heads)
        self.cross_attn = TinyAttention(dim, heads, cross_dim)
        self.rot_attn = TinyAttention(dim, heads)
        self.rot_attn.set_processor(RotaryProcessor())

    def forward(self, x, ctx, rot):
        x = x + self.self_attn(x)
        x = x + self.cross_attn(x, encoder_hidden_states=ctx)
        return x + self.rot_attn(x, image_rotary_emb=rot)


@pytest.mark.parametrize("device", DEVICES)
def test_processor_and_replace(device):
    torch.manual_seed(0)
    dtype = torch.float16
    unet = TinyUNet().to(device=device, dtype=dtype).eval()
    x = randn(4, 256, 128, device=device, dtype=dtype, seed=1) * 0.5  # CFG batch 2·2
    ctx = randn(4, 77, 96, device=device, dtype=dtype, seed=2)
    rot = torch.ones(1, 1, 1, 64, device=device, dtype=dtype)
    with torch.no_grad():
        ref = unet(x, ctx, rot).double()

        class Pipe:  # a stand-in for a DiffusionPipeline: components → modules
            def __init__(self, unet):
                self.unet = unet
                self.components = {"unet": unet, "scheduler": object()}

        pipe = int8attn.replace_attention_with_int8(Pipe(unet), num_inference_steps=4)
        proc = pipe._int8attn_processor
        assert isinstance(unet.self_attn.processor, int8attn.Int8AttnProcessor)
        assert unet.self_attn.processor is unet.cross_attn.processor is proc
        assert isinstance(unet.rot_attn.processor, ti.Int8SDPAProcessor)
        assert "image_rotary_emb" in inspect.signature(unet.rot_attn.processor.__call__).parameters
        assert proc.stats["swapped_modules"] == 2 and proc.stats["wrapped_modules"] == 1

        for step in range(4):
            int8attn.set_timestep(pipe, step)
            out = unet(x, ctx, rot).double()
            err = float((out - ref).abs().sum() / ref.abs().sum())
            assert err < 0.03, (step, err)
        # on a GPU, EXACT steps (and shapes the routing table prefers SDPA for) run SDPA
        assert proc.stats["int8attn"] + proc.stats["sdpa_routed"] == 12
        assert proc.stats["fallback"] == 0
        assert F.scaled_dot_product_attention is ti._ORIGINAL_SDPA  # patch undone

        kw = proc.callback_on_step_end(None, 3, 0, {"latents": 1})
        assert kw == {"latents": 1} and proc.timestep == 0

        # a key-padding bias runs int8attn with k_lengths, also with a hole (the kept keys
        # moved to the front); a bias that is not a mask (-5) falls back to SDPA, counted.
        # A FAST step with the routing table off, so the masked calls reach int8attn (step 0
        # is EXACT, which the table sends to SDPA before any mask is read).
        int8attn.set_timestep(pipe, 1)
        proc.route = "always"
        pad = torch.zeros(4, 1, 77, device=device, dtype=dtype)
        pad[:, :, 70:] = float("-inf")
        holes = torch.zeros(4, 1, 77, device=device, dtype=dtype)
        holes[:, :, 3] = float("-inf")
        soft = torch.zeros(4, 1, 77, device=device, dtype=dtype)
        soft[:, :, 3] = -5.0
        before = proc.stats["int8attn"] + proc.stats["sdpa_routed"]
        outs = [unet.cross_attn(x, encoder_hidden_states=ctx, attention_mask=m)
                for m in (pad, holes, soft)]
        unet.cross_attn.set_processor(AttnProcessor2_0())
        for o, m in zip(outs, (pad, holes, soft)):
            ref = unet.cross_attn(x, encoder_hidden_states=ctx, attention_mask=m)
            torch.testing.assert_close(o, ref, rtol=1e-2, atol=1e-2)
        assert proc.stats["fallback"] == 1
        assert proc.stats["int8attn"] + proc.stats["sdpa_routed"] == before + 2


@pytest.mark.parametrize("device", DEVICES)
def test_processor_4d_input_and_fp32(device):
    attn = TinyAttention(64, 2).to(device=device)
    x = randn(2, 64, 8, 8, device=device, dtype=torch.float32, seed=5)

    def run(p):
        with torch.no_grad():
            hs = x.view(2, 64, 64).transpose(1, 2)
            return p(attn, x) if isinstance(p, int8attn.Int8AttnProcessor) else \
                p(attn, hs).transpose(-1, -2).reshape(2, 64, 8, 8)

    proc = int8attn.Int8AttnProcessor(mode="balanced")
    out = run(proc)
    ref = run(AttnProcessor2_0())
    assert out.shape == x.shape and out.dtype == torch.float32
    assert float((out - ref).abs().sum() / ref.abs().sum()) < 0.03


@pytest.mark.parametrize("device", DEVICES)
def test_rms_norm_matches_the_cpu_backend(device):
    """int8attn.rms_norm gives the same bits on every backend (fixed summation order), through
    the general and the per-call path, for per-head rows and rows across heads."""
    from int8attn import _fastpath

    for shape in [(2, 300, 24, 128), (1, 77, 1536)]:
        x = randn(*shape, device=device, dtype=torch.bfloat16, seed=3) * 3
        w = (1 + 0.3 * randn(shape[-1], device=device, dtype=torch.float32, seed=4)).to(
            torch.bfloat16)
        cpu = int8attn.rms_norm(x.cpu(), w.cpu(), eps=1e-6)
        out = torch.empty_like(x)
        assert _fastpath.rms_norm(x, w, out, 1e-6)
        assert torch.equal(out.cpu().view(torch.int16), cpu.view(torch.int16))
        general = int8attn.rms_norm(x, w, eps=1e-6)
        assert torch.equal(general.cpu().view(torch.int16), cpu.view(torch.int16))


def _qwen_rotary(x, freqs_cis, use_real=True, use_real_unbind_dim=-1):
    """Qwen-Image's ``apply_rotary_emb_qwen`` with ``use_real=False`` (diffusers 0.42.1), for a
    test without diffusers."""
    assert not use_real
    x_rotated = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    x_out = torch.view_as_real(x_rotated * freqs_cis.unsqueeze(1)).flatten(3)
    return x_out.type_as(x)


def _z_image_rotary(x_in, freqs_cis):
    """Z-Image's nested ``apply_rotary_emb`` (diffusers 0.42.1): freqs_cis [B, S, D/2]."""
    with torch.amp.autocast("cuda", enabled=False):
        x = torch.view_as_complex(x_in.float().reshape(*x_in.shape[:-1], -1, 2))
        x_out = torch.view_as_real(x * freqs_cis.unsqueeze(2)).flatten(3)
        return x_out.type_as(x_in)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", ["qwen-image", "z-image"])
def test_complex_rotary_is_pytorchs_product_bit_for_bit(device, model):
    """The complex rotary products of Qwen-Image and Z-Image: on CUDA int8attn's COMPLEX_FMA
    arithmetic gives PyTorch's bits (the stand-in's first-call check passes and later calls
    agree too); on the CPU, whose kernels evaluate the product otherwise, the original runs."""
    from int8attn import _rotary

    S, D = 300, 128
    angles = randn(S, D // 2, device=device, dtype=torch.float32, seed=11) * 40
    freqs = torch.polar(torch.ones_like(angles), angles)  # complex64 [S, D/2]
    if model == "qwen-image":
        lean = _rotary.lean_complex_rotary(_qwen_rotary)
        original, kw = _qwen_rotary, {"use_real": False}
    else:
        lean = _rotary.lean_complex_rotary(_z_image_rotary, batched_freqs=True)
        original, kw, freqs = _z_image_rotary, {}, freqs[None]
    for dtype in (torch.bfloat16, torch.float32):
        for seed in (12, 13):
            x = randn(1, S, 24, D, device=device, dtype=dtype, seed=seed) * 4
            out, ref = lean(x, freqs, **kw), original(x, freqs, **kw)
            assert torch.equal(out.view(torch.uint8), ref.view(torch.uint8))
    assert lean.state == ({"checked": True, "ok": True} if device == "cuda"
                          else {"checked": False, "ok": True})


@pytest.mark.parametrize("device", DEVICES)
def test_key_padding_mask_runs_as_k_lengths(device):
    """sdpa_int8 with a key-padding mask runs int8attn (k_lengths; with holes, the kept keys
    moved to the front first) and agrees with masked SDPA; a per-query mask falls back."""
    from int8attn import _processors

    proc = _processors.Int8AttnProcessor(mode="balanced", route="always")
    # more than 512 keys: the quantized kernels' valid lengths (with fewer all run EXACT)
    q, k, v = (randn(2, 4, 600, 64, device=device, seed=s) for s in (5, 6, 7))
    mask = torch.ones(2, 1, 1, 600, dtype=torch.bool, device=device)
    mask[1, ..., 550:] = False
    ref = F.scaled_dot_product_attention(q.double().cpu(), k.double().cpu(), v.double().cpu(),
                                         attn_mask=mask.cpu())
    out = _processors.sdpa_int8(q, k, v, attn_mask=mask, processor=proc)
    assert proc.stats["int8attn"] == 1 and proc.stats["fallback"] == 0
    assert rel_l1(out, ref) < BARS["balanced"]
    holes = mask.clone()
    holes[0, ..., 7] = False
    holes[1, ..., 100:120] = False
    ref = F.scaled_dot_product_attention(q.double().cpu(), k.double().cpu(), v.double().cpu(),
                                         attn_mask=holes.cpu())
    out = _processors.sdpa_int8(q, k, v, attn_mask=holes, processor=proc)
    assert proc.stats["int8attn"] == 2 and proc.stats["fallback"] == 0
    assert rel_l1(out, ref) < BARS["balanced"]
    per_query = torch.ones(2, 1, 600, 600, dtype=torch.bool, device=device).tril()
    _processors.sdpa_int8(q, k, v, attn_mask=per_query, processor=proc)
    assert proc.stats["fallback"] == 1


@pytest.mark.parametrize("device", DEVICES)
def test_sageattn_as_comfyui_calls_it(device):
    """ComfyUI's attention_sage: ``sageattn(q, k, v, attn_mask=mask, is_causal=False,
    tensor_layout="NHD")``. A float key-padding mask (ComfyUI's additive form) runs int8attn
    with k_lengths and agrees with masked SDPA, also with holes (the kept keys moved to the
    front); a per-query mask runs SDPA. (route="always": with "auto" a call the routing table
    sends to SDPA takes its mask there unread.)"""
    from int8attn import _sage

    _sage.stats.update(int8attn=0, sdpa_routed=0, sdpa_masked=0)
    # NHD, more than 512 keys: the quantized kernels' valid lengths (with fewer all run EXACT)
    q, k, v = (randn(2, 600, 4, 64, device=device, seed=s) for s in (8, 9, 10))
    mask = torch.zeros(2, 1, 1, 600, dtype=torch.float16, device=device)
    mask[1, ..., 550:] = -float("inf")
    hnd = [x.transpose(1, 2).double().cpu() for x in (q, k, v)]
    ref = F.scaled_dot_product_attention(*hnd, attn_mask=mask.double().cpu()).transpose(1, 2)
    out = int8attn.sageattn(q, k, v, attn_mask=mask, is_causal=False, tensor_layout="NHD",
                            route="always")
    assert out.shape == q.shape and rel_l1(out, ref) < BARS["fast"]
    assert _sage.stats["int8attn"] == 1
    lengths = torch.tensor([600, 550], dtype=torch.int32, device=device)
    by_lengths = int8attn.attention(q, k, v, mode="fast", layout="NHD", k_granularity="block",
                                    k_lengths=lengths)
    # the same call: the same bits (the statistics add in a fixed order on the GPU too)
    assert torch.equal(out, by_lengths)
    holes = mask.clone()
    holes[0, ..., 7] = -float("inf")
    out = int8attn.sageattn(q, k, v, attn_mask=holes, tensor_layout="NHD", route="always")
    ref = F.scaled_dot_product_attention(*hnd, attn_mask=holes.double().cpu()).transpose(1, 2)
    assert rel_l1(out, ref) < BARS["fast"] and _sage.stats["int8attn"] == 2
    per_query = torch.ones(2, 1, 600, 600, dtype=torch.bool, device=device).tril()
    out = int8attn.sageattn(q, k, v, attn_mask=per_query, tensor_layout="NHD", route="always")
    ref = F.scaled_dot_product_attention(*hnd, attn_mask=per_query.cpu()).transpose(1, 2)
    assert rel_l1(out, ref) < 1e-2 and _sage.stats["sdpa_masked"] == 1


# ---- CUDA graphs (docs/diffusers.md#cuda-graphs) --------------------------------------------------
def captured(fn):
    """``fn`` warmed up on a side stream, then captured by torch.cuda.graph (PyTorch's recipe)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


@pytest.mark.skipif(not HAS_CUDA, reason=CUDA_REASON)
def test_cuda_graph_replays_after_the_workspace_grew():
    """A replay writes where the capture's workspace was: after a larger call grew the
    context's workspace, that buffer is still the context's, so memory allocated since (small
    torch tensors in fresh segments, where a freed buffer's addresses would be reused) stays
    untouched, and the replay still computes the call."""
    ctx = int8attn.Context()  # its own workspace, grown only by this test
    q, k, v = (randn(1, 4, 1024, 64, device="cuda", seed=s) for s in (40, 41, 42))
    out = torch.empty_like(q)
    graph = captured(lambda: int8attn.attention(q, k, v, mode="fast", out=out, context=ctx))
    torch.cuda.synchronize()
    eager = out.clone()
    big = [randn(1, 16, 8192, 128, device="cuda", seed=s) for s in (43, 44, 45)]
    int8attn.attention(*big, mode="fast", context=ctx)
    torch.cuda.synchronize()
    del big
    torch.cuda.empty_cache()
    bystanders = [torch.full((1 << 20,), 7, dtype=torch.uint8, device="cuda") for _ in range(64)]
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert not out.isnan().any()
    assert torch.equal(out, eager)  # the same kernels on the same inputs: the same bits
    assert all(bool((b == 7).all()) for b in bystanders), "a replay wrote into freed memory"


@pytest.mark.skipif(not HAS_CUDA, reason=CUDA_REASON)
def test_cuda_graph_capture_that_needs_workspace_is_refused():
    ctx = int8attn.Context()
    q, k, v = (randn(1, 4, 1024, 64, device="cuda", seed=s) for s in (46, 47, 48))
    # Sizes the call and starts the context's CUDA backend, allocating no workspace.
    need = int8attn.forward_workspace_size(q, k, v, mode="fast", context=ctx)
    assert need > 0
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(int8attn.Int8AttnError, match="capturing a CUDA graph"):
        with torch.cuda.graph(graph):
            int8attn.attention(q, k, v, mode="fast", context=ctx)
    ctx.reserve_workspace(need)
    out = torch.empty_like(q)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # no warm-up needed once reserved
        int8attn.attention(q, k, v, mode="fast", out=out, context=ctx)
    graph.replay()
    torch.cuda.synchronize()
    eager = int8attn.attention(q, k, v, mode="fast", context=ctx)
    assert rel_l1(out, eager.double().cpu()) < 1e-3


@pytest.mark.skipif(not HAS_CUDA, reason=CUDA_REASON)
def test_cuda_graph_of_a_policy_step_warns_and_a_masked_call_runs_sdpa():
    """A processor whose policy changes modes, recorded at another step than its warm-up (as
    torch.compile's cudagraph trees record), says the graph fixes the mode; a masked call
    whose mask was not read before the capture runs SDPA with it inside the capture."""
    proc = int8attn.Int8AttnProcessor(policy=int8attn.TimestepPolicy(4), route="always")
    q, k, v = (randn(1, 600, 4, 64, device="cuda", seed=s) for s in (50, 51, 52))
    proc.set_timestep(1)  # FAST: the warm-up grows the workspace the capture needs
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        proc.attention(q, k, v, layout="NHD")
    torch.cuda.current_stream().wait_stream(side)
    proc.set_timestep(2)  # FAST too
    graph = torch.cuda.CUDAGraph()
    with pytest.warns(UserWarning, match="every replay runs step 2's mode"):
        with torch.cuda.graph(graph):
            proc.attention(q, k, v, layout="NHD")

    masked = int8attn.Int8AttnProcessor(mode="fast", route="always")
    out = torch.empty_like(q)

    def call():
        mask = torch.ones(1, 1, 1, 600, dtype=torch.bool, device="cuda")
        mask[..., 550:] = False  # a new tensor every call, as the models make theirs

        def sdpa():
            return F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                attn_mask=mask).transpose(1, 2)

        out.copy_(masked._masked(q, k, v, mask, "NHD", False, None, sdpa))

    graph = captured(call)  # the warm-up calls read their masks: int8attn with k_lengths
    assert masked.stats["int8attn"] == 2 and masked.stats["fallback"] == 1
    out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    mask = torch.ones(1, 1, 1, 600, dtype=torch.bool)
    mask[..., 550:] = False
    hnd = [x.transpose(1, 2).double().cpu() for x in (q, k, v)]
    ref = F.scaled_dot_product_attention(*hnd, attn_mask=mask).transpose(1, 2)
    assert rel_l1(out, ref) < 1e-2


@pytest.mark.skipif(not HAS_CUDA, reason=CUDA_REASON)
def test_cuda_graph_refuses_a_module_timestep_on_the_device():
    """Int8Attention reads its timestep on the host: inside a capture a CUDA timestep is refused
    by name (its read would end the capture), and a Python int records that step's mode."""
    m = int8attn.Int8Attention(4, 64, num_timesteps=10, mode="fast")
    q, k, v = (randn(1, 4, 512, 64, device="cuda", seed=s) for s in (53, 54, 55))
    m(q, k, v, timestep=5)  # grows the default context's workspace outside the capture
    t_dev = torch.tensor([5], device="cuda")  # a host-to-device copy: not inside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="timestep: a cuda tensor"):
        with torch.cuda.graph(graph):
            m(q, k, v, timestep=t_dev)
    out = torch.empty_like(q)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out.copy_(m(q, k, v, timestep=5))
    graph.replay()
    torch.cuda.synchronize()
    assert rel_l1(out, m(q, k, v, timestep=5).double().cpu()) < 1e-3
