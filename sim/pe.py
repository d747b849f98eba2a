"""How long one PE tile-op takes: the tile model's pipeline, or a systolic array's folds.

A tile-op is one ``tile_m x tile_k x tile_n`` block product, ``C[tm, tn] += A[tm, tk] @
B[tk, tn]``. The topology's ``pe.model`` says how the PE times it (docs/adr/0012):

- ``tile`` (the default): a pipeline of ``pipeline_stages`` stages of ``stage_ns``; a tile-op
  issues every stage and retires ``pipeline_stages`` stages after its issue.
- ``systolic``: an array of ``rows x cols`` PEs running ``dataflow`` (``os``, ``ws``, ``is``),
  one step per clock cycle, timed as SCALE-Sim's compute model times the GEMM ``tm x tk x
  tn`` (``sim.systolic``): its operand matrices are cut into ``ceil(Sr / rows) * ceil(Sc /
  cols)`` folds that run one after another, each ``T + rows + cols - 2`` cycles (``os``) or
  ``2 rows + cols + T - 2`` (``ws``, ``is``). Like consecutive folds in SCALE-Sim, consecutive
  tile-ops do not overlap: the next issues when this one's last fold has drained, so the
  issue interval equals the latency.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from sim.systolic import ArrayConfig, SystolicLayer, layer_cycles

if TYPE_CHECKING:
    from sim.topology import Topology

__all__ = ["PE_MODELS", "TileOpTiming", "systolic_tile_cycles", "tile_op_timing"]

PE_MODELS = ("tile", "systolic")


class TileOpTiming(NamedTuple):
    """One tile-op on the PE: the next may issue ``issue_ps`` after it; it retires
    ``latency_ps`` after its issue."""

    issue_ps: int
    latency_ps: int


def systolic_tile_cycles(
    tile_m: int, tile_k: int, tile_n: int, rows: int, cols: int, dataflow: str
) -> int:
    """Clock cycles one ``tile_m x tile_k x tile_n`` tile-op occupies a ``rows x cols`` array.

    It is SCALE-Sim's GEMM layer ``M = tile_m, N = tile_n, K = tile_k`` (``Total Cycles + 1``:
    SCALE-Sim reports its last cycle's index, this is the duration).
    """
    return layer_cycles(
        SystolicLayer.gemm("tile-op", tile_m, tile_n, tile_k), ArrayConfig(rows, cols, dataflow)
    )


def tile_op_timing(topo: Topology) -> TileOpTiming:
    """The PE's issue interval and latency for one tile-op of ``topo``, in picoseconds."""
    pe = topo.pe
    if pe.model == "systolic":
        cycles = systolic_tile_cycles(
            pe.tile_m, pe.tile_k, pe.tile_n, pe.rows, pe.cols, pe.dataflow
        )
        return TileOpTiming(cycles * pe.cycle_ps, cycles * pe.cycle_ps)
    return TileOpTiming(pe.stage_ps, pe.pipeline_stages * pe.stage_ps)
