"""A systolic array in closed form: SCALE-Sim's compute numbers from fold arithmetic.

SCALE-Sim (v3) builds, for every layer, demand matrices with one row per cycle and walks
them cycle by cycle. In its stall-free mode (``InterfaceBandwidth: CALC``) everything its
COMPUTE_REPORT says about compute depends only on the sizes of those matrices, so this
module computes the sizes instead of the matrices: a layer costs O(folds), not O(cycles).

The mapping, as SCALE-Sim does it (``topology_utils``, ``compute/systolic_compute_*``):

- A GEMM row ``name, M, N, K`` is the convolution ``ifmap M x K, filter 1 x K, 1 channel,
  N filters, stride 1``; a convolution is lowered to ``M = ofmap pixels`` (``ofmap_h =
  ceil((H - R + s) / s)``), ``K = R * S * C`` (the window), ``N = filters``.
- The operand matrices ``ifmap (M x K)`` and ``filter (K x N)`` are spread over an array of
  ``rows x cols`` PEs as ``Sr x Sc`` spatially and ``T`` in time: ``os``: (M, N, K);
  ``ws``: (K, N, M); ``is``: (K, M, N). ``ceil(Sr / rows) * ceil(Sc / cols)`` folds run one
  after another, column fold outer.
- A fold lasts ``T + rows + cols - 2`` cycles (``os``) or ``2 rows + cols + T - 2`` (``ws``,
  ``is``); the layer's ``Total Cycles`` is ``folds * fold - 1`` (the last cycle index).
- ``Overall Util % = 100 M N K / (total * rows * cols)``; ``Mapping Efficiency %`` and
  ``Compute Util %`` are SCALE-Sim's means over folds of ``used PEs / (rows * cols)`` and
  ``used PEs * T / (rows * cols * window)``, with ``window = T + rows + cols - 2`` (``os``)
  or ``2 rows + 2 cols + T - 3`` (``ws``, ``is``); the mean is summed fold by fold in
  SCALE-Sim's order so that the floats agree with its own, not merely to a tolerance.
- SRAM reads and writes count the operand-matrix elements each fold streams (``os`` also
  counts SCALE-Sim's ``rows + cols`` per fold on the OFMAP side, as it does).

Not modelled: memory stalls (``InterfaceBandwidth: USER``: the stall-free cycles are
reported), DRAM traffic and the prefetch-inclusive cycle count (they depend on SCALE-Sim's
buffer replacement, cycle by cycle), sparsity. See ``docs/adr/0008-systolic-scalesim.md``.
SCALE-Sim's files are read by :mod:`sim.scalesim_files` (ADR 0019).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sim.errors import InputError
from sim.limits import check_systolic_work

__all__ = [
    "COMPUTE_REPORT_HEADER",
    "DATAFLOWS",
    "ArrayConfig",
    "LayerReport",
    "ScaleSimInputError",
    "SramSizes",
    "SystolicLayer",
    "compute_report_csv",
    "dram_accesses",
    "layer_cycles",
    "simulate_layer",
    "simulate_layers",
]

DATAFLOWS = ("os", "ws", "is")
COMPUTE_REPORT_HEADER = (
    "LayerID, Total Cycles (incl. prefetch), Total Cycles, Stall Cycles, Overall Util %,"
    " Mapping Efficiency %, Compute Util %,"
)


class ScaleSimInputError(InputError):
    """A SCALE-Sim cfg or topology file, or a layer, breaks a rule; the message says the fix."""


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# SCALE-Sim's memory model constants (single_layer_sim.py hard-codes them, not the cfg)
SCALESIM_WORD_BYTES = 1
SCALESIM_ACTIVE_PCT = 50  # active_buf_frac 0.5: half of each buffer is active, half prefetch


@dataclass(frozen=True)
class SramSizes:
    """The cfg's ``IfmapSramSzkB``, ``FilterSramSzkB``, ``OfmapSramSzkB`` (KiB)."""

    ifmap_kib: int
    filter_kib: int
    ofmap_kib: int


@dataclass(frozen=True)
class ArrayConfig:
    """A systolic array of ``rows x cols`` PEs running one dataflow (``os``, ``ws``, ``is``)."""

    rows: int
    cols: int
    dataflow: str

    def __post_init__(self) -> None:
        for name in ("rows", "cols"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ScaleSimInputError(f"array {name} {value!r} must be an integer >= 1")
        if self.dataflow not in DATAFLOWS:
            raise ScaleSimInputError(
                f"dataflow {self.dataflow!r} is not one of {', '.join(DATAFLOWS)}; pick one"
            )


@dataclass(frozen=True)
class SystolicLayer:
    """One layer as the GEMM ``C[M, N] = A[M, K] @ B[K, N]`` SCALE-Sim runs it as.

    ``m``: ofmap pixels (GEMM rows), ``n``: filters (GEMM columns), ``k``: window
    (filter height x width x channels, or the GEMM's K).
    """

    name: str
    m: int
    n: int
    k: int
    #: distinct IFMAP elements the layer reads (a convolution's windows overlap); 0: M * K
    ifmap_elems: int = 0

    def __post_init__(self) -> None:
        for dim in ("m", "n", "k"):
            value = getattr(self, dim)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ScaleSimInputError(
                    f"layer {self.name!r}: {dim.upper()} {value!r} must be an integer >= 1"
                )

    @classmethod
    def gemm(cls, name: str, m: int, n: int, k: int) -> SystolicLayer:
        """A topology row ``Layer, M, N, K``."""
        return cls(name, m, n, k)

    @classmethod
    def conv(
        cls,
        name: str,
        ifmap_h: int,
        ifmap_w: int,
        filter_h: int,
        filter_w: int,
        channels: int,
        filters: int,
        stride: int,
    ) -> SystolicLayer:
        """A convolution row, lowered as SCALE-Sim lowers it (same stride both ways)."""
        ofmap_h = _ceil_div(ifmap_h - filter_h + stride, stride)
        ofmap_w = _ceil_div(ifmap_w - filter_w + stride, stride)
        touched = _touched(ifmap_h, filter_h, stride, ofmap_h)
        touched *= _touched(ifmap_w, filter_w, stride, ofmap_w)
        return cls(
            name, ofmap_h * ofmap_w, filters, filter_h * filter_w * channels, touched * channels
        )

    @property
    def macs(self) -> int:
        """MACs the layer needs (SCALE-Sim's ``num_compute``)."""
        return self.m * self.n * self.k

    @property
    def distinct_ifmap(self) -> int:
        return self.ifmap_elems or self.m * self.k


def _touched(size: int, window: int, stride: int, outputs: int) -> int:
    """Input rows (or columns) some window covers; SCALE-Sim drops a window's part past the edge.

    With ``stride >= window`` the windows do not overlap: the sum over windows ``i`` (those
    starting inside, ``i * stride < size``) of ``min(window, size - i * stride)``, in closed
    form: the first ``full`` windows fit whole, the rest lose their part past the edge.
    """
    if stride >= window:
        starts = min(outputs, _ceil_div(size, stride))  # windows starting inside the input
        full = min(starts, (size - window) // stride + 1) if size >= window else 0
        cut = starts - full  # windows i in [full, starts): size - i * stride each
        return (
            full * window + cut * size - stride * (starts * (starts - 1) - full * (full - 1)) // 2
        )
    return min((outputs - 1) * stride + window, size)


@dataclass(frozen=True)
class LayerReport:
    """SCALE-Sim's compute report for one layer, and what the folds read and write."""

    name: str
    dataflow: str
    sr: int
    sc: int
    t: int
    row_folds: int
    col_folds: int
    fold_cycles: int
    total_cycles: int
    stall_cycles: int
    overall_util_pct: float
    mapping_efficiency_pct: float
    compute_util_pct: float
    ifmap_sram_reads: int
    filter_sram_reads: int
    ofmap_sram_writes: int

    @property
    def folds(self) -> int:
        return self.row_folds * self.col_folds


def _spatio_temporal(layer: SystolicLayer, dataflow: str) -> tuple[int, int, int]:
    if dataflow == "os":
        return layer.m, layer.n, layer.k
    if dataflow == "ws":
        return layer.k, layer.n, layer.m
    return layer.k, layer.m, layer.n


#: up to this many folds a layer's mean is SCALE-Sim's float sum, fold by fold (same bits);
#: beyond, it is the exact mean in closed form (SCALE-Sim would walk > 10**7 cycles)
EXACT_FOLDS = 1 << 16


def _fold_mean(sr: int, sc: int, array: ArrayConfig, per_pe: int, denominator: int) -> float:
    """SCALE-Sim's ``sum(per_fold) / len(per_fold)`` over ``used * per_pe / denominator``.

    Folds run column fold outer, row fold inner; only the last row fold and the last
    column fold are partial, so the list is built from four values, then summed in order
    (up to :data:`EXACT_FOLDS` folds; past them, the exact mean in closed form).
    """
    rows, cols = array.rows, array.cols
    row_folds, col_folds = _ceil_div(sr, rows), _ceil_div(sc, cols)
    if row_folds * col_folds > EXACT_FOLDS:
        # the used PEs of all folds add up to sr * sc: the exact mean, correctly rounded (a
        # float sum of this many terms would only differ in its last bits, and cost O(folds))
        return (sr * sc * per_pe) / (denominator * row_folds * col_folds)
    last_r, last_c = sr - (row_folds - 1) * rows, sc - (col_folds - 1) * cols

    def column(c: int) -> list[float]:
        full = rows * c * per_pe / denominator
        return [full] * (row_folds - 1) + [last_r * c * per_pe / denominator]

    values = column(cols) * (col_folds - 1) + column(last_c)
    return sum(values) / len(values)


def _fold_cycles(t: int, array: ArrayConfig) -> int:
    """Cycles of one fold: skew in, ``t`` steps, skew out (``ws``/``is`` first load a stationary
    operand, ``rows`` cycles); SCALE-Sim runs folds one after another, never overlapped."""
    if array.dataflow == "os":
        return t + array.rows + array.cols - 2
    return 2 * array.rows + array.cols + t - 2


def layer_cycles(layer: SystolicLayer, array: ArrayConfig) -> int:
    """Cycles the layer occupies the array: ``folds * fold``, SCALE-Sim's Total Cycles + 1.

    (SCALE-Sim reports the index of its last cycle, counted from 0; this is the duration.)
    """
    sr, sc, t = _spatio_temporal(layer, array.dataflow)
    return _ceil_div(sr, array.rows) * _ceil_div(sc, array.cols) * _fold_cycles(t, array)


def simulate_layer(layer: SystolicLayer, array: ArrayConfig) -> LayerReport:
    """The layer on the array, stall-free, as SCALE-Sim's CALC mode reports it."""
    rows, cols, df = array.rows, array.cols, array.dataflow
    sr, sc, t = _spatio_temporal(layer, df)
    row_folds, col_folds = _ceil_div(sr, rows), _ceil_div(sc, cols)
    folds = row_folds * col_folds
    fold = _fold_cycles(t, array)
    window = fold if df == "os" else 2 * rows + 2 * cols + t - 3
    total = layer_cycles(layer, array) - 1
    if total == 0:
        raise ScaleSimInputError(
            f"layer {layer.name!r}: one MAC on a 1 x 1 os array is 0 cycles in SCALE-Sim's count "
            "(it then divides by zero); use a larger array or K > 1"
        )
    pes = rows * cols
    m, n, k = layer.m, layer.n, layer.k
    if df == "os":
        reads = (col_folds * m * k, row_folds * k * n, m * n + folds * (rows + cols))
    elif df == "ws":
        reads = (col_folds * m * k, k * n, row_folds * m * n)
    else:
        reads = (k * m, col_folds * k * n, row_folds * n * m)
    return LayerReport(
        name=layer.name,
        dataflow=df,
        sr=sr,
        sc=sc,
        t=t,
        row_folds=row_folds,
        col_folds=col_folds,
        fold_cycles=fold,
        total_cycles=total,
        stall_cycles=0,
        overall_util_pct=(layer.macs * 100) / (total * pes),
        mapping_efficiency_pct=_fold_mean(sr, sc, array, 1, pes) * 100,
        compute_util_pct=_fold_mean(sr, sc, array, t, pes * window) * 100,
        ifmap_sram_reads=reads[0],
        filter_sram_reads=reads[1],
        ofmap_sram_writes=reads[2],
    )


def dram_accesses(
    layer: SystolicLayer, array: ArrayConfig, sram: SramSizes
) -> tuple[int | None, int | None, int | None]:
    """SCALE-Sim's DRAM IFMAP reads, filter reads and OFMAP writes (CALC mode), or None.

    They are exact where nothing is evicted before its reuse, so they follow from sizes:
    a read buffer fetches every address it misses, in sets of ``floor(elems / 100)``, and
    evicts only once its active half (50 sets) has filled; so an operand with fewer
    distinct addresses than that is fetched exactly once per address. The write buffer
    drains to DRAM only past its drain half; below it, DRAM gets every element written
    (``os`` writes each output once; ``ws`` and ``is`` write partial sums once per row fold).
    Otherwise (None) the count depends on the order of addresses cycle by cycle: which sets
    were evicted before an address came back, and a padded line counted mid-drain.
    """
    r = simulate_layer(layer, array)

    def elems(kib: int) -> int:
        return kib * 1024 // SCALESIM_WORD_BYTES

    def reads(distinct: int, kib: int) -> int | None:
        active = SCALESIM_ACTIVE_PCT * (elems(kib) // 100)
        return distinct if distinct < active else None

    stored = layer.m * layer.n if array.dataflow == "os" else r.ofmap_sram_writes
    total = elems(sram.ofmap_kib)
    drain = total - _ceil_div(total * SCALESIM_ACTIVE_PCT, 100)
    return (
        reads(layer.distinct_ifmap, sram.ifmap_kib),
        reads(layer.k * layer.n, sram.filter_kib),
        stored if stored <= drain else None,
    )


def simulate_layers(layers: Sequence[SystolicLayer], array: ArrayConfig) -> list[LayerReport]:
    """Every layer of a topology, in order (SCALE-Sim runs layers independently); refused
    before the first if the fold sums they need are over the ops budget (sim.limits)."""
    folds = 0
    for layer in layers:
        sr, sc, _t = _spatio_temporal(layer, array.dataflow)
        n = _ceil_div(sr, array.rows) * _ceil_div(sc, array.cols)
        folds += n if n <= EXACT_FOLDS else 0  # the closed form costs no fold sum
    check_systolic_work(len(layers), folds, f"{len(layers)} SCALE-Sim layers")
    return [simulate_layer(layer, array) for layer in layers]


def compute_report_csv(reports: Sequence[LayerReport]) -> str:
    """COMPUTE_REPORT.csv as SCALE-Sim writes it, with its columns and number formats.

    ``Total Cycles (incl. prefetch)`` is left empty: it counts SCALE-Sim's DRAM prefetch,
    which this model does not simulate (a blank is honest; a guess would not be).
    """
    lines = [COMPUTE_REPORT_HEADER]
    for lid, r in enumerate(reports):
        items = [
            "",
            str(r.total_cycles),
            str(r.stall_cycles),
            str(r.overall_util_pct),
            str(r.mapping_efficiency_pct),
            str(r.compute_util_pct),
        ]
        lines.append(f"{lid}, " + ", ".join(items) + ",")
    return "\n".join(lines) + "\n"
