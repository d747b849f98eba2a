"""Memory budgets with a compressed op log (ADR 0011): what is planned, what is checked later."""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

import pytest

import sim.core
import sim.limits
from sim import BudgetError, allreduce, load_topology, run_gemm
from sim.collectives import build_schedule, fabric_program
from sim.collectives.budget import estimate_collective
from sim.fabric import build_network
from sim.gemm.budget import check_gemm
from sim.limits import MEMORY_BUDGET_ENV, OPS_BUDGET_ENV

sys.path.insert(0, str(Path(__file__).parents[1] / "fuzz"))
from fuzz_guard import time_limit

TOPO = load_topology("npu-1h")


def test_a_periodic_giant_is_planned_by_its_states_not_its_full_log() -> None:
    """16384^3 has 2.7e8 records (13.5 GiB written out) but the fast path stores a period once:
    it is not refused up front, while a one-by-one run (every record stored) still is."""
    check_gemm(16384, 16384, 16384, TOPO)
    with pytest.raises(BudgetError, match=MEMORY_BUDGET_ENV):
        check_gemm(16384, 16384, 16384, TOPO, extrapolate=False)


def test_writing_out_a_compressed_log_is_checked_against_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = run_gemm("2048x2048x2048", "double_buffer", TOPO)
    assert run.log.compressed
    monkeypatch.setenv(MEMORY_BUDGET_ENV, "1")  # 1 MiB: the full log is ~28 MiB
    with pytest.raises(BudgetError, match=rf"compressed op log.*{MEMORY_BUDGET_ENV}"):
        run.log.start  # noqa: B018 (the column access is what is checked)
    monkeypatch.setenv(MEMORY_BUDGET_ENV, "64")
    assert len(run.log.start) == len(run.log)


def test_a_fast_path_that_stores_too_much_is_stopped_while_it_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The writer checks stored records as it flushes: with a record priced at 1 MiB, a run
    storing thousands of records is refused, one storing a few dozen is not."""
    monkeypatch.setattr(sim.limits, "OPLOG_RECORD_BYTES", 1 << 20)
    monkeypatch.setattr(sim.core.writer, "_GUARD_EVERY", 1)
    with pytest.raises(BudgetError, match="found no period"):
        run_gemm("1000x3000x700", "prefetch", TOPO)
    assert run_gemm("64x64x64", "double_buffer", TOPO).log.makespan_ps > 0


def test_the_fast_path_is_refused_past_its_block_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """33333^3 stores little (periods) but walks 18 M blocks (5-9 s): refused up front naming
    the variable; 16384^3's 2 M blocks are within the default budget (check only, no run)."""
    with pytest.raises(BudgetError, match=rf"blocks.*{OPS_BUDGET_ENV}"):
        run_gemm("33333x33333x33333", "load_ref", TOPO)
    monkeypatch.setenv(OPS_BUDGET_ENV, "1000")  # 4000 blocks: 64 output tiles x 1 chunk fit
    assert run_gemm("256x64x256", "load_ref", TOPO).log.makespan_ps > 0
    with pytest.raises(BudgetError, match=OPS_BUDGET_ENV):
        run_gemm("2048x64x2048", "load_ref", TOPO)  # 4096 blocks


# --- chips.staging_buffers inside the work budget (issue 22) ----------------------------------


def test_staging_buffers_count_in_the_collective_work_estimate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each message is cut into at least staging_buffers / 2 chunks: a 64 KiB ring allreduce is
    1792 ops with 8 buffers, 229376 with 1000 and 917504 with 10**6. Under a budget of 50000
    operations the first runs; the others are refused before any work, naming the key."""
    monkeypatch.setenv(OPS_BUDGET_ENV, "50000")
    assert allreduce(TOPO, 64 * 1024, "ring").wrong == 0
    for buffers in (1000, 10**6):
        topo = TOPO.replace_chips(staging_buffers=buffers)
        with time_limit(5), pytest.raises(BudgetError, match=rf"staging_buffers.*{OPS_BUDGET_ENV}"):
            allreduce(topo, 64 * 1024, "ring", protocol="simple")  # the full program


@pytest.mark.parametrize("buffers", [1, 8, 64, 256])
@pytest.mark.parametrize("algorithm", ["ring", "direct", "halving_doubling", "double_binary_tree"])
def test_the_collective_estimate_is_near_the_program_it_plans(buffers: int, algorithm: str) -> None:
    """The estimate is never below the ops the program really holds, nor more than 8 times
    them (a direct message of one chunk is counted as one chunk per segment), whatever the
    staging buffers; it was 1/64 of the real count with 1000 buffers."""
    topo = TOPO.replace_chips(staging_buffers=buffers)
    for nbytes in (16, 1000, 64 * 1024, 3 << 20):
        schedule = build_schedule(topo, nbytes, algorithm, "allreduce", network=build_network(topo))
        ops = len(fabric_program(schedule).program.kind)
        estimate = estimate_collective(topo, nbytes, algorithm, None)
        assert estimate.ops / 8 <= ops <= estimate.ops, (nbytes, ops, estimate)


def test_the_collective_memory_estimate_covers_what_a_run_allocates() -> None:
    """tracemalloc's peak for a 64 KiB ring allreduce with 64 staging buffers (14336 ops) is
    below the planned bytes, and more than a third of them (the estimate is not padding)."""
    topo = TOPO.replace_chips(staging_buffers=64)
    planned = estimate_collective(topo, 64 * 1024, "ring", None).memory_bytes
    tracemalloc.start()
    try:  # a protocol named: the full program (the symmetric ring path allocates far less)
        allreduce(topo, 64 * 1024, "ring", protocol="simple")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert planned / 3 < peak < planned, (peak, planned)
