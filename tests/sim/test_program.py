"""ProgramBuilder: hand-built kernels time exactly like the reference, bad input is refused."""

from __future__ import annotations

import pytest

from sim.program import ProgramBuilder
from sim.topology import Topology


def _pipeline(topo: Topology, tiles: int) -> ProgramBuilder:
    p = ProgramBuilder(topo, stages=("dma_in", "fetch", "gemm", "dma_out"))
    fetched: list[int] = []
    for i in range(tiles):
        deps = [fetched[i - 2]] if i >= 2 else []
        a = p.dma("dma0", "dma_in", addr=i * 4096, nbytes=4096, deps=deps, tile=i)
        b = p.dma("dma1", "dma_in", addr=(1 << 20) + i * 4096, nbytes=4096, deps=deps, tile=i)
        fetched.append(p.serve("fetch", "fetch", nbytes=8192, gbs=topo.fetch.bw, deps=[a, b]))
        g = p.tile_op("gemm", deps=[fetched[i]], tile=i)
        p.dma("dma2", "dma_out", addr=(2 << 20) + i * 2048, nbytes=2048, deps=[g])
    return p


def test_builder_programs_match_the_reference(topo: Topology) -> None:
    """A double-buffered pipeline built op by op: fast path and reference agree exactly."""
    p = _pipeline(topo, 12)
    fast, ref = p.simulate(), p.simulate_reference()
    assert fast.equals(ref), fast.first_difference(ref)
    assert len(fast) == 5 * 12


def test_tile_op_uses_the_topology_pipeline(topo: Topology) -> None:
    """A lone tile-op lasts D*T and carries m*k*n MACs, from the YAML."""
    p = ProgramBuilder(topo, stages=("gemm",))
    p.tile_op("gemm")
    rec = p.simulate().record(0)
    assert rec.end_ps - rec.start_ps == topo.pe.pipeline_stages * topo.pe.stage_ps
    assert rec.macs == topo.pe.tile_m * topo.pe.tile_k * topo.pe.tile_n


def test_bad_programs_are_refused(topo: Topology) -> None:
    """Unknown engines and stages, forward dependencies and empty programs: clear errors."""
    p = ProgramBuilder(topo, stages=("dma_in",))
    with pytest.raises(ValueError, match="unknown engine 'dma9'"):
        p.dma("dma9", "dma_in", addr=0, nbytes=64)
    with pytest.raises(ValueError, match="unknown stage 'fetch'"):
        p.dma("dma0", "fetch", addr=0, nbytes=64)
    with pytest.raises(ValueError, match="not an earlier operation"):
        p.dma("dma0", "dma_in", addr=0, nbytes=64, deps=[0])
    with pytest.raises(ValueError, match="program is empty"):
        p.simulate()
    with pytest.raises(ValueError, match="distinct"):
        ProgramBuilder(topo, stages=("a", "a"))
