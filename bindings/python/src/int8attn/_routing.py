"""Which attention calls int8attn should take inside a model, from measured tables.

A diffusers step makes hundreds of attention calls of a few shapes; on some of them (77-key text
cross-attention, 1K-token layers) int8attn is slower than PyTorch's SDPA on the same GPU today.
The processors must never make a step slower, so for each call they ask :func:`prefer_sdpa`,
which looks the call up in a table measured by ``bench/route_table.py`` on that GPU model: the
speed of int8attn end-to-end (in the call's precision mode) relative to SDPA's cuDNN backend,
at the exact attention shapes of common diffusion models and on a grid of head dims ×
batch·heads × query lengths × key lengths. A call of a measured model shape reads its own
cell; any other goes to SDPA where the nearest grid point (head dim rounded up, lengths nearest
on a log scale, the largest measured batch·heads not above the call's) does not have int8attn
at least :data:`MIN_RATIO` times faster (within that, two measurements of a cell disagree).
A head dim above the table's largest is not extrapolated (it may run another kernel or key-tile
width): such calls go to SDPA.
cuDNN's speed moves with how its tiles fill the GPU (Flux at 1024 px, 4608 tokens, measured
differently from the grid's 4096), hence the exact cells; and cuDNN runs lengths that are not
multiples of 128 slower, so such calls read a second grid measured at unaligned lengths.

A call also goes to SDPA where int8attn is faster but saves less GPU time than
:data:`HOST_MARGIN_US`: a call through int8attn's processors costs more host time than the stock
processor's, and a UNet's eager step is host-bound (SDXL: 140 attention calls), so a call that
saves a few microseconds of GPU time makes such a step slower. The tables hold the stock
path's time per cell (``sdpa_ms``) for that; a table without them routes by the ratio alone.

Tables live in ``routing/*.json`` inside the package. ``sm<major><minor>.json`` serves every GPU
of that compute capability; ``sm<major><minor>-<gpu>.json`` only GPUs whose name is its
``device`` (an H200 and an H100 are both sm_90, but the H200's faster memory makes int8attn's
K/V preparation cheaper, which moves the ratio at image shapes by several percent). Tables in
the folders of the environment variable ``INT8ATTN_ROUTING_DIR`` (separated like ``PATH``)
come first: a GPU without a shipped table (an RTX 4090, an A100) gets one by running
``bench/route_table.py --table $INT8ATTN_ROUTING_DIR/sm89-rtx4090.json`` on it, and a table
measured on the user's own machine overrides the shipped one of the same GPU. A GPU without a
table (and every CPU call) always takes int8attn, since there is nothing measured to decide
with. The decisions are cached per shape, so a call pays one dict lookup.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

_TABLE_DIR = Path(__file__).resolve().parent / "routing"
#: Folders of tables measured on the user's machines, read before the package's.
ROUTING_DIR_ENV = "INT8ATTN_ROUTING_DIR"
_MODE_NAMES = {1: "exact", 2: "balanced", 3: "fast"}

#: GPU time (µs) a call must save for int8attn to take it: twice the most host time a call
#: through int8attn's processors was measured to cost over the stock processor's (at most
#: ~10 µs, ``bench/host_overhead.py``, ``bench/results/2026-11-28-h100-compiled-and-host/``).
#: UNet steps are host-bound, so there a call's host time counts and its GPU time may not;
#: SDXL's and SD1.5's text calls (1.2-1.6x cuDNN, 1.6-3.7 µs saved) stay on the stock path,
#: while a 1024 px DiT's joint attention (Flux: ~0.44 ms a call, GPU-bound) saves 30-40 µs.
HOST_MARGIN_US = 20.0

#: The least measured speed ratio at which int8attn takes a call: two measurements of one cell
#: differ by a few percent (cuDNN's time moves with the board's power state), so a cell below
#: this is level, and a level call stays on the stock path.
MIN_RATIO = 1.05


def routes_to_sdpa(ratio: Optional[float], sdpa_ms: Optional[float]) -> bool:
    """The routing rule for one call: SDPA where int8attn is not measured faster by at least
    :data:`MIN_RATIO` (``ratio`` = SDPA time / int8attn time) or saves less than
    :data:`HOST_MARGIN_US` of GPU time (estimated from SDPA's time, ``sdpa_ms``, where known)."""
    if ratio is None:
        return False
    if ratio < MIN_RATIO:
        return True
    return sdpa_ms is not None and sdpa_ms * 1e3 * (1.0 - 1.0 / ratio) < HOST_MARGIN_US


class RouteTable:
    """One measured table: ``ratio[mode][head_dim][level][i_nq][i_nk]`` = SDPA time / int8attn
    time, at ``batch_heads[level]`` (batch × query heads) attention problems of the same shape.

    int8attn's fixed costs per call (launches, the K/V preparation's latency) weigh less the
    more heads a call has, so the ratio at a shape grows with batch × heads: SD3's 48 (CFG
    batch 2 × 24 heads) run faster in int8attn where SDXL's 20 do not.

    Beside the grid, ``shapes`` holds cells measured at the exact shapes of common models'
    attention layers (``{"model", "head_dim", "nq", "nk", "batch_heads", "ratio": {mode: x},
    "sdpa_ms"}``); a call of exactly such a shape reads that cell first.

    ``sdpa_ms[head_dim][i_nq][i_nk]`` (and ``sdpa_ms_unaligned``): cuDNN's time at the grid's
    points for ``sdpa_ms_batch_heads`` heads, which :meth:`sdpa_ms_for` scales to a call.

    Attributes:
        device: The GPU the table was measured on.
        capability: Its compute capability (major, minor).
        source: Where the measurement is committed.
        shapes: The exact cells, ``(mode, head_dim, nq, nk, batch_heads) -> (ratio, model)``.
        general: Whether it serves every GPU of its capability (``sm<cc>.json``) rather than
            only GPUs named ``device`` (``sm<cc>-<gpu>.json``); set by :func:`tables`.
        path: The file it was read from ("" when built from a dict).
    """

    def __init__(self, data: Dict[str, Any]) -> None:
        self.device = str(data.get("device", ""))
        self.capability = tuple(int(x) for x in data["capability"])
        self.source = str(data.get("source", ""))
        # set by tables(): whether it serves every GPU of its capability, and its file
        self.general = True
        self.path = ""
        self.head_dims: List[int] = sorted(int(d) for d in data["head_dims"])
        self.batch_heads: List[int] = [int(x) for x in data["batch_heads"]]
        self.nq: List[int] = [int(x) for x in data["nq"]]
        self.nk: List[int] = [int(x) for x in data["nk"]]
        # lengths multiples of 128, and other lengths (cuDNN is slower there; without the
        # second table, the first serves both)
        self.ratio: Dict[str, Dict[int, List[List[List[Optional[float]]]]]] = {
            mode: {int(d): levels for d, levels in per_d.items()}
            for mode, per_d in data["ratio"].items()}
        self.ratio_unaligned = {
            mode: {int(d): levels for d, levels in per_d.items()}
            for mode, per_d in data.get("ratio_unaligned", data["ratio"]).items()}
        # what the unaligned grid's lengths were measured at: the grid's + this
        self.unaligned_offset = int(data.get("unaligned_offset", 0))
        # cuDNN's times: per head dim, [nq][nk] at sdpa_ms_batch_heads heads (optional)
        self.sdpa_ms: Dict[int, List[List[Optional[float]]]] = {
            int(d): rows for d, rows in data.get("sdpa_ms", {}).items()}
        self.sdpa_ms_unaligned: Dict[int, List[List[Optional[float]]]] = {
            int(d): rows for d, rows in data.get("sdpa_ms_unaligned", {}).items()}
        self.sdpa_ms_batch_heads = int(data.get("sdpa_ms_batch_heads", 0))
        self.shapes: Dict[Tuple[str, int, int, int, int], Tuple[float, str]] = {}
        self.shape_sdpa_ms: Dict[Tuple[int, int, int, int], float] = {}
        for cell in data.get("shapes", []):
            try:
                dims = tuple(int(cell[k]) for k in ("head_dim", "nq", "nk", "batch_heads"))
                for mode, r in cell["ratio"].items():
                    if r is not None:
                        self.shapes[(str(mode), *dims)] = (float(r), str(cell.get("model", "")))
                if cell.get("sdpa_ms") is not None:
                    self.shape_sdpa_ms[dims] = float(cell["sdpa_ms"])
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise ValueError(f"routing table {self.device}: shape cell {cell!r} is not "
                                 "{head_dim, nq, nk, batch_heads, ratio: {mode: x}}") from exc
        shape = f"{len(self.batch_heads)}x{len(self.nq)}x{len(self.nk)}"
        for mode, per_d in [*self.ratio.items(), *self.ratio_unaligned.items()]:
            for d, levels in per_d.items():
                if len(levels) != len(self.batch_heads) or any(
                        len(rows) != len(self.nq) or any(len(r) != len(self.nk) for r in rows)
                        for rows in levels):
                    raise ValueError(f"routing table {self.device}: ratio[{mode}][{d}] is not "
                                     f"{shape} (batch_heads x nq x nk)")

    def covers_head_dim(self, head_dim: int) -> bool:
        """Whether the grid has a head dim at least this large: one above them all may run
        another kernel than the largest measured one, so the table says nothing about it.
        (Below the smallest, a call reads the smallest: on fresh K/V every head dim up to 64
        runs the kernels of 64.)"""
        return head_dim <= self.head_dims[-1]

    def _grid_head_dim(self, head_dim: int) -> Optional[int]:
        return next((h for h in self.head_dims if h >= head_dim), None)

    @staticmethod
    def _nearest(grid: Sequence[int], n: int) -> int:
        x = math.log(max(n, 1))
        return min(range(len(grid)), key=lambda i: abs(math.log(grid[i]) - x))

    def ratio_for(self, mode: int, head_dim: int, nq: int, nk: int,
                  batch_heads: int) -> Optional[float]:
        """The measured speed ratio nearest to this call (None where nothing was measured): the
        exact cell of this shape if one was measured, else the grid's nearest point: head dim
        rounded up (None above the largest measured one), lengths nearest on a log scale, and
        the largest level of batch ×
        heads not above the call's (the smallest for fewer; int8attn gains with more heads, so
        where a level measured the cell, it does not overstate int8attn's speed). Lengths that
        are not both multiples of 128 read the unaligned table."""
        name = _MODE_NAMES.get(mode, "")
        exact = self.shapes.get((name, head_dim, nq, nk, batch_heads))
        if exact is not None:
            return exact[0]
        table = self.ratio if nq % 128 == 0 and nk % 128 == 0 else self.ratio_unaligned
        per_d = table.get(name)
        if not per_d:
            return None
        d = self._grid_head_dim(head_dim)
        levels = per_d.get(d)
        if levels is None:
            return None
        level = max((i for i, n in enumerate(self.batch_heads) if n <= batch_heads), default=0)
        point = self._measured_point(levels[level], nq, nk)
        return None if point is None else point[2]

    def _measured_point(self, rows: List[List[Optional[float]]], nq: int,
                        nk: int) -> Optional[Tuple[int, int, float]]:
        """(i_nq, i_nk, value) of the grid point nearest to (nq, nk) on a log scale that was
        measured (cells with Nk much larger than Nq are not); None if none was."""
        iq = self._nearest(self.nq, nq)
        order = sorted(range(len(self.nk)), key=lambda i: abs(math.log(self.nk[i]) -
                                                               math.log(max(nk, 1))))
        for ik in order:
            x = rows[iq][ik]
            if x is not None:
                return iq, ik, float(x)
        return None

    def sdpa_ms_for(self, head_dim: int, nq: int, nk: int, batch_heads: int) -> Optional[float]:
        """cuDNN's time for this call (None where the table has none): the exact model-shape
        cell's, else the nearest grid point's (as :meth:`ratio_for` finds it) scaled by the
        call's work (batch × heads × Nq × Nk × head dim) over the point's."""
        exact = self.shape_sdpa_ms.get((head_dim, nq, nk, batch_heads))
        if exact is not None:
            return exact
        aligned = nq % 128 == 0 and nk % 128 == 0
        grid, offset = ((self.sdpa_ms, 0) if aligned or not self.sdpa_ms_unaligned
                        else (self.sdpa_ms_unaligned, self.unaligned_offset))
        if not grid or self.sdpa_ms_batch_heads <= 0:
            return None
        d = self._grid_head_dim(head_dim)
        rows = grid.get(d)
        point = None if rows is None else self._measured_point(rows, nq, nk)
        if point is None:
            return None
        iq, ik, t = point
        work = (batch_heads * nq * nk * head_dim) / (
            self.sdpa_ms_batch_heads * (self.nq[iq] + offset) * (self.nk[ik] + offset) * d)
        return t * work


class NoRoutingTableWarning(UserWarning):
    """A CUDA call on a GPU that no routing table was measured on: every call int8attn can
    take runs int8attn there, measured faster than stock or not. Issued once per GPU; measure
    the GPU (``bench/route_table.py --table $INT8ATTN_ROUTING_DIR/my-gpu.json``, see
    ``docs/diffusers.md``) or silence it with
    ``warnings.simplefilter("ignore", int8attn.NoRoutingTableWarning)``."""


_tables: Optional[List[RouteTable]] = None
_decisions: Dict[Tuple[Any, ...], bool] = {}
_devices: Dict[int, Tuple[Tuple[int, int], str]] = {}
_warned: set = set()


def table_dirs() -> List[Path]:
    """Where tables are read from, in order: the folders of ``INT8ATTN_ROUTING_DIR``, then the
    package's own. A folder named there that does not exist raises ``ValueError`` (a mistyped
    path would otherwise leave the GPU on another table without a word)."""
    user = [Path(d) for d in os.environ.get(ROUTING_DIR_ENV, "").split(os.pathsep) if d]
    missing = [str(d) for d in user if not d.is_dir()]
    if missing:
        raise ValueError(f"{ROUTING_DIR_ENV}: no such folder: {', '.join(missing)}")
    return [*user, _TABLE_DIR]


def _read_table(path: Path) -> RouteTable:
    try:
        t = RouteTable(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"routing table {path}: cannot be read ({exc}); remove it or measure "
                         "it again with bench/route_table.py --table") from exc
    t.general = path.stem == f"sm{t.capability[0]}{t.capability[1]}"
    t.path = str(path)
    return t


def tables() -> List[RouteTable]:
    """Every table, the user's folders' first (:func:`table_dirs`); a capability's general table
    (``sm<cc>.json``) is marked ``general``, the others serve only their ``device``. A file
    that is not a table raises ``ValueError`` naming it."""
    global _tables
    if _tables is None:
        _tables = [_read_table(path) for d in table_dirs() if d.is_dir()
                   for path in sorted(d.glob("*.json"))]
    return _tables


def table_for(capability: Tuple[int, int], device: str = "") -> Optional[RouteTable]:
    """The table measured on a GPU named ``device``, else the general table of its compute
    capability, if one was measured; of two, the one read first (:func:`tables`)."""
    same = [t for t in tables() if t.capability == tuple(capability)]
    return (next((t for t in same if device and t.device == device), None)
            or next((t for t in same if t.general), None))


def _device(device_index: int) -> Tuple[Tuple[int, int], str]:
    found = _devices.get(device_index)
    if found is None:
        import torch

        found = _devices[device_index] = (
            tuple(torch.cuda.get_device_capability(device_index)),  # type: ignore[assignment]
            torch.cuda.get_device_name(device_index))
    return found


def prefer_sdpa(device_index: int, mode: int, head_dim: int, nq: int, nk: int,
                batch_heads: int) -> bool:
    """True when SDPA should take this CUDA call of ``batch_heads`` (batch × query heads) heads
    (:func:`routes_to_sdpa`: int8attn not measured :data:`MIN_RATIO` times faster, or its gain
    below the host margin; a head dim above the table's largest: not measured, so SDPA);
    ``device_index`` is the tensor's CUDA device; CPU calls (-1) always take int8attn."""
    key = (device_index, mode, head_dim, nq, nk, batch_heads)
    hit = _decisions.get(key)
    if hit is not None:
        return hit
    decision = False
    if device_index >= 0:
        (major, minor), name = _device(device_index)
        table = table_for((major, minor), name)
        if table is None and device_index not in _warned:
            _warned.add(device_index)
            warnings.warn(
                f"int8attn: no routing table for {name} (sm_{major}{minor}): every call "
                "int8attn can take runs int8attn, faster than PyTorch SDPA or not; measure "
                f"one with bench/route_table.py --table ${ROUTING_DIR_ENV}/my-gpu.json "
                "(docs/diffusers.md)", NoRoutingTableWarning, stacklevel=2)
        if table is not None:
            r = table.ratio_for(mode, head_dim, nq, nk, batch_heads)
            if r is None and not table.covers_head_dim(head_dim):
                decision = True  # never measured: the stock path, which is never slower
            else:
                decision = routes_to_sdpa(r, table.sdpa_ms_for(head_dim, nq, nk, batch_heads)
                                          if r is not None and r >= 1.0 else None)
    _decisions[key] = decision
    return decision


def describe() -> List[Dict[str, Any]]:
    """Every table read, in the order :func:`tables` reads them (the user's folders' first),
    each with its ``device``, ``capability``, ``source``, ``general`` (serves its whole
    capability) and ``path``, and, per mode, head dim and batch × heads, the shapes (Nq, Nk)
    routed to SDPA (for docs and ``int8attn.info()``-style reports): ``routed_to_sdpa`` for lengths
    that are multiples of 128, ``routed_to_sdpa_unaligned`` for others, as measured (the grid's
    lengths + ``unaligned_offset``), and ``shapes``: the exact model-shape cells, each with its
    ratio and whether it goes to SDPA."""
    def routed(t: RouteTable, table: Dict[str, Dict[int, List[List[List[Optional[float]]]]]],
               offset: int) -> Dict[str, Dict[int, Dict[int, List[Tuple[int, int]]]]]:
        def to_sdpa(r: Optional[float], d: int, bh: int, nq: int, nk: int) -> bool:
            return r is not None and routes_to_sdpa(r, t.sdpa_ms_for(d, nq, nk, bh))

        return {mode: {d: {bh: [(t.nq[i] + offset, t.nk[j] + offset)
                                for i, row in enumerate(rows)
                                for j, r in enumerate(row)
                                if to_sdpa(r, d, bh, t.nq[i] + offset, t.nk[j] + offset)]
                           for bh, rows in zip(t.batch_heads, levels)}
                       for d, levels in per_d.items()}
                for mode, per_d in table.items()}

    def shape(t: RouteTable, mode: str, d: int, nq: int, nk: int, bh: int, r: float,
              model: str) -> Dict[str, Any]:
        ms = t.shape_sdpa_ms.get((d, nq, nk, bh))
        return {"model": model, "mode": mode, "head_dim": d, "nq": nq, "nk": nk,
                "batch_heads": bh, "ratio": r, "sdpa_ms": ms,
                "routed_to_sdpa": routes_to_sdpa(r, ms)}

    return [{"device": t.device, "capability": t.capability, "source": t.source,
             "general": t.general, "path": t.path,
             "routed_to_sdpa": routed(t, t.ratio, 0),
             "unaligned_offset": t.unaligned_offset,
             "routed_to_sdpa_unaligned": routed(t, t.ratio_unaligned, t.unaligned_offset),
             "shapes": [shape(t, *key, *cell) for key, cell in t.shapes.items()]}
            for t in tables()]
