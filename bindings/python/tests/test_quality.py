"""Image quality of the precision modes on a real (trained) model, on the CPU backend.

The committed digits DiT (bench/quality/, docs/quality.md) samples 8 images in 10 Euler steps
from the same noise with EXACT, BALANCED, FAST and the library's default timestep policy; each
must stay within a measured PSNR of EXACT, so a numerics regression in the quantized paths (or
in the policy) fails CI with a picture-level symptom, not just an operator-level one.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the quality test samples a torch model")

import int8attn  # noqa: E402

QUALITY = Path(__file__).resolve().parents[3] / "bench" / "quality"
STEPS, N = 10, 8

# PSNR (dB, mean over the 8 images) against EXACT, measured on the CPU backend (2026-11-29, x86-64,
# torch 2.11, K/V repeated model.KEY_REPEATS times; seeds 0/1/2 gave balanced 59.2/59.2/59.4, fast
# 48.5/49.3/49.1, default policy 54.0/54.8/54.1). Each threshold sits 4 dB below the seed-0 value
# this test uses: far outside the seed-to-seed spread, yet a quantization error grown by ~1.6x
# (4 dB) fails. The bar for the default policy (>= 35 dB against EXACT) is implied.
MEASURED = {"balanced": 59.2, "fast": 48.5, "default policy": 54.0}
THRESHOLD = {k: v - 4.0 for k, v in MEASURED.items()}

# The model attends over 64 tokens, and on at most 512 keys (of its head dim) every mode runs
# EXACT (every row would read 100 dB and test nothing). model.int8attn_attention therefore
# repeats K and V model.KEY_REPEATS = 9 times along the keys (576 keys): the same attention
# (each key's softmax weight splits into nine equal parts, and every 64-key block and the K mean
# are those of the original keys), run on the quantized paths. The image-quality report uses
# the same factory.


def _load_model_module():
    """bench/quality/model.py under a unique module name (it has no sibling imports)."""
    path = QUALITY / "model.py"
    if not (QUALITY / "weights" / "dit_digits.pt").exists():
        pytest.skip(f"no trained weights under {QUALITY / 'weights'}")
    spec = importlib.util.spec_from_file_location("int8attn_quality_model", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def samples():
    M = _load_model_module()
    net = M.load_dit()
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(N, 1, M.IMG, M.IMG, generator=g)
    labels = torch.arange(N) % M.NUM_CLASSES
    assert M.KEY_REPEATS == 9  # the thresholds were measured with 576 keys
    attn = {"exact": M.int8attn_attention("exact"),
            "balanced": M.int8attn_attention("balanced"),
            "fast": M.int8attn_attention("fast"),
            "default policy": M.int8attn_attention(policy=int8attn.TimestepPolicy(STEPS)),
            "sdpa": M.sdpa_attention}
    # One torch thread: the model is tiny, and two threads on a busy 2-core runner spin-wait
    # each other (measured 2 s with one thread, 27 s with two while another job ran).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {k: M.sample(net, noise, labels, STEPS, "euler", a) for k, a in attn.items()}
    finally:
        torch.set_num_threads(threads)


def _psnr(a, b):
    """Mean per-image PSNR in dB of [-1, 1] images (data range 1)."""
    mse = ((a.clamp(-1, 1) - b.clamp(-1, 1)) / 2).pow(2).flatten(1).mean(1)
    return float((10 * torch.log10(1.0 / mse.clamp_min(1e-10))).mean())


@pytest.mark.parametrize("row", sorted(THRESHOLD))
def test_psnr_against_exact(samples, row):
    p = _psnr(samples[row], samples["exact"])
    assert p >= THRESHOLD[row], f"{row}: PSNR {p:.2f} dB vs EXACT < {THRESHOLD[row]:.2f} dB"


def test_exact_matches_float_sdpa(samples):
    # EXACT is float attention: its samples equal PyTorch SDPA's up to rounding (measured 100 dB,
    # the cap: identical after clamping to 1e-10 MSE).
    assert _psnr(samples["exact"], samples["sdpa"]) > 80.0
