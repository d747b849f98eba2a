"""The ccl bench: its sweep, its checks, and that it gates and draws for real."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from bench_project import copy_bench

import benches._ccl_figures as ccl_figures
import benches.ccl as ccl
from sim.collectives import ALGORITHMS, Message, build_schedule, run_schedule
from sim.fabric import build_network

ROOT = Path(__file__).resolve().parents[2]
#: one size of every gated allreduce (topology, algorithm): 17 configs, quick (the other
#: collectives' ids name them; none of allreduce's ids holds these words)
PICK = "p8 and 256KiB and not (gather or reduce or alltoall or broadcast or sendrecv)"
EXACT = ["link_bytes_max", "link_bytes_total", "links_used", "transfers", "records"]

SLOWER_LINKS = """
import sim.fabric as link

_link_ps, _hbm_ps, _reduce_ps = link.Network.link_ps, link.Network.hbm_ps, link.Network.reduce_ps


def _slower_link(self, nbytes):
    return _link_ps(self, nbytes) + 100_000  # a regression: 100 ns more per transfer per link


def _slower_hbm(self, nbytes):
    return _hbm_ps(self, nbytes) * 101 // 100  # and HBM and the reduce engine 1 % slower


def _slower_reduce(self, nbytes):
    return _reduce_ps(self, nbytes) * 101 // 100


link.Network.link_ps = _slower_link
link.Network.hbm_ps = _slower_hbm
link.Network.reduce_ps = _slower_reduce
"""


@pytest.fixture
def bench_dir(pytester: pytest.Pytester) -> pytest.Pytester:
    copy_bench(pytester.path, "ccl")
    return pytester


def _allreduce_configs() -> list[Any]:
    """The one-level allreduce sweep (the two-level system's group aside:
    tests/benches/test_bench_ccl_two_level.py)."""
    return [
        c
        for c in ccl.BENCH.configs
        if "collective" not in c.params and c.params["topology"] != "two_level"
    ]


def test_sweep_gates_every_chip_count_and_leaves_the_heavy_sweep_to_regen() -> None:
    """Allreduce, gated: every algorithm valid on each of the 4 topologies (torus2d only on
    the torus) at 8 chips (3 sizes), 4, 16, 6 and 9 chips (one size each), plus the path
    configs of benches/_ccl_paths.py; regen-only: the rest of 4, 6, 8, 9, 12, 16 chips x 10
    sizes."""
    from benches._ccl_paths import path_gated

    configs = _allreduce_configs()
    paths = [c for c in configs if path_gated(c.params)]
    gated = [c for c in configs if not c.regen_only and not path_gated(c.params)]
    per_size = 4 * 4 + 1  # (topology, algorithm) pairs
    assert len(gated) == per_size * (3 + 1 + 1 + 1 + 1)
    assert {c.params["chips"] for c in gated} == {4, 6, 8, 9, 16}
    # issue 26's path configs, gated beside them: 5 algorithms on the 3 x 4 torus, 2 more
    assert len(paths) == 5 + 2 and all(not c.regen_only for c in paths)
    assert len(configs) == per_size * 10 * 6
    assert all(
        c.params["topology"] == "torus2d" for c in configs if c.params["algorithm"] == "torus2d"
    )
    assert ccl.BENCH.config("switch-p8-halving_doubling-256MiB").params["size"] == 256 * 2**20


def test_counters_are_gated_exactly_and_time_at_its_tolerance() -> None:
    """Byte and record counters are gated at tolerance 0; the time at 0.1 %."""
    for name in [*EXACT, "hbm_bytes_max"]:
        metric = ccl.METRICS[name]
        assert metric.gate and metric.tolerance == 0.0, name
    assert ccl.METRICS["time_ns"].gate and ccl.METRICS["time_ns"].tolerance == 0.001


def test_sizes_are_labelled_in_powers_of_1024() -> None:
    """Labels read as nccl-tests sweeps: 1 KiB .. 256 MiB by x4."""
    assert [ccl.size_label(s) for s in ccl.SIZES] == [
        "1 KiB", "4 KiB", "16 KiB", "64 KiB", "256 KiB", "1 MiB", "4 MiB", "16 MiB", "64 MiB",
        "256 MiB",
    ]  # fmt: skip


def test_run_reports_nccl_style_numbers() -> None:
    """algbw = bytes / time and busbw = algbw * 2(p-1)/p (GB = 1e9 B); the model sits beside
    the simulated time; the functional check and the bounds pass."""
    params = {"topology": "torus2d", "chips": 8, "algorithm": "torus2d", "size": 4 * 2**20}
    result = ccl.run(params)
    m = result.metrics
    assert result.ok, result.message
    assert m["algbw_gbs"] == pytest.approx(params["size"] / m["time_ns"])
    assert m["busbw_gbs"] == pytest.approx(m["algbw_gbs"] * 2 * 7 / 8)
    assert m["sim_model_ratio"] == pytest.approx(m["time_ns"] / m["model_time_ns"])
    assert m["wrong"] == 0
    assert m["time_ns"] >= m["bound_ns"]


def test_run_fails_a_config_whose_result_is_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    """A schedule that double-counts one chip's input fails the item with nccl's #wrong and
    says what is wrong."""

    def broken(topo: Any, nbytes: int, algorithm: str) -> Any:
        sched = build_schedule(topo, nbytes, algorithm)
        extra = Message(0, 1, 0, sched.count, True, True)
        steps = (*sched.steps[:-1], (*sched.steps[-1], extra))
        return run_schedule(dataclasses.replace(sched, steps=steps), build_network(topo))

    monkeypatch.setattr(ccl, "allreduce", broken)
    result = ccl.run(
        {"topology": "fully_connected", "chips": 8, "algorithm": "direct", "size": 4096}
    )
    assert not result.ok
    assert "#wrong = 2048 of 16384 elements" in result.message
    assert "chip 1" in result.message and "counts an input twice" in result.message


def test_run_fails_a_skipped_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted bug: the schedule loses its last step; the item fails, naming a chip and the
    inputs it lacks."""

    def skipping(topo: Any, nbytes: int, algorithm: str) -> Any:
        sched = build_schedule(topo, nbytes, algorithm)
        return run_schedule(dataclasses.replace(sched, steps=sched.steps[:-1]), build_network(topo))

    monkeypatch.setattr(ccl, "allreduce", skipping)
    result = ccl.run({"topology": "ring", "chips": 8, "algorithm": "ring", "size": 64 * 1024})
    assert not result.ok
    assert "#wrong" in result.message and "lacks the inputs of chips" in result.message


def test_run_fails_data_that_skips_a_link(routes_a_hop_short: None) -> None:
    """Planted bug: ring routes stop one hop short; the item fails and says the data of a
    transfer skipped a link."""
    result = ccl.run(
        {"topology": "ring", "chips": 8, "algorithm": "halving_doubling", "size": 4096}
    )
    assert not result.ok
    assert "skipped a link" in result.message


def test_committed_baselines_cover_every_config_and_the_gated_run_passes(
    bench_dir: pytest.Pytester,
) -> None:
    """baselines/ccl.json has every config of the sweep, on the topology's fingerprint; a
    gated run passes, prints nccl-tests' columns and writes the four figures."""
    committed = json.loads((ROOT / "baselines" / "ccl.json").read_text())
    assert committed["fingerprint"] == ccl.TOPOLOGY.fingerprint
    assert sorted(committed["configs"]) == sorted(c.config_id for c in ccl.BENCH.configs)
    result = bench_dir.runpytest_subprocess(
        "--npubench",
        "ccl",
        "-k",
        PICK,
        "-p",
        "no:cacheprovider",
        "-v",  # -v: every row
    )
    result.assert_outcomes(passed=17)
    header = next(line for line in result.outlines if "verdict" in line and "config" in line)
    columns = ["time", "algbw", "busbw", "wrong"]  # headers carry no unit the cells do not use
    assert [header.index(c) for c in columns] == sorted(header.index(c) for c in columns)
    figures = bench_dir.path / "npubench-artifacts" / "ccl"
    for name in ("busbw_vs_size", "time_vs_size", "best_algorithm", "sim_vs_model"):
        assert (figures / f"{name}.png").stat().st_size > 10_000, name


def test_slower_links_fail_the_gate_with_the_time_row(bench_dir: pytest.Pytester) -> None:
    """A slower fabric (100 ns more per transfer per link, HBM and reduce engine 1 % slower)
    makes every picked config slower than its baseline beyond the 0.1 % tolerance, whether
    it is link-, HBM- or reduce-bound: each fails with the time_ns row of the table."""
    bench_dir.makeconftest(SLOWER_LINKS)
    result = bench_dir.runpytest_subprocess(
        "--npubench", "ccl", "-k", PICK, "-p", "no:cacheprovider", "-v"
    )
    result.assert_outcomes(failed=17)
    result.stdout.fnmatch_lines(["*regression*time_ns +*"])  # the headline line per config
    result.stdout.fnmatch_lines(["*metric*baseline*current*", "*time_ns*regression*"])  # -v


def test_config_inputs_are_params_not_metrics() -> None:
    """The message size is the sweep's ``size`` param; neither it nor the element count (an
    input too) is a metric with a direction, in the bench or its committed baseline."""
    assert "size_bytes" not in ccl.METRICS and "count" not in ccl.METRICS
    result = ccl.run({"topology": "ring", "chips": 4, "algorithm": "ring", "size": 4096})
    assert "size_bytes" not in result.metrics and "count" not in result.metrics
    configs = json.loads((ROOT / "baselines" / "ccl.json").read_text())["configs"]
    entry = configs["ring-p4-ring-4KiB"]
    assert entry["params"]["size"] == 4096
    assert not {"size_bytes", "count"} & set(entry["metrics"])


def _fake(params: dict[str, Any], source: str = "run", **metrics: float) -> Any:
    from pytest_npubench import ConfigResult

    return ConfigResult("ccl", ccl.config_id(params), params, dict(metrics), None, "pass", source)  # type: ignore[arg-type]


def _cell_grid(times: dict[str, float], source: str = "run") -> ccl_figures.Grid:
    results = {}
    for algorithm, time_ns in times.items():
        params = {"topology": "switch", "chips": 8, "algorithm": algorithm, "size": 1024}
        results[ccl.config_id(params)] = _fake(params, source, time_ns=time_ns)
    return ccl.figure_grid(results)


def _baseline_grid(source: Any = "baseline") -> ccl_figures.Grid:
    """The committed baseline as the figures see it (``source(params)`` per config)."""
    configs = json.loads((ROOT / "baselines" / "ccl.json").read_text())["configs"]
    results = {
        cid: _fake(e["params"], source(e["params"]) if callable(source) else source, **e["metrics"])
        for cid, e in configs.items()
    }
    return ccl.figure_grid(results)


def test_best_algorithm_shows_a_tie_as_a_tie_and_the_winning_margin() -> None:
    """Within TIE of the fastest is a tie (both named); the margin is how much slower the next
    algorithm is; a cell is 'measured' only if all its configs ran in this run."""
    tie = ccl_figures.fastest(
        _cell_grid({"ring": 1000.0, "halving_doubling": 1000.5, "direct": 1500.0}),
        "switch",
        8,
        1024,
    )
    assert tie is not None
    assert tie["winners"] == ["ring", "halving_doubling"]
    assert tie["margin"] == pytest.approx(0.5)
    assert tie["measured"] is True
    clear = ccl_figures.fastest(
        _cell_grid({"ring": 1000.0, "halving_doubling": 1100.0}, "baseline"), "switch", 8, 1024
    )
    assert clear is not None
    assert clear["winners"] == ["ring"] and clear["margin"] == pytest.approx(0.1)
    assert clear["measured"] is False


def test_busbw_bound_is_each_algorithms_own_per_topology() -> None:
    """The dashed line of busbw_vs_size is each algorithm's own bound at the largest size drawn
    (from algo_bound_busbw_gbs), not one link peak shared by all."""
    configs = json.loads((ROOT / "baselines" / "ccl.json").read_text())["configs"]
    bounds = ccl_figures.busbw_bounds(_baseline_grid(), "ring")
    largest = max(ccl.SIZES)
    for algorithm, bound in bounds.items():
        entry = configs[
            ccl.config_id(
                {
                    "topology": "ring",
                    "chips": ccl.GATED_CHIPS,
                    "algorithm": algorithm,
                    "size": largest,
                }
            )
        ]
        assert bound == entry["metrics"]["algo_bound_busbw_gbs"]
    assert len(set(bounds.values())) > 1  # they differ: the line is per algorithm


def test_size_figures_count_only_the_configs_they_plot() -> None:
    """busbw_vs_size and time_vs_size draw the 8-chip configs only; their subtitle counts
    those (170), not the whole sweep (1020)."""
    grid = _baseline_grid(lambda p: "run" if ccl.gated(p) else "baseline")
    plotted = ccl_figures._at_chips(grid, ccl.GATED_CHIPS)
    per_size = sum(len(ccl.algorithms_for(t)) for t in ccl.TOPOLOGIES)
    assert len(plotted) == per_size * len(ccl.SIZES) < len(grid)
    measured = per_size * len(ccl.GATED_SIZES[ccl.GATED_CHIPS])
    assert ccl_figures._note(plotted, " plotted").startswith(
        f"{len(plotted)} configs plotted on {ccl.TOPOLOGY.fingerprint}: {measured} measured"
    )


def test_the_figure_grid_keeps_every_config_of_the_sweep_apart() -> None:
    """Every config of the sweep has its own cell in the figures' grid (the bench's own
    builder, not a copy of it): no two configs are drawn on one point."""
    results = {c.config_id: _fake(dict(c.params), time_ns=1.0) for c in ccl.BENCH.configs}
    grid = ccl.figure_grid(results)
    assert len(grid) == len(ccl.BENCH.configs)
    assert {r.config_id for r in grid.values()} == set(results)


def test_the_figure_grid_key_tells_the_collective_apart() -> None:
    """A config of another collective (a sweep group with a ``collective`` axis) at the same
    topology, chips, algorithm and size is a cell of its own, not a silent overwrite; two
    configs that do fall in one cell are an error naming both."""
    from pytest_npubench import ConfigResult

    params = dict(ccl.BENCH.configs[0].params)
    allreduce = _fake(params, time_ns=1.0)
    other = {**params, "collective": "all_gather"}
    gather = ConfigResult("ccl", "ag", other, {"time_ns": 2.0}, None, "pass", "run")
    grid = ccl.figure_grid({allreduce.config_id: allreduce, "ag": gather})
    assert sorted(r.config_id for r in grid.values()) == sorted([allreduce.config_id, "ag"])
    twin = ConfigResult("ccl", "twin", dict(params), {"time_ns": 3.0}, None, "pass", "run")
    with pytest.raises(ValueError, match=f"'{allreduce.config_id}' and 'twin' fall in one"):
        ccl.figure_grid({allreduce.config_id: allreduce, "twin": twin})


def test_the_sweep_is_the_old_cartesian_product_in_the_same_order() -> None:
    """The union of per-topology sweeps lists exactly the configs of the old definition (the
    product of topology, chips, algorithm and size without the algorithms a topology cannot
    run) in the same order, with the same gated set: the baselines are keyed by these ids."""
    old = [
        dict(zip(("topology", "chips", "algorithm", "size"), point, strict=True))
        for point in itertools.product(ccl.TOPOLOGIES, ccl.CHIPS, ALGORITHMS, ccl.SIZES)
        if point[2] in ccl.algorithms_for(point[0])
    ]
    from benches._ccl_paths import path_gated

    first = ccl.BENCH.configs[: len(old)]  # the other collectives' groups come after
    assert [(c.config_id, c.params, c.regen_only) for c in first] == [
        (ccl.config_id(p), p, not (ccl.gated(p) or path_gated(p))) for p in old
    ]  # the gated set: the old rule and issue 26's path configs
    assert list(first) == _allreduce_configs()
