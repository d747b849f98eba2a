"""The ccl bench writes each 8-chip sweep as an nccl-tests table beside its figures, from the
values the session has (this run's and the baseline's), and the tables read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bench_project import copy_bench

import benches._ccl_nccltests as nccltests
import benches.ccl as ccl
from pytest_npubench import ConfigResult
from sim.calibrate import read_table

ROOT = Path(__file__).resolve().parents[2]


def _baseline_results(ran: Any = lambda p: False) -> dict[str, ConfigResult]:
    configs = json.loads((ROOT / "baselines" / "ccl.json").read_text())["configs"]
    return {
        cid: ConfigResult(
            "ccl",
            cid,
            e["params"],
            e["metrics"],
            None,
            "pass",
            "run" if ran(e["params"]) else "baseline",
        )
        for cid, e in configs.items()
    }


def test_one_table_per_interconnect_and_algorithm_with_the_baseline_times(tmp_path: Path) -> None:
    """17 files (every algorithm of each interconnect at 8 chips); each has the 10 sizes, the
    baseline's time in us within the printed precision, busbw as nccl-tests computes it, 8
    ranks and allreduce in its header; the comment says which sizes ran in this session."""
    results = _baseline_results(ccl.gated)
    written = nccltests.write_tables(results, tmp_path, ccl.TOPOLOGY)
    pairs = [(t, a) for t in ccl.TOPOLOGIES for a in ccl.algorithms_for(t)]
    assert [p.name for p in written] == [nccltests.table_name(t, a) for t, a in pairs]
    assert len(written) == 17
    for (topology, algorithm), path in zip(pairs, written, strict=True):
        table = read_table(path)
        assert (table.collective, table.ranks) == ("allreduce", 8)
        assert [r.size for r in table.rows] == ccl.SIZES
        for row in table.rows:
            params = {"topology": topology, "chips": 8, "algorithm": algorithm, "size": row.size}
            want = results[ccl.config_id(params)].metrics
            got = row.out_of_place
            assert got is not None and got.wrong == want["wrong"] == 0
            precision = 0.005 if got.time_us < 100 else 0.05 if got.time_us < 1e4 else 0.5
            assert abs(got.time_us - want["time_ns"] / 1000) <= precision
            assert abs(got.busbw_gbs - want["busbw_gbs"]) <= 0.005 + 1e-9
        assert "Sizes simulated in this session: 4 KiB, 256 KiB, 16 MiB;" in path.read_text()


def test_a_gated_run_writes_the_tables_beside_the_figures(pytester: pytest.Pytester) -> None:
    """A gated run of the ring sweep at 8 chips (3 sizes) writes its table with all 10 sizes
    (the 7 regen-only ones from the committed baseline: nothing else is simulated), and only
    the tables of selected configs; they read back."""
    copy_bench(pytester.path, "ccl")
    result = pytester.runpytest_subprocess(
        "--npubench", "ccl", "-k", "ring-p8-ring-", "-p", "no:cacheprovider"
    )
    assert result.ret == 0
    folder = pytester.path / "npubench-artifacts" / "ccl"
    tables = sorted(folder.glob("nccltests-*.txt"))
    assert [t.name for t in tables] == ["nccltests-ring-ring-p8.txt"]
    assert [r.size for r in read_table(tables[0]).rows] == ccl.SIZES
    assert "Sizes simulated in this session: 4 KiB, 256 KiB, 16 MiB;" in tables[0].read_text()
    assert not list(folder.glob(".*.tmp"))
