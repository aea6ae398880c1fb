"""``torch.ops.int8attn.*`` registered as soon as both int8attn and torch are imported.

``import int8attn`` must not import torch (it takes seconds and numpy users do not need it), yet
``torch.ops.int8attn.attention`` should exist in any program that imports both, in either
order. So :func:`install` registers the ops at once when torch is already imported, and
otherwise puts a one-shot finder on ``sys.meta_path`` that lets the normal finders locate torch
and registers the ops right after torch's own ``__init__`` has run. A failure there is turned
into a warning: it must never break ``import torch``.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from typing import Any, Optional, Sequence


def register_ops() -> None:
    """Register the ops (importing :mod:`int8attn._torch_op` does it once); warn on failure."""
    try:
        from . import _torch_op  # noqa: F401
    except Exception as exc:  # pragma: no cover - a broken torch install
        warnings.warn(f"int8attn: torch.ops.int8attn.* not registered ({type(exc).__name__}: "
                      f"{exc}); `import int8attn.torch_integration` shows the full error",
                      RuntimeWarning, stacklevel=2)


class _TorchFinder:
    """A ``sys.meta_path`` finder that finds nothing itself: it wraps the loader of the
    ``torch`` package the other finders find. (Not derived from ``importlib.abc``, whose import
    costs ~6 ms: the protocol is just ``find_spec``.)"""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]],
                  target: Any = None) -> Any:
        if fullname != "torch":
            return None
        _uninstall()  # one shot; also keeps the lookup below from recursing into this finder
        spec = importlib.util.find_spec("torch")
        loader = getattr(spec, "loader", None)
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        def exec_then_register(module: Any) -> None:
            exec_module(module)
            register_ops()

        loader.exec_module = exec_then_register  # this spec's own loader instance
        return spec


_finder: Optional[_TorchFinder] = None


def _uninstall() -> None:
    global _finder
    if _finder is not None and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    _finder = None


def install() -> None:
    """Register the ops now if torch is imported, else when it is (no-op without torch)."""
    global _finder
    if "torch" in sys.modules:
        register_ops()
    elif _finder is None:
        _finder = _TorchFinder()
        sys.meta_path.insert(0, _finder)
