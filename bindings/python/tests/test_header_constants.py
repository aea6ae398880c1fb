"""The constants _lib.py copies from include/int8attn.h equal the header's.

ctypes cannot read a header, so ``int8attn._lib`` repeats its ``#define`` values and enumerators
(``QUANT_BLOCK`` for ``INT8ATTN_QUANT_BLOCK``, ``MODE_FAST`` for ``INT8ATTN_MODE_FAST``, …). These
tests parse the header and fail when a copy differs, names something the header lacks, or when the
header gains a constant the bindings do not mirror.
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import Dict, List

from int8attn import _lib

HEADER = Path(__file__).resolve().parent / ".." / ".." / ".." / "include" / "int8attn.h"

# Header macros the bindings deliberately do not copy: the loaded library reports its version.
NOT_MIRRORED = {"VERSION_MAJOR", "VERSION_MINOR", "VERSION_PATCH"}

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_VALUE = r"\(?\s*(\d+)[uU]?\s*(?:<<\s*(\d+)\s*)?\)?"
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+INT8ATTN_(\w+)[ \t]+" + _VALUE + r"[ \t]*$", re.M)
_ENUMERATOR = re.compile(r"^[ \t]*INT8ATTN_(\w+)[ \t]*=[ \t]*" + _VALUE + r"[ \t]*,?[ \t]*$", re.M)


def header_constants(text: str) -> Dict[str, int]:
    """Integer ``#define``s and enumerators of the header, without the ``INT8ATTN_`` prefix."""
    text = _COMMENT.sub(" ", text)
    found: Dict[str, int] = {}
    for pattern in (_DEFINE, _ENUMERATOR):
        for m in pattern.finditer(text):
            name, base, shift = m.group(1), int(m.group(2)), m.group(3)
            assert name not in found, f"INT8ATTN_{name} is defined twice in the header"
            found[name] = base << int(shift) if shift else base
    return found


def mirrored_constants(module) -> Dict[str, int]:
    """The module's public integer constants (upper-case names)."""
    return {k: v for k, v in vars(module).items()
            if k.isupper() and not k.startswith("_") and type(v) is int}


def drift(header: Dict[str, int], mirrored: Dict[str, int]) -> List[str]:
    """Every difference between the header's constants and the copies, as readable lines."""
    problems = []
    for name, value in sorted(mirrored.items()):
        if name not in header:
            problems.append(f"_lib.{name} = {value}, but the header has no INT8ATTN_{name}")
        elif header[name] != value:
            problems.append(f"_lib.{name} = {value}, but the header has INT8ATTN_{name} = "
                            f"{header[name]}")
    for name in sorted(set(header) - set(mirrored) - NOT_MIRRORED):
        problems.append(f"INT8ATTN_{name} = {header[name]} is not mirrored in _lib.py")
    return problems


def test_header_is_parsed():
    consts = header_constants(HEADER.read_text(encoding="utf-8"))
    # A few of each kind, so that a change of the header's formatting cannot make the comparison
    # below vacuous.
    assert consts["MAX_RANK"] == 6 and consts["ABI_VERSION"] >= 1
    assert consts["OK"] == 0 and consts["ERROR_INTERNAL"] == 900
    assert consts["FLAG_EXPLICIT"] == 1 << 30 and consts["FEATURE_CPU_SIMD"] == 1 << 5
    assert len(consts) > 50


def test_mirrored_constants_equal_the_header():
    problems = drift(header_constants(HEADER.read_text(encoding="utf-8")),
                     mirrored_constants(_lib))
    assert not problems, "_lib.py and include/int8attn.h disagree:\n" + "\n".join(problems)


def test_drift_is_detected():
    """The check fails on a changed value, a constant the header lacks and one _lib lacks."""
    text = HEADER.read_text(encoding="utf-8")
    # A faithful copy of today's header, then a header that moved on.
    copy = {k: v for k, v in header_constants(text).items() if k not in NOT_MIRRORED}
    assert drift(header_constants(text), copy) == []
    changed = re.sub(r"(#define INT8ATTN_QUANT_BLOCK)\s+\d+", r"\1 1000", text)
    changed = re.sub(r"(INT8ATTN_MODE_FAST = )\d+", r"\g<1>99", changed)
    changed += "\n#define INT8ATTN_SOMETHING_NEW 5\n"
    problems = "\n".join(drift(header_constants(changed), dict(copy, ONLY_IN_LIB=1)))
    assert (f"_lib.QUANT_BLOCK = {copy['QUANT_BLOCK']}, "
            "but the header has INT8ATTN_QUANT_BLOCK = 1000") in problems
    assert (f"_lib.MODE_FAST = {copy['MODE_FAST']}, "
            "but the header has INT8ATTN_MODE_FAST = 99") in problems
    assert "no INT8ATTN_ONLY_IN_LIB" in problems
    assert "INT8ATTN_SOMETHING_NEW = 5 is not mirrored" in problems


def test_library_defaults_equal_the_mirrored_mask_blocks():
    """The Python signatures' mask-block defaults are what the library's init functions set."""
    lib = _lib.lib()
    fp = _lib.ForwardParams()
    lib.int8attn_forward_params_init(ctypes.byref(fp))
    assert (fp.mask_q_block, fp.mask_k_block) == (_lib.MASK_Q_BLOCK_DEFAULT,
                                                  _lib.MASK_K_BLOCK_DEFAULT)
    mp = _lib.MaskParams()
    lib.int8attn_mask_params_init(ctypes.byref(mp))
    assert (mp.q_block, mp.k_block) == (_lib.MASK_Q_BLOCK_DEFAULT, _lib.MASK_K_BLOCK_DEFAULT)
