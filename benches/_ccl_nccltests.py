"""The ccl bench's simulated sweeps as nccl-tests tables (not a bench: the name starts with
``_``), one text file per interconnect and algorithm at the figures' chip count, written beside
the figures so a user can ``diff`` them against a real ``all_reduce_perf`` run or hand them to
``python -m sim calibrate`` as a reference.

Only values the session already has are written: this run's, and for regen-only configs the
baseline's (the figures' rule); nothing is simulated here. Each file is written atomically.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from benches._ccl_sweep import GATED_CHIPS, SIZES, TOPOLOGIES, size_label
from pytest_npubench import ConfigResult
from pytest_npubench.plotting import measured
from sim import Topology
from sim.calibrate import format_table, simulated_row
from sim.calibrate.files import write_atomic
from sim.collectives import algorithms_for

ALLREDUCE = "allreduce"


def table_name(topology: str, algorithm: str, chips: int = GATED_CHIPS) -> str:
    """``nccltests-ring-ring-p8.txt``: interconnect, algorithm, chips."""
    return f"nccltests-{topology}-{algorithm}-p{chips}.txt"


def _series(
    results: Mapping[str, ConfigResult], topology: str, algorithm: str
) -> list[ConfigResult]:
    by_size = {
        r.params["size"]: r
        for r in results.values()
        if r.params.get("collective", ALLREDUCE) == ALLREDUCE
        and r.params["topology"] == topology
        and r.params["algorithm"] == algorithm
        and r.params["chips"] == GATED_CHIPS
        and "time_ns" in r.metrics
    }
    return [by_size[s] for s in SIZES if s in by_size]


def nccltests_text(rows: list[ConfigResult], topology: str, algorithm: str, topo: Topology) -> str:
    """One table: the rows' sizes and simulated times in nccl-tests' format."""
    ran = [size_label(r.params["size"]) for r in rows if measured(r)]
    comments = [
        f"Simulated by pytest-npubench's ccl bench: allreduce, algorithm {algorithm}, "
        f"{topology} interconnect, {GATED_CHIPS} chips, on topology {topo.fingerprint}.",
        "Both halves are one simulated run (the simulator does not tell in-place apart);",
        "#wrong comes from the replayed op log. Sizes simulated in this session: "
        + (", ".join(ran) if ran else "none")
        + "; the rest are the committed baseline's values.",
    ]
    table_rows = [
        simulated_row(
            ALLREDUCE,
            r.params["size"],
            r.metrics["time_ns"] / 1000,
            GATED_CHIPS,
            topo.bpe,
            r.metrics.get("wrong", 0.0),
        )
        for r in rows
    ]
    return format_table(ALLREDUCE, GATED_CHIPS, table_rows, comments=comments, device=topo.name)


def write_tables(results: Mapping[str, ConfigResult], outdir: Path, topo: Topology) -> list[Path]:
    """One nccl-tests table per (interconnect, algorithm) that has rows; the files written."""
    written = []
    for topology in TOPOLOGIES:
        for algorithm in algorithms_for(topology):
            rows = _series(results, topology, algorithm)
            if rows:
                path = outdir / table_name(topology, algorithm)
                write_atomic(path, nccltests_text(rows, topology, algorithm, topo))
                written.append(path)
    return written
