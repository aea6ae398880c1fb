"""Compare the cross-language outputs (see README.md); prints 'N passed, M failed'.

Usage: python3 compare.py OUT_DIR [lang ...]   (default languages: c python rust csharp)
Pure Python (no numpy), so it runs anywhere."""
import math
import os
import struct
import sys

# N > 512: on at most 512 keys (of 40 channels) every mode runs EXACT (README.md).
B, H, N, D = 1, 2, 550, 40
LEN = B * H * N * D
# Against float64: (max |O - O_ref| allowed, min cosine similarity). |O_ref| reaches 2.3 here and
# some rows have a sharp softmax, where INT8 Q·Kᵀ errors show most.
MODES = {"exact": (1e-4, 0.9999999), "balanced": (5e-2, 0.9999)}


def make_input(c):
    out = []
    for i in range(LEN):
        x = ((i * 7919 + c * 7207) % 1999 - 999) / 400.0
        if c == 2:
            x += ((i % D) % 5) * 0.25
        out.append(struct.unpack("f", struct.pack("f", x))[0])  # round to float32
    return out


def reference():
    q, k, v = make_input(1), make_input(2), make_input(3)
    scale = 1.0 / math.sqrt(D)
    o = [0.0] * LEN
    for h in range(H):
        base = h * N * D
        for i in range(N):
            qi = q[base + i * D: base + (i + 1) * D]
            s = [sum(a * b for a, b in zip(qi, k[base + j * D: base + (j + 1) * D])) * scale for j in range(N)]
            m = max(s)
            p = [math.exp(x - m) for x in s]
            z = sum(p)
            for c in range(D):
                o[base + i * D + c] = sum(p[j] * v[base + j * D + c] for j in range(N)) / z
    return o


def load(path):
    with open(path) as f:
        words = f.read().split()
    return words


def main():
    out_dir = sys.argv[1]
    langs = sys.argv[2:] or ["c", "python", "rust", "csharp"]
    passed = failed = 0

    def report(ok, what):
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
        print(("PASS " if ok else "FAIL ") + what)

    ref = reference()
    for mode, (tol, min_cos) in MODES.items():
        outputs = {}
        for lang in langs:
            path = os.path.join(out_dir, f"{lang}_{mode}.txt")
            if not os.path.exists(path):
                report(False, f"{lang} {mode}: {path} is missing")
                continue
            words = load(path)
            ok = len(words) == LEN and all(len(w) == 8 for w in words)
            report(ok, f"{lang} {mode}: {len(words)} values")
            if ok:
                outputs[lang] = words
        if not outputs:
            continue
        first = langs[0] if langs[0] in outputs else next(iter(outputs))
        vals = [struct.unpack("<f", bytes.fromhex(w)[::-1])[0] for w in outputs[first]]
        finite = all(math.isfinite(x) for x in vals)
        err = max(abs(a - b) for a, b in zip(vals, ref)) if finite else float("inf")
        dot = sum(a * b for a, b in zip(vals, ref))
        norm = math.sqrt(sum(a * a for a in vals) * sum(b * b for b in ref))
        cos = dot / norm if finite and norm > 0 else 0.0
        report(finite and err < tol and cos >= min_cos,
               f"{first} {mode} vs float64 reference: max error {err:.3e} (limit {tol:g}), "
               f"cosine {cos:.7f} (limit {min_cos})")
        for lang, words in outputs.items():
            if lang == first:
                continue
            diff = sum(1 for a, b in zip(outputs[first], words) if a != b)
            report(diff == 0, f"{lang} {mode} identical to {first}" + ("" if diff == 0 else f": {diff} values differ"))
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
