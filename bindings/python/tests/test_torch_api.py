"""The torch-facing API's traps of issue 26 (CPU backend; needs torch).

Mode against policy in the processors and the op, the op registered whichever of int8attn and
torch is imported first, ``sdpa_int8`` among the package's names, inputs that require grad, and
the early one-line errors of ``Int8Attention`` and ``replace_attention_with_int8``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import int8attn  # noqa: E402


def randn(*shape, seed=0, dtype=torch.float32, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype).requires_grad_(requires_grad)


def qkv(n=64, d=32, seed=0, nk=520):
    # K/V with more than 512 keys: with fewer every mode runs EXACT and the modes look alike
    return (randn(1, 2, n, d, seed=seed),) + tuple(randn(1, 2, nk, d, seed=seed + i)
                                                   for i in (1, 2))


def by_mode(q, k, v, **kw):
    return {m: int8attn.attention(q, k, v, mode=m, **kw) for m in ("exact", "balanced", "fast")}


# ---- mode against policy ---------------------------------------------------------------------
def test_attention_policy_decides_by_default():
    q, k, v = qkv()
    runs = by_mode(q, k, v)
    assert not torch.equal(runs["exact"], runs["fast"])
    pol = int8attn.TimestepPolicy(3)  # EXACT, FAST, EXACT
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ModeOverridesPolicyWarning without an explicit mode
        for t, want in enumerate(["exact", "fast", "exact"]):
            assert torch.equal(int8attn.attention(q, k, v, policy=pol, timestep=t), runs[want])
    with pytest.warns(int8attn.ModeOverridesPolicyWarning, match="mode='fast'"):
        o = int8attn.attention(q, k, v, mode="fast", policy=pol, timestep=0)
    assert torch.equal(o, runs["fast"])


def test_op_default_mode_lets_the_policy_decide():
    q, k, v = qkv()
    runs = by_mode(q, k, v)
    pol = int8attn.TimestepPolicy(3)
    # schema default mode=0 (INT8ATTN_MODE_DEFAULT): the policy's mode for the step
    o = torch.ops.int8attn.attention(q, k, v, policy=pol.handle, timestep=0)
    assert torch.equal(o, runs["exact"])
    assert torch.equal(torch.ops.int8attn.attention(q, k, v), runs["balanced"])  # no policy


def _processor_out(proc, q, k, v):
    return proc.attention(q, k, v, layout="HND")


def test_processor_policy_decides_and_explicit_mode_wins():
    q, k, v = qkv()
    runs = by_mode(q, k, v, k_granularity=None)
    fast_block = int8attn.attention(q, k, v, mode="fast", k_granularity="block")
    pol = int8attn.TimestepPolicy(3)  # EXACT, FAST, EXACT
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        proc = int8attn.Int8AttnProcessor(policy=pol, route="always")
    proc.set_timestep(0)
    assert torch.equal(_processor_out(proc, q, k, v), runs["exact"])
    proc.set_timestep(1)
    assert torch.equal(_processor_out(proc, q, k, v), fast_block)  # FAST: per-block K scales
    with pytest.warns(int8attn.ModeOverridesPolicyWarning, match="Int8AttnProcessor"):
        forced = int8attn.Int8AttnProcessor(mode="balanced", policy=pol, route="always")
    for t in range(3):
        forced.set_timestep(t)
        assert torch.equal(_processor_out(forced, q, k, v), runs["balanced"]), t
    # without a policy: balanced, as before
    assert torch.equal(_processor_out(int8attn.Int8AttnProcessor(route="always"), q, k, v),
                       runs["balanced"])


def test_replace_attention_policy_arguments():
    module = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="num_inference_steps"):
        int8attn.replace_attention_with_int8(module, policy=int8attn.TimestepPolicy(3),
                                             num_inference_steps=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # nothing to swap in a Linear
        int8attn.replace_attention_with_int8(module, num_inference_steps=4)
    proc = module._int8attn_processor
    # mode=None builds the policy with BALANCED ordinary steps (the documented default)
    assert [str(m) for m in proc.policy.modes()] == ["exact", "balanced", "balanced", "exact"]
    assert proc.mode == int8attn.Mode.DEFAULT


# ---- CUDA graphs ------------------------------------------------------------------------------
def test_capture_with_a_policy_that_changes_modes_warns_once(monkeypatch):
    # A graph replays what it captured: with torch.compile(mode="reduce-overhead") every step
    # runs the recorded step's mode. The processor says so, once, when it sees a capture.
    capturing = {"now": False}
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing["now"])
    proc = int8attn.Int8AttnProcessor(policy=int8attn.TimestepPolicy(4), route="always")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        proc.set_timestep(0)
        proc._check_capture()  # no capture: nothing to say
        capturing["now"] = True
        proc._check_capture()  # the same step is looked at once
    proc.set_timestep(1)
    with pytest.warns(UserWarning, match=r"CUDA graph .*\(exact, fast\).* every replay runs "
                                         r"step 1's mode \(fast\)"):
        proc._check_capture()
    proc.set_timestep(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        proc._check_capture()  # once per processor


def test_capture_with_a_policy_of_one_mode_is_silent(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    proc = int8attn.Int8AttnProcessor(
        policy=int8attn.TimestepPolicy(4, default_mode="fast", edge_mode="fast"), route="always")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for t in range(4):
            proc.set_timestep(t)
            proc._check_capture()


def test_module_timestep_on_the_device_inside_a_capture_is_refused(monkeypatch):
    # Int8Attention reads its timestep on the host; inside a capture that read would end the
    # capture, so a device tensor is refused there with the argument and the remedy named.
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    m = int8attn.Int8Attention(2, 16, num_timesteps=10)
    q = torch.randn(1, 2, 8, 16)
    with pytest.raises(RuntimeError, match=r"timestep: a meta tensor .*CUDA graph.*Python int"):
        m(q, q, q, timestep=torch.tensor([3], device="meta"))
    # Host values stay readable inside a capture (the module's own CPU path here).
    ref = int8attn.Int8Attention(2, 16, num_timesteps=10)(q, q, q, timestep=3)
    torch.testing.assert_close(m(q, q, q, timestep=torch.tensor([3])), ref)
    torch.testing.assert_close(m(q, q, q, timestep=3), ref)


def test_cpu_calls_never_query_a_cuda_stream(monkeypatch):
    def no_cuda():
        raise AssertionError("a CPU call asked whether a CUDA stream captures")

    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", no_cuda)
    q, k, v = qkv()
    proc = int8attn.Int8AttnProcessor(policy=int8attn.TimestepPolicy(3), route="always")
    for t in range(3):
        proc.set_timestep(t)
        _processor_out(proc, q, k, v)
    assert proc.stats["int8attn"] == 3


# ---- the op and the package's names -----------------------------------------------------------
def _run_python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    pkg_parent = str(Path(int8attn.__file__).resolve().parents[1])
    env["PYTHONPATH"] = pkg_parent + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("order", ["int8attn first", "torch first"])
def test_op_registered_whichever_is_imported_first(order):
    first, second = ("int8attn", "torch") if order == "int8attn first" else ("torch", "int8attn")
    code = (f"import sys, {first}\n"
            "assert ('torch' in sys.modules) == ('torch' == '" + first + "'), 'torch imported'\n"
            f"import {second}, torch\n"
            "op = torch.ops.int8attn.attention\n"
            "q = torch.randn(1, 1, 8, 16)\n"
            "print(float(op(q, q, q, 1).sub(torch.nn.functional.scaled_dot_product_attention"
            "(q, q, q)).abs().max()))\n")
    r = _run_python(code)
    assert r.returncode == 0, r.stderr
    assert float(r.stdout.strip()) < 1e-5  # EXACT (mode 1) against SDPA


def test_sdpa_int8_is_a_listed_name():
    assert "sdpa_int8" in int8attn.__all__ and "sdpa_int8" in dir(int8attn)
    assert "ModeOverridesPolicyWarning" in int8attn.__all__
    q, k, v = (randn(1, 2, 64, 32, seed=s) for s in range(3))
    o = int8attn.sdpa_int8(q, k, v)
    torch.testing.assert_close(o, F.scaled_dot_product_attention(q, k, v), atol=0.05, rtol=0)


# ---- autograd ---------------------------------------------------------------------------------
def test_inputs_requiring_grad_are_refused():
    q = randn(1, 2, 64, 32, seed=0, requires_grad=True)
    k, v = randn(1, 2, 64, 32, seed=1), randn(1, 2, 64, 32, seed=2)
    with pytest.raises(int8attn.NotSupportedError, match=r"q: require grad.*no_grad"):
        int8attn.attention(q, k, v)
    with pytest.raises(int8attn.NotSupportedError, match="require grad"):
        int8attn.attention(q.transpose(2, 3).contiguous().transpose(2, 3), k, v)  # general path
    with pytest.raises(int8attn.NotSupportedError, match="require grad"):
        int8attn.sageattn(q, k, v)
    with pytest.raises(int8attn.NotSupportedError, match="require grad"):
        torch.ops.int8attn.attention(q, k, v)
    with torch.no_grad():
        o = int8attn.attention(q, k, v)
    assert torch.equal(o, int8attn.attention(q.detach(), k, v))


def test_processor_falls_back_to_sdpa_for_autograd():
    q = randn(1, 2, 64, 32, seed=0, requires_grad=True)
    k, v = randn(1, 2, 64, 32, seed=1), randn(1, 2, 64, 32, seed=2)
    proc = int8attn.Int8AttnProcessor(route="always")
    o = int8attn.sdpa_int8(q, k, v, processor=proc)
    assert proc.stats["fallback"] == 1 and proc.stats["int8attn"] == 0
    o.sum().backward()  # SDPA's backward: the gradient reaches q
    assert q.grad is not None and float(q.grad.abs().sum()) > 0
    with pytest.raises(int8attn.NotSupportedError):  # fallback=False: the error, not SDPA
        int8attn.sdpa_int8(q, k, v, processor=int8attn.Int8AttnProcessor(fallback=False))


# ---- early, one-line errors -------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, match", [
    (dict(num_heads=2, head_dim=7), r"head_dim: 7 is not supported.*multiples of 8 in \[8, 256\]"),
    (dict(num_heads=2, head_dim=264), r"head_dim: 264"),
    (dict(num_heads=0, head_dim=64), r"num_heads"),
    (dict(num_heads=2, head_dim=64, num_timesteps=0), r"num_timesteps"),
    (dict(num_heads=2, head_dim=64, layout="BHND"), r"layout"),
])
def test_int8attention_rejects_bad_configuration(kwargs, match):
    with pytest.raises(ValueError, match=match):
        int8attn.Int8Attention(**kwargs)


def test_int8attention_timestep_outside_schedule():
    m = int8attn.Int8Attention(2, 32, num_timesteps=50)
    q, k, v = qkv()
    last = m(q, k, v, timestep=49)
    assert torch.equal(m(q, k, v, timestep=50), last)  # t = T: the last step (flow matching)
    assert torch.equal(m(q, k, v, timestep=torch.tensor([50.0])), last)
    with pytest.raises(ValueError, match=r"timestep: 999 is outside \[0, 50\].*num_timesteps"):
        m(q, k, v, timestep=999)
    with pytest.raises(ValueError, match="timestep: -1"):
        m(q, k, v, timestep=-1)


def test_lists_are_refused_with_what_to_pass():
    q = [[[[0.5] * 8] * 4]]
    with pytest.raises(TypeError, match=r"q: expected a numpy array or torch tensor, got a list"):
        int8attn.attention(q, q, q)


def test_replace_attention_warns_when_nothing_found():
    with pytest.warns(UserWarning, match="found no attention module.*Sequential"):
        int8attn.replace_attention_with_int8(torch.nn.Sequential(torch.nn.Linear(2, 2)))
