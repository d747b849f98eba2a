"""The PE models a topology can name, and a systolic array's cycles for one tile-op.

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

This module sits below ``sim.topology`` (which checks a systolic PE with it); the timing of
a topology's tile-op, in picoseconds, is ``sim.gemm.tile_op.tile_op_timing``.
"""

from __future__ import annotations

from sim.systolic import ArrayConfig, SystolicLayer, layer_cycles

__all__ = ["PE_MODELS", "systolic_tile_cycles"]

PE_MODELS = ("tile", "systolic")


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
