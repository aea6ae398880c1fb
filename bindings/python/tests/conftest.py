"""Shared fixtures of the CPU tests (numpy only).

The package under test is the installed ``int8attn``; when it is not installed, the source tree
(``bindings/python/src``) is used, with the library from ``INT8ATTN_LIBRARY``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
REPO = HERE.parents[2]

try:
    import int8attn  # noqa: F401
except ImportError as exc:
    if "No module named" not in str(exc):
        raise
    sys.path.insert(0, str(SRC))
    if not os.environ.get("INT8ATTN_LIBRARY"):
        for cand in ("build-py/lib/libint8attn.so", "build/lib/libint8attn.so"):
            if (REPO / cand).exists():
                os.environ["INT8ATTN_LIBRARY"] = str(REPO / cand)
                break
