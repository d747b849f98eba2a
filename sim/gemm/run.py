"""Run one GEMM: build its program and simulate it."""

from __future__ import annotations

from dataclasses import dataclass

from sim.core import simulate
from sim.gemm.budget import check_gemm, check_gemm_blocks
from sim.gemm.program import GemmProgram
from sim.gemm.shape import GemmShape, ShapeError
from sim.limits import shape_dims
from sim.oplog import OpLog
from sim.topology import Topology

__all__ = ["GemmRun", "run_gemm"]


@dataclass(frozen=True)
class GemmRun:
    program: GemmProgram
    log: OpLog

    @property
    def latency_ps(self) -> int:
        return self.log.makespan_ps


def run_gemm(
    shape: GemmShape | str | tuple[int, int, int],
    variant: str,
    topo: Topology,
    *,
    extrapolate: bool = True,
) -> GemmRun:
    """Simulate one GEMM; the op log is exact and deterministic."""
    if not isinstance(shape, GemmShape):
        shape = GemmShape(*shape_dims(shape, ShapeError))
    check_gemm(shape.M, shape.K, shape.N, topo, extrapolate=extrapolate)  # budgets, sim.limits
    program = GemmProgram(shape, variant, topo)
    if extrapolate:  # one by one, the ops budget of check_gemm applies instead
        check_gemm_blocks(shape.M, shape.K, shape.N, program.num_blocks)
    return GemmRun(program, simulate(program, extrapolate=extrapolate))
