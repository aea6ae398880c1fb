"""Errors, policy, K/V cache, quantization, info, ABI and struct layouts (CPU backend)."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import int8attn
from int8attn import _lib
from reference import attention_ref, randn, rel_l1

REPO = Path(__file__).resolve().parents[3]
HEADER = REPO / "include" / "int8attn.h"


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


# ---- errors -----------------------------------------------------------------------------------
def test_unsupported_head_dim_names_argument(rng):
    q = randn(rng, 1, 1, 16, 12)
    with pytest.raises(int8attn.NotSupportedError) as ei:
        int8attn.attention(q, q, q)
    e = ei.value
    assert e.status == _lib.ERROR_UNSUPPORTED_HEAD_DIM
    assert "head dim" in e.message and "q" in e.message and "12" in e.message
    assert isinstance(e, int8attn.Int8AttnError)
    assert int8attn.last_error() == e.message


def test_shape_mismatch_is_invalid_argument(rng):
    q, k = randn(rng, 1, 2, 16, 64), randn(rng, 1, 2, 16, 64)
    v = randn(rng, 1, 2, 17, 64)
    with pytest.raises(int8attn.InvalidArgumentError) as ei:
        int8attn.attention(q, k, v)
    assert 100 <= ei.value.status < 200
    assert "v" in ei.value.message
    assert isinstance(ei.value, ValueError)


def test_gqa_head_ratio_error(rng):
    q, k = randn(rng, 1, 3, 16, 64), randn(rng, 1, 2, 16, 64)
    with pytest.raises(int8attn.InvalidArgumentError) as ei:
        int8attn.attention(q, k, k)
    assert "head" in ei.value.message


def test_dtype_mismatch(rng):
    q = randn(rng, 1, 1, 16, 64)
    k = randn(rng, 1, 1, 16, 64, dtype=np.float16)
    with pytest.raises(int8attn.InvalidArgumentError) as ei:
        int8attn.attention(q, k, k)
    assert ei.value.status == _lib.ERROR_BAD_DTYPE
    assert "dtype" in ei.value.message


def test_output_untouched_on_error(rng):
    q, k = randn(rng, 1, 2, 16, 64), randn(rng, 1, 2, 16, 64)
    out = np.full((1, 2, 15, 64), 7.0, dtype=np.float32)
    with pytest.raises(int8attn.InvalidArgumentError) as ei:
        int8attn.attention(q, k, k, out=out)
    # The library names its argument `o`; the binding reports the name the caller used.
    assert ei.value.message.startswith("out:"), ei.value.message
    assert "tokens" in ei.value.message
    assert np.all(out == 7.0)


def test_python_side_errors(rng):
    q = randn(rng, 1, 1, 16, 64)
    with pytest.raises(TypeError, match="float64"):
        int8attn.attention(q.astype(np.float64), q, q)
    with pytest.raises(ValueError, match="mode"):
        int8attn.attention(q, q, q, mode="turbo")
    with pytest.raises(ValueError, match="timestep"):
        int8attn.attention(q, q, q, timestep=3)
    with pytest.raises(ValueError, match="layout"):
        int8attn.attention(q, q, q, layout="NDH")
    with pytest.raises(ValueError, match="NHD"):
        int8attn.attention(q[0], q[0], q[0], layout="NHD")


def test_bad_scalar_values(rng):
    q = randn(rng, 1, 1, 16, 64)
    with pytest.raises(int8attn.InvalidArgumentError) as ei:
        int8attn.attention(q, q, q, sm_scale=float("nan"))
    assert "sm_scale" in ei.value.message
    with pytest.raises(int8attn.InvalidArgumentError) as ei:
        int8attn.attention(q, q, q, scale_multiplier=2.0)
    assert "scale_multiplier" in ei.value.message


def test_k_lengths_out_of_range(rng):
    q = randn(rng, 2, 1, 16, 64)
    with pytest.raises(int8attn.InvalidArgumentError) as ei:
        int8attn.attention(q, q, q, k_lengths=[3, 99])
    assert "k_lengths" in ei.value.message


def test_status_strings():
    assert int8attn.status_string(0)
    assert int8attn.status_string(12345) == "unknown status"
    for status, cls in [(101, int8attn.InvalidArgumentError), (202, int8attn.NotSupportedError),
                        (300, int8attn.DeviceError), (301, int8attn.OutOfMemoryError),
                        (900, int8attn.InternalError)]:
        assert _lib.error_class(status) is cls


# ---- info and ABI -------------------------------------------------------------------------------
def test_info():
    info = int8attn.info()
    assert info["version"] == int8attn.version()
    assert info["abi_version"] == int8attn.ABI_VERSION == 1
    assert "cpu" in info["features"]
    assert isinstance(info["devices"], list)
    assert os.path.exists(info["library"])
    major, minor, patch = (int(x) for x in info["version"].split("."))
    assert info["version_number"] == major * 10000 + minor * 100 + patch


# Sizes of the public structs on LP64 platforms (Linux/macOS x86-64, aarch64).
EXPECTED_SIZES = {
    "int8attn_tensor_t": 120,
    "int8attn_context_params_t": 24,
    "int8attn_policy_params_t": 56,
    "int8attn_forward_params_t": 104,
    "int8attn_quantize_params_t": 24,
    "int8attn_kv_cache_params_t": 56,
    "int8attn_mask_params_t": 40,
}


@pytest.mark.skipif(ctypes.sizeof(ctypes.c_void_p) != 8, reason="sizes are for LP64")
@pytest.mark.parametrize("name", sorted(EXPECTED_SIZES))
def test_struct_sizes(name):
    assert ctypes.sizeof(_lib.STRUCTS[name]) == EXPECTED_SIZES[name]


def test_struct_size_matches_init():
    """The library's *_params_init sets struct_size to sizeof() of its own struct."""
    lib = _lib.lib()
    for fn, cls in [("int8attn_context_params_init", _lib.ContextParams),
                    ("int8attn_policy_params_init", _lib.PolicyParams),
                    ("int8attn_forward_params_init", _lib.ForwardParams),
                    ("int8attn_quantize_params_init", _lib.QuantizeParams),
                    ("int8attn_kv_cache_params_init", _lib.KVCacheParams),
                    ("int8attn_mask_params_init", _lib.MaskParams)]:
        p = cls()
        getattr(lib, fn)(ctypes.byref(p))
        assert p.struct_size == ctypes.sizeof(cls), fn


def _cc():
    return shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


@pytest.mark.skipif(not _cc() or not HEADER.exists(), reason="needs a C compiler and the header")
def test_struct_layout_matches_c_compiler(tmp_path):
    """Every field's offset and size in the ctypes mirrors equals the C compiler's."""
    lines = []
    for cname, cls in _lib.STRUCTS.items():
        lines.append(f'printf("{cname} %zu\\n", sizeof({cname}));')
        for fname, _ in cls._fields_:
            lines.append(f'printf("{cname}.{fname} %zu %zu\\n", offsetof({cname}, {fname}), '
                         f'sizeof((({cname}*)0)->{fname}));')
    src = tmp_path / "layout.c"
    src.write_text("#include <stdio.h>\n#include <stddef.h>\n#include \"int8attn.h\"\n"
                   "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run([_cc(), "-std=c99", "-I", str(HEADER.parent), str(src), "-o", str(exe)],
                   check=True)
    c_out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    seen = 0
    for line in filter(None, c_out):
        key, *vals = line.split()
        if "." not in key:
            assert ctypes.sizeof(_lib.STRUCTS[key]) == int(vals[0]), key
        else:
            cname, fname = key.split(".")
            field = getattr(_lib.STRUCTS[cname], fname)
            assert (field.offset, field.size) == (int(vals[0]), int(vals[1])), key
        seen += 1
    assert seen == sum(len(c._fields_) + 1 for c in _lib.STRUCTS.values())


def _run_python(code: str, env_extra: dict) -> subprocess.CompletedProcess:
    env = dict(os.environ, **env_extra)
    src = Path(int8attn.__file__).resolve().parents[1]
    env["PYTHONPATH"] = str(src) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_missing_library_gives_clear_error(tmp_path):
    r = _run_python("import int8attn", {"INT8ATTN_LIBRARY": str(tmp_path / "nope.so")})
    assert r.returncode != 0
    assert "LibraryNotFoundError" in r.stderr and "INT8ATTN_LIBRARY" in r.stderr


@pytest.mark.skipif(not _cc(), reason="needs a C compiler")
def test_abi_mismatch_is_refused(tmp_path):
    src = tmp_path / "fake.c"
    src.write_text("unsigned int int8attn_abi_version(void) { return 2; }\n")
    lib = tmp_path / "libfake.so"
    subprocess.run([_cc(), "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    r = _run_python("import int8attn", {"INT8ATTN_LIBRARY": str(lib)})
    assert r.returncode != 0
    assert "ABI version 2" in r.stderr and "ABI version 1" in r.stderr


# ---- timestep policy ----------------------------------------------------------------------------
def test_policy_defaults_and_overrides():
    with int8attn.TimestepPolicy(10) as pol:
        assert len(pol) == 10
        modes = pol.modes()
        assert modes[0] == int8attn.Mode.EXACT and modes[-1] == int8attn.Mode.EXACT
        assert all(m == int8attn.Mode.FAST for m in modes[1:-1])
        pol.set_mode(4, "balanced")
        assert pol.mode(4) == int8attn.Mode.BALANCED and str(pol.mode(4)) == "balanced"
        assert pol.scale_multiplier(3) == 1.0
        with pytest.raises(int8attn.InvalidArgumentError):
            pol.mode(10)
    assert pol.closed


def test_policy_edges_and_multipliers():
    pol = int8attn.TimestepPolicy(8, default_mode="balanced", num_first_edge=2, num_last_edge=0,
                                  scale_multipliers=[1.0, 1.0, 0.9, 0.9, 0.8, 0.8, 1.0, 1.0])
    assert pol.modes()[:3] == [int8attn.Mode.EXACT] * 2 + [int8attn.Mode.BALANCED]
    assert pol.mode(7) == int8attn.Mode.BALANCED
    assert abs(pol.scale_multiplier(4) - 0.8) < 1e-6
    with pytest.raises(int8attn.InvalidArgumentError) as ei:
        int8attn.TimestepPolicy(4, scale_multipliers=[1.0, 1.5, 1.0, 1.0])
    assert "multiplier" in ei.value.message


def test_policy_from_sigmas():
    sigmas = np.linspace(14.6, 0.03, 20).astype(np.float32)
    pol = int8attn.TimestepPolicy(sigmas=sigmas, num_first_edge=0, num_last_edge=0,
                                  sigma_edge_above=10.0, sigma_edge_below=0.5)
    assert len(pol) == 20
    for t, s in enumerate(sigmas):
        want = int8attn.Mode.EXACT if (s >= 10.0 or s <= 0.5) else int8attn.Mode.FAST
        assert pol.mode(t) == want, (t, s)


def test_attention_with_policy(rng):
    # more than 512 keys: with fewer (of 64 channels) every mode runs EXACT
    q = randn(rng, 1, 2, 64, 64)
    k, v = (randn(rng, 1, 2, 520, 64) for _ in range(2))
    pol = int8attn.TimestepPolicy(5, default_mode="balanced")
    exact = int8attn.attention(q, k, v, mode="exact")
    bal = int8attn.attention(q, k, v, mode="balanced")
    assert not np.array_equal(exact, bal)  # the modes are distinguishable
    np.testing.assert_array_equal(int8attn.attention(q, k, v, mode=None, policy=pol, timestep=0),
                                  exact)
    np.testing.assert_array_equal(int8attn.attention(q, k, v, mode=None, policy=pol, timestep=2),
                                  bal)
    # an explicit mode wins over the policy, and says so
    with pytest.warns(int8attn.ModeOverridesPolicyWarning, match="mode='balanced' overrides"):
        o = int8attn.attention(q, k, v, mode="balanced", policy=pol, timestep=0)
    np.testing.assert_array_equal(o, bal)


def test_policy_decides_with_the_default_mode(rng, recwarn):
    """Issue 26: ``attention(q, k, v, policy=pol, timestep=t)`` (no mode) runs the policy's mode
    for the step, not BALANCED; no warning. Without a policy the default is BALANCED."""
    # more than 512 keys: with fewer (of 64 channels) every mode runs EXACT
    q = randn(rng, 1, 2, 64, 64)
    k, v = (randn(rng, 1, 2, 520, 64) for _ in range(2))
    pol = int8attn.TimestepPolicy(4)  # library defaults: EXACT at both ends, FAST between
    assert pol.modes() == [int8attn.Mode.EXACT, int8attn.Mode.FAST, int8attn.Mode.FAST,
                           int8attn.Mode.EXACT]
    runs = {m: int8attn.attention(q, k, v, mode=m) for m in ("exact", "balanced", "fast")}
    assert not np.array_equal(runs["exact"], runs["fast"])  # the modes are distinguishable
    for t, want in enumerate(["exact", "fast", "fast", "exact"]):
        np.testing.assert_array_equal(int8attn.attention(q, k, v, policy=pol, timestep=t),
                                      runs[want], err_msg=f"timestep {t}")
    np.testing.assert_array_equal(int8attn.attention(q, k, v), runs["balanced"])
    # "default" spelled out is not an override either
    np.testing.assert_array_equal(
        int8attn.attention(q, k, v, mode="default", policy=pol, timestep=0), runs["exact"])
    assert not [w for w in recwarn if issubclass(w.category, int8attn.ModeOverridesPolicyWarning)]


def test_kv_cache_forward_mode_overrides_policy_warns(rng):
    k, v = (randn(rng, 1, 2, 64, 64) for _ in range(2))
    q = randn(rng, 1, 2, 4, 64)
    pol = int8attn.TimestepPolicy(3, default_mode="balanced", edge_mode="balanced")
    with int8attn.KVCache(1, 2, 64, 64, device="cpu", mode="balanced") as cache:
        cache.append(k, v)
        base = cache.forward(q, policy=pol, timestep=1)
        with pytest.warns(int8attn.ModeOverridesPolicyWarning, match="KVCache.forward"):
            o = cache.forward(q, mode="balanced", policy=pol, timestep=1)
        np.testing.assert_array_equal(o, base)


# ---- K/V cache ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["balanced", "fast"])
def test_kv_cache_append_forward(rng, mode):
    b, hkv, hq, d = 2, 2, 4, 64
    k1, v1 = randn(rng, b, hkv, 40, d), randn(rng, b, hkv, 40, d)
    k2, v2 = randn(rng, b, hkv, 25, d), randn(rng, b, hkv, 25, d)
    with int8attn.KVCache(b, hkv, 128, d, device="cpu", mode=mode) as cache:
        assert len(cache) == 0
        cache.append(k1, v1)
        cache.append(k2, v2)
        assert len(cache) == 65 and cache.length == 65
        k, v = np.concatenate([k1, k2], 2), np.concatenate([v1, v2], 2)
        for nq in (1, 7):
            q = randn(rng, b, hq, nq, d)
            o = cache.forward(q)
            ref, _ = attention_ref(q, k, v)
            assert o.shape == q.shape
            assert rel_l1(o, ref) < (0.03 if mode == "balanced" else 0.06)
        q = randn(rng, b, hq, 1, d)
        o, lse = cache.forward(q, k_lengths=[10, 65], return_lse=True)
        ref, _ = attention_ref(q, k, v, k_lengths=[10, 65])
        assert rel_l1(o, ref) < 0.06 and lse.shape == (b, hq, 1)
        with pytest.raises(int8attn.InvalidArgumentError) as ei:
            cache.append(randn(rng, b, hkv, 64, d), randn(rng, b, hkv, 64, d))
        assert ei.value.status == _lib.ERROR_CAPACITY_EXCEEDED
        assert len(cache) == 65  # unchanged on error
        cache.reset()
        assert len(cache) == 0
    assert cache.closed
    with pytest.raises(ValueError, match="closed"):
        len(cache)


def test_kv_cache_nhd_and_causal(rng):
    b, h, d = 1, 2, 64
    k, v = randn(rng, b, 30, h, d), randn(rng, b, 30, h, d)  # NHD
    cache = int8attn.KVCache(b, h, 64, d, device="cpu")
    cache.append(k, v, layout="NHD")
    q = randn(rng, b, 5, h, d)
    o = cache.forward(q, layout="NHD", causal=True)
    t = lambda x: x.transpose(0, 2, 1, 3)  # noqa: E731
    ref, _ = attention_ref(t(q), t(k), t(v), causal=True)
    assert o.shape == q.shape
    assert rel_l1(t(o), ref) < 0.03
    cache.close()


# ---- quantize --------------------------------------------------------------------------------------
@pytest.mark.parametrize("granularity", ["block", "token"])
@pytest.mark.parametrize("smooth", [False, True])
def test_quantize_matches_formula(rng, granularity, smooth):
    x = randn(rng, 2, 3, 100, 64) + 0.5
    x8, scales, mean = int8attn.quantize(x, granularity=granularity, smooth=smooth)
    assert x8.dtype == np.int8 and x8.shape == x.shape
    gsize = 1 if granularity == "token" else _lib.QUANT_BLOCK
    groups = -(-100 // gsize)
    assert scales.shape == (2, 3, groups) and scales.dtype == np.float32
    xd = x.astype(np.float64)
    if smooth:
        assert mean.shape == (2, 3, 64)
        np.testing.assert_allclose(mean, xd.mean(axis=2), atol=1e-5)
        xd = xd - mean[:, :, None, :]
    else:
        assert mean is None
    idx = np.arange(100) // gsize
    s = scales[:, :, idx][..., None].astype(np.float64)
    want_scale = np.stack([np.abs(xd[:, :, g * gsize:(g + 1) * gsize]).max(axis=(2, 3)) / 127
                           for g in range(groups)], axis=2)
    np.testing.assert_allclose(scales, want_scale, rtol=1e-5)
    deq = x8.astype(np.float64) * s
    assert np.abs(deq - xd).max() <= 0.5 * s.max() + 1e-6
    assert np.abs(x8).max() <= 127


def test_quantize_multiplier_and_nhd(rng):
    x = randn(rng, 1, 70, 2, 64)  # NHD
    x8, scales, _ = int8attn.quantize(x, layout="NHD", scale_multiplier=0.5)
    qb = _lib.QUANT_BLOCK
    assert x8.shape == x.shape and scales.shape == (1, 2, -(-70 // qb))
    xt = x.transpose(0, 2, 1, 3)
    np.testing.assert_allclose(scales[0, 0, 0], 0.5 * np.abs(xt[0, 0, :qb]).max() / 127,
                               rtol=1e-5)


def test_rotary_matches_float32_formula_nhd_and_in_place(rng):
    x = randn(rng, 2, 33, 3, 16)  # NHD
    cos, sin = randn(rng, 33, 16), randn(rng, 33, 16)
    out = int8attn.rotary(x, cos, sin, layout="NHD")
    assert out.shape == x.shape and out.dtype == np.float32
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    rot = np.stack([-x[..., 1::2], x[..., 0::2]], axis=-1).reshape(x.shape)
    want = (x * c).astype(np.float32) + (rot * s).astype(np.float32)  # float32 rounding
    np.testing.assert_array_equal(out, want)
    y = x.copy()
    assert int8attn.rotary(y, cos, sin, layout="NHD", out=y) is y  # in place
    np.testing.assert_array_equal(y, want)
    with pytest.raises(int8attn.InvalidArgumentError, match="head dim.*even"):
        int8attn.rotary(randn(rng, 1, 2, 4, 7), randn(rng, 4, 7), randn(rng, 4, 7))


def _fma32(a, b, c):
    """float32 fma(a, b, c): the exact product plus c, rounded once (float64 holds a float32
    product exactly; the sum's own float64 rounding cannot move a float32 result here)."""
    return (a.astype(np.float64) * b + c).astype(np.float32)


def test_rotary_complex_fma_arithmetic(rng):
    x = randn(rng, 1, 3, 21, 16)  # HND
    f = randn(rng, 21, 8) + 1j * randn(rng, 21, 8)  # complex angles, one per pair
    cos = np.repeat(f.real, 2, axis=-1).astype(np.float32)
    sin = np.repeat(f.imag, 2, axis=-1).astype(np.float32)
    out = int8attn.rotary(x, cos, sin, arithmetic="complex_fma")
    x0, x1 = x[..., 0::2], x[..., 1::2]
    c, s = cos[None, None, :, 0::2], sin[None, None, :, 0::2]
    want = np.stack([_fma32(x0, c, -(x1 * s)), _fma32(x0, s, x1 * c)], axis=-1).reshape(x.shape)
    np.testing.assert_array_equal(out, want)
    assert not np.array_equal(out, int8attn.rotary(x, cos, sin))  # another rounding
    with pytest.raises(ValueError, match="arithmetic"):
        int8attn.rotary(x, cos, sin, arithmetic="fused")


def test_rms_norm_matches_the_formula_in_place_and_names_bad_arguments(rng):
    x = randn(rng, 2, 5, 3, 40)
    w = (1 + 0.3 * randn(rng, 40)).astype(np.float32)
    out = int8attn.rms_norm(x, w, eps=1e-5)
    assert out.shape == x.shape and out.dtype == np.float32
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-7)
    y = x.copy()
    assert int8attn.rms_norm(y, w, eps=1e-5, out=y) is y  # in place: the same bits
    np.testing.assert_array_equal(y, out)
    rows = int8attn.rms_norm(x[0, 0], eps=1e-5)  # rank 2, no weight
    np.testing.assert_allclose(rows, want[0, 0] / w, rtol=2e-6, atol=1e-7)
    with pytest.raises(int8attn.InvalidArgumentError, match="weight"):
        int8attn.rms_norm(x, w[:39])
    with pytest.raises(int8attn.InvalidArgumentError, match="eps"):
        int8attn.rms_norm(x, w, eps=-1.0)
    with pytest.raises(ValueError, match="rank 1 to 4"):
        int8attn.rms_norm(x[None], w)


def test_read_only_output_is_rejected_and_untouched(rng, tmp_path):
    q = randn(rng, 1, 2, 16, 32)
    blob = bytes(np.full(q.size, 7.0, dtype=np.float32).tobytes())
    out = np.frombuffer(blob, dtype=np.float32).reshape(q.shape)  # a view of immutable bytes
    with pytest.raises(ValueError, match="out: the array is read-only"):
        int8attn.attention(q, q, q, out=out)
    assert blob == np.full(q.size, 7.0, dtype=np.float32).tobytes()
    path = tmp_path / "out.bin"
    np.full(q.shape, 7.0, dtype=np.float32).tofile(path)
    mm = np.memmap(path, dtype=np.float32, mode="r", shape=q.shape)
    with pytest.raises(ValueError, match="read-only"):
        int8attn.attention(q, q, q, out=mm)
    assert bool((np.fromfile(path, dtype=np.float32) == 7.0).all())
