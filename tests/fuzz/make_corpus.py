#!/usr/bin/env python3
"""Writes the seed corpus of the int8attn fuzz target (tests/fuzz/corpus/).

Each seed is a short program in the input format that fuzz_capi.cpp decodes (README.md:
"Input format"); the encoders below mirror its decoder byte for byte. The seeds reach a valid
call of every kind (forward in each mode and dtype with every option, the workspace query, cache
create/append/forward/reset, quantize, mask prediction, policies, contexts, the small entry
points) plus typical invalid ones, so the fuzzer starts from deep inside each path.

    python3 tests/fuzz/make_corpus.py [out_dir]      # default: tests/fuzz/corpus
"""
import hashlib
import os
import struct
import sys

# Operation codes (kOps in fuzz_capi.cpp; 11 is forward again).
FORWARD, CACHE_CREATE, CACHE_APPEND, CACHE_FORWARD, CACHE_MISC = 0, 1, 2, 3, 4
QUANTIZE, MASK, POLICY_CREATE, POLICY_USE, CONTEXT, MISC = 5, 6, 7, 8, 9, 10

F32, F16, BF16 = 0, 1, 2  # problem dtype bytes
# Indices into the decoder's tables.
MODE_DEFAULT, MODE_EXACT, MODE_BALANCED, MODE_FAST = 0, 1, 2, 3
KDTYPES = {"f16": 0, "bf16": 1, "f32": 2, "i8": 3, "i32": 4, "u8": 5, "fp8": 6, "zero": 7}
KFLOATS = {"nan": 14, "inf": 16, "-1": 12, "2": 5, "0.5": 3, "1e30": 10, "0.125": 4, "tiny": 20}


def tensor(layout=0, fill=0, seed=0, dtype=None, device=None, rank=None, shape=None,
           layout_arg=None, raw_strides=None, trick=None, alias=None, tile=None):
    """TensorSpec: L F S [dtype] [device] [rank] [dim value] [layout extra] [trick] [tile]."""
    L = layout & 7
    extra = b""
    if dtype is not None:
        L |= 0x08
        extra += bytes([dtype])
    if device is not None:
        L |= 0x10
        extra += bytes([device])
    if rank is not None:
        L |= 0x20
        extra += bytes([rank])
    if shape is not None:
        L |= 0x40
        extra += bytes(shape)
    if layout in (2, 3, 4):
        extra += bytes([layout_arg or 0])
    if layout == 5:
        extra += bytes(raw_strides)
    if trick is not None:
        L |= 0x80
        extra += bytes([trick])
        if trick % 6 == 3:
            extra += bytes(alias)
    if fill & 7 == 2:
        extra += bytes([len(tile) - 1]) + bytes(tile)
    return bytes([L, fill, seed]) + extra


def problem(B=1, Hkv=1, G=1, Nq=1, Nk=1, D=8, dt=F32):
    assert 1 <= Nq <= 224 and 1 <= Nk <= 224 and D % 8 == 0
    return bytes([B - 1, (Hkv - 1) | ((G - 1) << 2), Nq - 1, Nk - 1, D // 8 - 1, dt])


def fparams(header=b"\x00", mode=MODE_DEFAULT, sm=0, causal=0, gran=0, flags=0, mult=0, qb=0,
            kb=0, lse=None, klen=None, mask=None, mask_bcast=0, policy=None, ws=None,
            reserved=False, stream=False, ts=0, weird_ts=False):
    """ForwardParams: header mode sm causal gran flags mult qb kb extras ts [lse] [klen]
    [bcast mask] [policy slot] [ws mode, ws arg]."""
    extras = ((lse is not None) | (klen is not None) << 1 | (mask is not None) << 2 |
              (policy is not None) << 3 | (ws is not None) << 4 | reserved << 5 | stream << 6 |
              weird_ts << 7)
    out = header + bytes([mode, sm, causal, gran, flags, mult, qb, kb, extras, ts])
    if lse is not None:
        out += lse
    if klen is not None:
        out += klen
    if mask is not None:
        out += bytes([mask_bcast]) + mask
    if policy is not None:
        out += bytes([policy])
    if ws is not None:
        out += bytes(ws)
    return out


def forward(c0=0, prob=None, q=None, k=None, v=None, o=None, params=None, alias=None):
    out = bytes([FORWARD, c0]) + (prob or problem())
    out += (q or tensor()) + (k or tensor()) + (v or tensor()) + (o or tensor())
    out += params if params is not None else fparams()
    out += bytes(alias) if alias else b"\x00"
    return out


def cache_create(slot=0, ctx=0, B=1, H=1, cap=64, D=8, mode=0, flags=0, header=b"\x00", dev=0):
    return bytes([CACHE_CREATE, ctx | slot << 4]) + header + bytes(
        [dev, B - 1, H - 1, cap - 1, D // 8 - 1, mode, flags, 0])


def cache_append(slot=0, n=1, dt=F32, k=None, v=None, probe=False, alias=0):
    return bytes([CACHE_APPEND, slot | probe << 4, n - 1, dt]) + (k or tensor()) + (
        v or tensor()) + bytes([alias])


def cache_forward(slot=0, G=1, Nq=1, dt=F32, q=None, o=None, params=None, c0_extra=0):
    out = bytes([CACHE_FORWARD, slot | c0_extra, G - 1, Nq - 1, dt])
    out += (q or tensor()) + (o or tensor())
    out += params if params is not None else fparams()
    return out + b"\x00"


def cache_misc(slot=0, what=0):  # 0 reset, 1 reset NULL, 2 length NULLs, 3 destroy
    return bytes([CACHE_MISC, slot | what << 2])


def quantize(B=1, H=1, N=1, D=8, dt=F32, gran=0, smooth=0, mult=0, mean_mode=0, x=None,
             xq=None, sc=None, mean=None, header=b"\x00"):
    out = bytes([QUANTIZE, mean_mode << 3, B - 1, H - 1, N - 1, D // 8 - 1, dt]) + header
    out += bytes([gran, smooth, mult, 0])
    out += (x or tensor()) + (xq or tensor()) + (sc or tensor()) + (mean or tensor())
    return out + b"\x00"


def mask(prob=None, qb=0, kb=0, keep=0, thr=0, causal=0, sm=0, q=None, k=None, m=None,
         header=b"\x00"):
    out = bytes([MASK, 0]) + (prob or problem()) + header
    out += bytes([qb, kb, keep, thr, causal, sm, 0])
    out += (q or tensor()) + (k or tensor()) + (m or tensor())
    return out + b"\x00"


def policy_create(slot=0, T=10, ns=0, arrays=0, dm=0, em=0, fe=0, le=0, above=0, below=0,
                  sigmas=(), mults=(), header=b"\x00"):
    out = bytes([POLICY_CREATE, slot]) + header + bytes([T, ns, arrays, dm, em, fe, le, above,
                                                         below])
    return out + bytes(sigmas) + bytes(mults)


def policy_use(slot=0, what=0, ts=0, mode=0, nulls=0):
    return bytes([POLICY_USE, slot | what << 1, ts, mode, nulls])


def context(action=2, header=b"\x00", dev=0, threads=0, reserved=0, ws=0):
    if action in (0, 1, 3):
        return bytes([CONTEXT, action])
    return bytes([CONTEXT, action]) + header + bytes([dev, threads, reserved, ws])


def misc(sub, *args):
    return bytes([MISC, sub]) + bytes(args)


def seeds():
    s = {}
    # ---- forward: each mode and dtype on small valid problems
    for mode, mname in ((MODE_EXACT, "exact"), (MODE_BALANCED, "balanced"), (MODE_FAST, "fast")):
        for dt, dname in ((F32, "f32"), (F16, "f16"), (BF16, "bf16")):
            s[f"fwd_{mname}_{dname}"] = b"\x00" + forward(
                prob=problem(B=1, Hkv=1, G=2, Nq=12, Nk=20, D=16, dt=dt),
                params=fparams(mode=mode, lse=tensor()))
    s["fwd_default_tiny"] = b"\x00" + forward()
    s["fwd_gqa_nhd_causal"] = b"\x01" + forward(
        prob=problem(B=1, Hkv=2, G=2, Nq=9, Nk=12, D=16, dt=F16),
        q=tensor(layout=1), k=tensor(layout=1), v=tensor(layout=1), o=tensor(layout=1),
        params=fparams(mode=MODE_BALANCED, causal=1, lse=tensor()))
    s["fwd_exact_causal_klen"] = b"\x00" + forward(
        prob=problem(B=3, Hkv=1, G=2, Nq=16, Nk=30, D=8),
        params=fparams(mode=MODE_EXACT, causal=1, klen=tensor(fill=1), lse=tensor(layout=7)))
    s["fwd_block_mask"] = b"\x00" + forward(
        prob=problem(B=1, Hkv=1, G=2, Nq=24, Nk=40, D=8),
        params=fparams(mode=MODE_FAST, qb=2, kb=3, mask=tensor(fill=1), mask_bcast=1,
                       lse=tensor()))
    s["fwd_broadcast_kv_padded"] = b"\x00" + forward(
        prob=problem(B=2, Hkv=2, G=1, Nq=10, Nk=12, D=24),
        k=tensor(layout=3, layout_arg=3), v=tensor(layout=3, layout_arg=1),
        o=tensor(layout=2, layout_arg=0x0f), q=tensor(layout=4, layout_arg=5),
        params=fparams(mode=MODE_BALANCED, gran=0x11, flags=0x08 | 0x01, mult=3))
    s["fwd_workspace_policy"] = b"\x00" + policy_create(T=8) + forward(
        prob=problem(Nq=8, Nk=8, D=16), params=fparams(policy=0, ts=1, ws=(0, 4)))
    s["fwd_query_only"] = b"\x00" + forward(c0=0x08, prob=problem(B=2, Hkv=2, G=3, Nq=5, Nk=9,
                                                                  D=32))
    s["fwd_nan_inputs"] = b"\x00" + forward(
        prob=problem(Nq=12, Nk=12, D=8, dt=F16), q=tensor(fill=1 | 2 << 3),
        k=tensor(fill=4 | 1 << 3), v=tensor(fill=1), params=fparams(mode=MODE_BALANCED))
    s["fwd_inf_exact"] = b"\x00" + forward(
        prob=problem(Nq=6, Nk=9, D=8, dt=BF16), v=tensor(fill=4 | 2 << 3),
        params=fparams(mode=MODE_EXACT, lse=tensor()))
    s["fwd_large_values"] = b"\x00" + forward(
        prob=problem(Nq=9, Nk=9, D=16, dt=F16), v=tensor(fill=0 | 8 << 3),
        params=fparams(mode=MODE_FAST))
    s["fwd_tiled_bytes"] = b"\x00" + forward(
        prob=problem(Nq=4, Nk=4, D=8, dt=F16), q=tensor(fill=2, tile=[0x00, 0x7c, 0x01, 0x7e]))
    # ---- forward: invalid arguments
    s["fwd_null_q"] = b"\x00" + forward(q=tensor(trick=0))
    s["fwd_bad_dtype"] = b"\x00" + forward(k=tensor(dtype=KDTYPES["i8"]))
    s["fwd_misaligned"] = b"\x00" + forward(prob=problem(dt=F16), v=tensor(trick=2))
    s["fwd_alias_o_q"] = b"\x00" + forward(prob=problem(Nq=4, Nk=4, D=8), alias=[0x03, 0x05])
    s["fwd_cuda_tensor"] = b"\x00" + forward(q=tensor(trick=4))
    s["fwd_bad_rank_shape"] = b"\x00" + forward(o=tensor(rank=3), k=tensor(shape=[2, 4]))
    s["fwd_overlap_output"] = b"\x00" + forward(prob=problem(Nq=3, D=8), o=tensor(layout=6))
    s["fwd_raw_strides"] = b"\x00" + forward(
        k=tensor(layout=5, raw_strides=[18, 0, 1, 1]))
    s["fwd_struct_size"] = b"\x00" + forward(params=fparams(header=b"\x02\x0f"))
    s["fwd_struct_tail"] = b"\x00" + forward(params=fparams(header=b"\x03\x02\x05\x01"))
    s["fwd_nan_scale"] = b"\x00" + forward(params=fparams(sm=KFLOATS["nan"], mult=KFLOATS["2"]))
    # ---- cache
    s["cache_balanced"] = b"\x00" + cache_create(B=2, H=2, cap=64, D=16) + cache_append(
        n=20) + cache_forward(G=2, Nq=3, params=fparams(lse=tensor())) + cache_append(
        n=5, dt=F16, probe=True) + cache_forward(Nq=4, params=fparams(causal=1))
    s["cache_fast"] = b"\x00" + cache_create(cap=32, D=32, mode=1) + cache_append(
        n=32, dt=BF16) + cache_append(n=1, probe=True) + cache_forward(
        G=3, Nq=2, dt=BF16, params=fparams(klen=tensor(fill=1)))
    s["cache_reset"] = b"\x00" + cache_create(cap=16, D=8) + cache_append(n=8) + cache_misc(
        what=0) + cache_forward() + cache_append(n=3) + cache_forward() + cache_misc(what=3)
    s["cache_errors"] = b"\x00" + cache_create(cap=8, D=8, flags=0x04) + cache_create(
        header=b"\x02\x0e") + cache_create(dev=2) + cache_misc(what=2)
    s["cache_other_ctx"] = b"\x00" + cache_create(cap=8, D=8) + cache_append(
        n=4) + cache_forward(c0_extra=0x08 | 0x20)
    # ---- quantize
    s["quant_block"] = b"\x00" + quantize(B=2, H=2, N=70, D=16)
    s["quant_token_smooth"] = b"\x00" + quantize(N=9, D=32, dt=F16, gran=2, smooth=1,
                                                 mult=KFLOATS["0.5"])
    s["quant_bad_mean"] = b"\x00" + quantize(N=5, D=8, mean_mode=1)
    s["quant_nan"] = b"\x00" + quantize(N=6, D=8, dt=BF16, smooth=1, x=tensor(fill=1))
    # ---- mask prediction
    s["mask_threshold"] = b"\x00" + mask(prob=problem(B=1, Hkv=1, G=2, Nq=64, Nk=96, D=16),
                                         qb=4, kb=3)
    s["mask_keep_causal"] = b"\x00" + mask(prob=problem(Nq=50, Nk=80, D=8, dt=F16), qb=3,
                                           kb=4, keep=KFLOATS["0.5"], causal=1)
    s["mask_bad_params"] = b"\x00" + mask(thr=KFLOATS["nan"], keep=KFLOATS["-1"])
    # ---- policies
    s["policy_ops"] = b"\x00" + policy_create(T=6, fe=2, le=3) + policy_use(
        what=0, ts=3, mode=2) + policy_use(what=1, ts=2) + policy_use(what=2) + policy_use(
        what=1, ts=0x85)
    s["policy_sigmas"] = b"\x00" + policy_create(T=0, ns=5, arrays=3, above=KFLOATS["2"],
                                                 sigmas=[0, 1, 2, 3, 4],
                                                 mults=[0, 3, 0, 3, 0]) + forward(
        params=fparams(policy=0, ts=2))
    s["policy_errors"] = b"\x00" + policy_create(T=0) + policy_create(
        T=4, ns=3, arrays=1, sigmas=[0, 0, 0]) + policy_create(T=3, dm=5)
    # ---- contexts and the small entry points
    s["context_fuzzed"] = b"\x00" + context(threads=1) + forward(
        prob=problem(Nq=5, Nk=5, D=8)) + context(action=3)
    s["context_errors"] = b"\x00" + context(threads=4) + context(header=b"\x02\x01") + context(
        reserved=3)
    # wrong-kind handles (active once the header has INT8ATTN_ERROR_INVALID_HANDLE)
    for what in range(5):  # policy_get, cache length, forward ctx, params->policy, destroy
        s[f"handle_confusion_{what}"] = (b"\x00" + policy_create(T=4) + cache_create(cap=8, D=8) +
                                         b"".join(misc(8, w << 1 | what << 3) for w in range(4)))
    s["misc_all"] = (b"\x00" + misc(0, 0, 0, 0, 3, 3, 4, 5, 6) + misc(1, 0x66, 0, 0, 0) +
                     misc(2, 0, 8, 1) + misc(3, 2) + misc(4, 1) + misc(5) + misc(6) +
                     misc(0, 1, 0, 0, 0x90))
    return s


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        os.remove(os.path.join(out, name))
    for name, data in seeds().items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    total = sum(len(d) for d in seeds().values())
    print(f"{len(seeds())} seeds, {total} bytes, in {out}")


if __name__ == "__main__":
    main()
