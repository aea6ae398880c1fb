"""Cross-language check, Python participant (see README.md). Usage: python xlang.py OUT_DIR

Uses the int8attn package (bindings/python) with the library named by INT8ATTN_LIBRARY."""
import os
import sys

import numpy as np

import int8attn

# N > 512: on at most 512 keys (of 40 channels) every mode runs EXACT (README.md).
B, H, N, D = 1, 2, 550, 40


def make_input(c: int) -> np.ndarray:
    i = np.arange(B * H * N * D, dtype=np.int64)
    x = ((i * 7919 + c * 7207) % 1999 - 999).astype(np.float64) / 400.0
    if c == 2:
        x = x + ((i % D) % 5).astype(np.float64) * 0.25
    return x.astype(np.float32).reshape(B, H, N, D)


def main() -> int:
    out_dir = sys.argv[1]
    q, k, v = make_input(1), make_input(2), make_input(3)
    print("python: int8attn", int8attn.version(), "from", int8attn.library_path())
    for name in ("exact", "balanced"):
        o = int8attn.attention(q, k, v, mode=name)
        bits = np.ascontiguousarray(o, dtype=np.float32).reshape(-1).view(np.uint32)
        path = os.path.join(out_dir, f"python_{name}.txt")
        with open(path, "w") as f:
            f.write("".join(f"{int(b):08x}\n" for b in bits))
        print("python: wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
