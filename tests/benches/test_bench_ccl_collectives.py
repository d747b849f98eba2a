"""The ccl bench's other collectives: their sweep axis, ids, checks, numbers and figures."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import benches._ccl_collective_figures as more_figures
import benches.ccl as ccl
from pytest_npubench import ConfigResult
from sim.collectives import COLLECTIVE_ALGORITHMS, build_schedule, run_schedule
from sim.fabric import build_network

ROOT = Path(__file__).resolve().parents[2]


def _more() -> list[Any]:
    """The other collectives' one-level configs (the alpha-beta check's two-chip group and the
    two-level system aside)."""
    return [
        c
        for c in ccl.BENCH.configs
        if "collective" in c.params
        and c.params["chips"] > 2
        and c.params["topology"] != "two_level"
    ]


def test_the_alpha_beta_two_chip_group_is_gated_and_covered() -> None:
    """16 gated two-chip configs, each a case the closed-form check times (issue 26)."""
    from benches._alpha_beta import alpha_beta

    two = [c for c in ccl.BENCH.configs if c.params["chips"] == 2]
    assert len(two) == 16 and not any(c.regen_only for c in two)
    for c in two:
        p = c.params
        topo = ccl.topology_for(p)
        assert alpha_beta(topo, p["collective"], p["algorithm"], p["size"]) is not None, c


def test_collective_is_an_axis_with_nccl_tests_ids() -> None:
    """Every other collective x algorithm x topology is a config at 8 chips and every size,
    and at 4, 6, 9 and 16 chips and every other size, named
    ``<collective>-<topology>-p<chips>-<algorithm>-<size>``; allreduce ids have no collective."""
    more = _more()
    per_size = 4 * sum(len(COLLECTIVE_ALGORITHMS[c]) for c in ccl.MORE_COLLECTIVES)
    assert len(more) == per_size * (len(ccl.SIZES) + 4 * len(ccl.SIZES) // 2)
    assert {c.params["chips"] for c in more} == {4, 6, 8, 9, 16}
    assert {c.params["size"] for c in more if c.params["chips"] == 16} == {
        1024 * 16**i for i in range(5)
    }
    assert ccl.BENCH.config("all_gather-ring-p8-ring-16MiB").params == {
        "collective": "all_gather",
        "topology": "ring",
        "chips": 8,
        "algorithm": "ring",
        "size": 16 * 2**20,
    }
    assert ccl.config_id({"topology": "ring", "chips": 8, "algorithm": "ring", "size": 1024}) == (
        "ring-p8-ring-1KiB"
    )
    from benches._ccl_paths import path_gated

    gated = [c for c in more if not c.regen_only and not path_gated(c.params)]
    assert len(gated) == per_size * 3
    # issue 26's path configs: the 2 x 2 torus, every collective x algorithm beside allreduce
    paths = [c for c in more if path_gated(c.params)]
    assert len(paths) == 15 and {c.params["chips"] for c in paths} == {4}
    assert {c.params["chips"] for c in gated} == {6, 8, 9}


@pytest.mark.parametrize(
    ("collective", "factor"),
    [
        ("all_gather", 5 / 6),
        ("reduce_scatter", 5 / 6),
        ("alltoall", 5 / 6),
        ("broadcast", 1.0),
        ("reduce", 1.0),
        ("sendrecv", 1.0),
    ],
)
def test_run_reports_nccl_tests_numbers_per_collective(collective: str, factor: float) -> None:
    """busbw = algbw x nccl-tests' factor of the collective; algbw = bytes / time with
    alltoall's bytes rounded down to whole blocks (1 KiB on 6 chips moves 1020 B); the
    check and the bounds pass, and the model sits beside the time."""
    algorithm = COLLECTIVE_ALGORITHMS[collective][0]
    params = {
        "collective": collective,
        "topology": "switch",
        "chips": 6,
        "algorithm": algorithm,
        "size": 1024,
    }
    result = ccl.run(params)
    m = result.metrics
    assert result.ok, result.message
    moved = 1020 if collective == "alltoall" else 1024
    assert m["algbw_gbs"] == pytest.approx(moved / m["time_ns"])
    assert m["busbw_gbs"] == pytest.approx(m["algbw_gbs"] * factor)
    assert m["wrong"] == 0 and m["time_ns"] >= m["bound_ns"] > 0
    assert m["sim_model_ratio"] == pytest.approx(m["time_ns"] / m["model_time_ns"])


def test_run_fails_a_collective_whose_data_went_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted bug: an alltoall block never leaves; the item fails with nccl's #wrong and
    names the collective and the chip."""

    def broken(topo: Any, nbytes: int, algorithm: str, collective: str) -> Any:
        sched = build_schedule(topo, nbytes, algorithm, collective)
        steps = (sched.steps[0][1:], *sched.steps[1:])
        return run_schedule(dataclasses.replace(sched, steps=steps), build_network(topo))

    monkeypatch.setattr(ccl, "run_collective", broken)
    params = {"collective": "alltoall", "topology": "ring", "chips": 8, "algorithm": "direct"}
    result = ccl.run({**params, "size": 64 * 1024})
    assert not result.ok
    assert "#wrong = 4096 of 262144 elements differ from what alltoall defines" in result.message
    assert "chip 1" in result.message


def _baseline_grid() -> Any:
    configs = json.loads((ROOT / "baselines" / "ccl.json").read_text())["configs"]
    results = {
        cid: ConfigResult("ccl", cid, e["params"], e["metrics"], None, "pass", "baseline")
        for cid, e in configs.items()
    }
    return ccl.figure_grid(results)


def test_each_collective_has_its_busbw_figure(tmp_path: Path) -> None:
    """From the committed baseline: one figure per other collective, every algorithm x
    topology at 8 chips drawn over every size."""
    grid = _baseline_grid()
    drawn = more_figures.at_gated_chips(grid)
    for collective in ccl.MORE_COLLECTIVES:
        for topology in ccl.TOPOLOGIES:
            for algorithm in COLLECTIVE_ALGORITHMS[collective]:
                sizes, _rows = more_figures.series(drawn, collective, topology, algorithm)
                assert sizes == ccl.SIZES, (collective, topology, algorithm)
    import matplotlib

    matplotlib.use("Agg")
    paths = more_figures.collective_figures(grid, tmp_path, ccl.TOPOLOGY.fingerprint)
    assert [p.name for p in paths] == [f"busbw_{c}.png" for c in ccl.MORE_COLLECTIVES]
    assert all(p.stat().st_size > 10_000 for p in paths)
    assert set(ccl.CAPTIONS) >= {p.name for p in paths}
