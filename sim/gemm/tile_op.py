"""How long one PE tile-op of a topology takes: the tile model's pipeline, or a systolic
array's folds (the models: ``sim.pe``, docs/adr/0012)."""

from __future__ import annotations

from typing import NamedTuple

from sim.pe import systolic_tile_cycles
from sim.topology import Topology

__all__ = ["TileOpTiming", "tile_op_timing"]


class TileOpTiming(NamedTuple):
    """One tile-op on the PE: the next may issue ``issue_ps`` after it; it retires
    ``latency_ps`` after its issue."""

    issue_ps: int
    latency_ps: int


def tile_op_timing(topo: Topology) -> TileOpTiming:
    """The PE's issue interval and latency for one tile-op of ``topo``, in picoseconds."""
    pe = topo.pe
    if pe.model == "systolic":
        cycles = systolic_tile_cycles(
            pe.tile_m, pe.tile_k, pe.tile_n, pe.rows, pe.cols, pe.dataflow
        )
        return TileOpTiming(cycles * pe.cycle_ps, cycles * pe.cycle_ps)
    return TileOpTiming(pe.stage_ps, pe.pipeline_stages * pe.stage_ps)
