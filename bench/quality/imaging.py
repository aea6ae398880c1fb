"""PNG output without depending on matplotlib or PIL (the GPU machine may have neither): image
grids as uint8 arrays, a tiny PNG writer (zlib), and a line plot rasterised in numpy.
matplotlib is used for the plot when it is importable (it labels the axes)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np
import torch

# Colours of the plot's series, in order (named in the report's markdown legend).
COLOURS = [("black", (0, 0, 0)), ("blue", (31, 119, 180)), ("orange", (255, 127, 14)),
           ("green", (44, 160, 44)), ("red", (214, 39, 40)), ("purple", (148, 103, 189)),
           ("brown", (140, 86, 75)), ("pink", (227, 119, 194))]


def write_png(path: Path, img: np.ndarray) -> None:
    """uint8 [H, W] (grey) or [H, W, 3] (RGB) -> PNG, with zlib only."""
    img = np.ascontiguousarray(img, dtype=np.uint8)
    h, w = img.shape[:2]
    ctype = 0 if img.ndim == 2 else 2
    raw = b"".join(b"\x00" + img[r].tobytes() for r in range(h))  # filter 0 on every row

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, ctype, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    Path(path).write_bytes(png)


def to_uint8(x: torch.Tensor) -> np.ndarray:
    """[N, 1, H, W] in [-1, 1] -> uint8 [N, H, W]."""
    return ((x.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)[:, 0].cpu().numpy()


def grid(imgs: np.ndarray, ncol: int, scale: int = 4, pad: int = 1) -> np.ndarray:
    """uint8 [N, H, W] -> one uint8 image, ``ncol`` per row, each upscaled ``scale``x
    (nearest), separated by ``pad`` pixels of mid-grey."""
    n, h, w = imgs.shape
    imgs = imgs.repeat(scale, 1).repeat(scale, 2)
    h, w = h * scale, w * scale
    rows = -(-n // ncol)
    out = np.full((rows * (h + pad) + pad, ncol * (w + pad) + pad), 128, np.uint8)
    for i in range(n):
        r, c = divmod(i, ncol)
        y, x = pad + r * (h + pad), pad + c * (w + pad)
        out[y:y + h, x:x + w] = imgs[i]
    return out


def side_by_side(panels: Sequence[np.ndarray], gap: int = 8) -> np.ndarray:
    """Same-height uint8 images left to right with a white gap."""
    h = max(p.shape[0] for p in panels)
    parts: List[np.ndarray] = []
    for p in panels:
        parts += [np.pad(p, ((0, h - p.shape[0]), (0, 0)), constant_values=255),
                  np.full((h, gap), 255, np.uint8)]
    return np.concatenate(parts[:-1], axis=1)


def line_plot(path: Path, series: Dict[str, Sequence[float]], title: str, ylabel: str) -> str:
    """Log-y line plot of each series against its step index (1-based); returns a caption
    (the fallback's plot has no text, so the caption gives its y range)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        lo, hi = _raster_plot(path, series)
        return f"log y from 1e{lo:.0f} to 1e{hi:.0f}, a grey line per decade"
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=120)
    for (name, ys), (cname, _) in zip(series.items(), COLOURS):
        ax.semilogy(range(1, len(ys) + 1), np.maximum(ys, 1e-8), label=name, color=cname)
    ax.set_xlabel("sampler step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return "matplotlib, labelled axes"


def _raster_plot(path: Path, series: Dict[str, Sequence[float]], w: int = 640,
                 h: int = 360, m: int = 30):
    """The fallback: axes box, a grey gridline per decade, one coloured polyline per series (the
    markdown names the colours and the decades)."""
    img = np.full((h, w, 3), 255, np.uint8)
    ys = [np.log10(np.maximum(np.asarray(v, float), 1e-8)) for v in series.values()]
    lo, hi = np.floor(min(y.min() for y in ys)), np.ceil(max(y.max() for y in ys))
    hi = max(hi, lo + 1)
    n = max(len(y) for y in ys)

    def xy(i, v):
        return (m + (w - 2 * m) * (i / max(n - 1, 1)), h - m - (h - 2 * m) * (v - lo) / (hi - lo))
    for d in np.arange(lo, hi + 1):
        img[int(round(xy(0, d)[1])), m:w - m] = 200
    img[m:h - m, m] = img[m:h - m, w - m] = 0
    img[m, m:w - m] = img[h - m, m:w - m + 1] = 0
    for y, (_, rgb) in zip(ys, COLOURS):
        for i in range(len(y) - 1):
            (x0, y0), (x1, y1) = xy(i, y[i]), xy(i + 1, y[i + 1])
            for t in np.linspace(0, 1, int(max(abs(x1 - x0), abs(y1 - y0))) * 2 + 2):
                px, py = int(round(x0 + t * (x1 - x0))), int(round(y0 + t * (y1 - y0)))
                img[py - 1:py + 1, px - 1:px + 1] = rgb
    write_png(path, img)
    return lo, hi
