"""The data-moving checker: real bytes through HBM, SRAM and PE slots; planted bugs fail it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.gemm import program as gemm
from sim.gemm.datacheck import DataCheckError, DataHazard, check_gemm_data, gemm_inputs
from sim.gemm.model import gemm_model
from sim.gemm.program import GemmProgram
from sim.gemm.run import GemmRun, run_gemm
from sim.gemm.shape import VARIANTS, GemmShape
from sim.topology import Topology


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", ["16x32x16", "24x48x40", "100x300x200", "128x64x256"])
def test_every_variant_moves_the_right_bytes(topo: Topology, shape: str, variant: str) -> None:
    """Replaying the log on real data gives C == A @ B with no hazard, in every variant."""
    check_gemm_data(run_gemm(shape, variant, topo))


def test_panel_mode_moves_the_right_bytes(make_topo: Callable[..., Topology]) -> None:
    """Row and column panels rotating through their buffers still deliver the right data."""
    run = run_gemm("300x640x200", "resident", make_topo(sram__capacity_kib=192))
    assert run.program.mode == "panel" and run.program.buffers.a < run.program.Mt
    check_gemm_data(run)


small = st.builds(GemmShape, st.integers(1, 160), st.integers(1, 300), st.integers(1, 160))


@settings(
    max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(shape=small)
def test_random_shapes_pass_the_data_check_and_respect_the_bound(
    topo: Topology, shape: GemmShape
) -> None:
    """For random small shapes, every variant: the data check passes, latency >= bound."""
    for variant in VARIANTS:
        run = run_gemm(shape, variant, topo)
        check_gemm_data(run)
        assert run.latency_ps >= gemm_model(shape, variant, topo).lower_bound_ps


def test_inputs_are_exact_in_the_element_type(topo: Topology) -> None:
    """A deep K gets small values, so |C| stays inside the element type."""
    prog = GemmProgram(GemmShape(4, 8192, 4), "load_ref", topo)
    a, b = gemm_inputs(prog)
    bound = np.iinfo(np.int16).max
    assert np.abs(a).max() * np.abs(b).max() * 8192 <= bound


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, object], None]]:
    def plant(name: str, fn: object) -> None:
        monkeypatch.setattr(gemm.GemmProgram, name, fn)

    yield plant


def test_planted_war_race_is_a_hazard_naming_both_ops(
    topo: Topology, planted: Callable[[str, object], None]
) -> None:
    """double_buffer loads that stop waiting for their buffer overwrite a tile before its
    fetch has read it: a WAR hazard naming the load and the fetch."""
    real = GemmProgram.load_deps

    def no_wait(self: GemmProgram, i: int, freed_by: int) -> tuple[int, ...]:
        return () if self.variant == "double_buffer" else real(self, i, freed_by)

    planted("load_deps", no_wait)
    with pytest.raises(DataHazard, match=r"WAR hazard: op \d+ \(dma\d dma_in.*A buffer.*fetch"):
        check_gemm_data(run_gemm("128x256x128", "double_buffer", topo))


def test_planted_short_write_back_names_the_unwritten_bytes(
    topo: Topology, planted: Callable[[str, object], None]
) -> None:
    """A DMA out that moves 2 bytes instead of a tile leaves C unwritten: the message names
    the tile, its HBM range, the DMA out, and how many bytes were never written."""
    planted("out_bytes", lambda self, j: 2)
    with pytest.raises(DataCheckError, match=r"C tile 0 in HBM.*dma2 dma_out.*never written"):
        check_gemm_data(run_gemm("64x128x64", "prefetch", topo))


def test_planted_wrong_c_address_names_the_writer(
    topo: Topology, planted: Callable[[str, object], None]
) -> None:
    """Output tiles written to each other's addresses: C != A @ B at a named tile."""
    real = GemmProgram.c_addr
    planted("c_addr", lambda self, j: real(self, j ^ 1))
    with pytest.raises(DataCheckError, match=r"output tile \(0, 0\).*C tile 0 in HBM.*dma_out"):
        check_gemm_data(run_gemm("64x128x64", "resident", topo))


def test_planted_read_before_arrival_is_a_raw_hazard(topo: Topology) -> None:
    """A log whose fetch starts before its load landed: RAW, naming the fetch and the load."""
    run = run_gemm("64x128x64", "load_ref", topo)
    log, prog = run.log, run.program
    start, end = log.start.copy(), log.end.copy()
    rec = int(np.flatnonzero(log.op == prog.fetch_id(3))[0])
    shift = end[rec] - start[rec]
    start[rec] = int(log.end[log.op == prog.load_ids(3)[0]][0]) - 1
    end[rec] = start[rec] + shift
    broken = GemmRun(prog, replace(log, start=start, end=end))
    with pytest.raises(DataHazard, match=r"RAW hazard: op \d+ \(fetch fetch, tile-op 3.*dma0"):
        check_gemm_data(broken)


def test_a_missing_record_is_an_error(topo: Topology) -> None:
    """A log that lost an op cannot be replayed: said so, not silently skipped."""
    run = run_gemm("32x64x32", "load_ref", topo)
    log = run.log
    keep = np.arange(len(log)) != 1
    cut = {c: getattr(log, c)[keep] for c in ("chip", "engine", "stage", "op", "start")}
    cut |= {c: getattr(log, c)[keep] for c in ("end", "nbytes", "macs", "tile")}
    broken = GemmRun(run.program, replace(log, **cut))
    with pytest.raises(DataCheckError, match="records for"):
        check_gemm_data(broken)
