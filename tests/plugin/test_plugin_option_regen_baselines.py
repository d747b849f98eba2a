"""--regen-baselines: the file format, merge semantics, what it prints, and -n 0 == -n 2."""

from __future__ import annotations

import json

import pytest
from toyproject import Project, output, same_run


def test_baseline_file_is_made_for_review_in_a_diff(project: Project) -> None:
    """Sorted keys, schema version, fingerprint, meta, one entry per config id, floats as their
    shortest repr, params JSON-friendly, no timestamps, one trailing newline."""
    project.bench()
    project.knobs(util=0.1 + 0.2, fingerprint="npu-1h:6b049124bca8")
    project.run("--regen-baselines").assert_outcomes(passed=4)
    text = project.read("baselines/toy.json")
    data = json.loads(text)
    assert text == json.dumps(data, indent=2, sort_keys=True) + "\n"
    assert data["schema"] == 1
    assert data["bench"] == "toy"
    assert data["fingerprint"] == "npu-1h:6b049124bca8"
    assert data["configs"]["16-slow"] == {
        "metrics": {"latency_ns": 32.0, "throughput": 10.0, "util": 0.30000000000000004},
        "params": {"size": 16, "variant": "slow"},
    }
    assert '"util": 0.30000000000000004' in text
    assert "time" not in text and "date" not in text


@pytest.mark.parametrize("xdist", [False, True], ids=["-n0", "-n2"])
def test_tuple_params_and_bench_meta_are_stored(project: Project, xdist: bool) -> None:
    """Tuple parameters are stored as lists; the figures function still gets them as tuples
    (also when the results came from xdist workers); meta() lands once in the file header."""
    project.write(
        "benches/shapes.py",
        """\
        from pytest_npubench import Bench, Metric, Result

        BENCH = Bench(
            name="shapes",
            sweep={"shape": [(16, 32, 16), (32, 64, 32)]},
            config_id=lambda p: "x".join(map(str, p["shape"])),
            run=lambda p: Result(metrics={"macs": float(p["shape"][0] * p["shape"][1])}),
            metrics={"macs": Metric(unit="1", direction="higher")},
            fingerprint=lambda: "hw",
            meta=lambda: {"tile": (32, 64, 32)},
            figures=lambda results, outdir: [
                outdir.joinpath("params.txt").write_text(
                    repr([r.params for r in results.values()])
                )
                and outdir / "params.txt"
            ],
        )
        """,
    )
    project.run("--regen-baselines", xdist=xdist).assert_outcomes(passed=2)
    assert project.read("npubench-artifacts/shapes/params.txt") == (
        "[{'shape': (16, 32, 16)}, {'shape': (32, 64, 32)}]"
    )
    data = project.baseline("shapes")
    assert data["meta"] == {"tile": [32, 64, 32]}
    assert data["configs"]["32x64x32"]["params"] == {"shape": [32, 64, 32]}


def test_regen_alone_means_every_bench_and_runs_regen_only_configs(project: Project) -> None:
    """pytest --regen-baselines (no --npubench) rewrites every bench, regen-only configs too."""
    project.bench("toy", regen_only=True)
    project.bench("other")
    result = project.run("--regen-baselines")
    result.assert_outcomes(passed=8)
    assert "32-slow" in project.baseline("toy")["configs"]
    assert len(project.baseline("other")["configs"]) == 4


def test_merge_reports_added_changed_unchanged_and_stale(project: Project) -> None:
    """A regen keeps entries it did not run, lists stale ones (config gone), and prints what
    it added, changed (with deltas) and left unchanged."""
    project.bench()
    project.run("--regen-baselines", "-k", "fast").assert_outcomes(passed=2)
    data = project.baseline()
    data["configs"]["64-gone"] = {"metrics": {"latency_ns": 1.0}, "params": {}}
    project.write("baselines/toy.json", json.dumps(data))
    project.knobs(throughput=12.5)

    result = project.run("--regen-baselines", "-k", "16", "-v")
    result.stdout.fnmatch_lines(
        [
            "wrote baselines/toy.json: 1 added, 1 changed, 0 unchanged",
            "  added: 16-slow",
            "  changed    16-fast: throughput 10 GB/s -> 12.5 GB/s (+25.00 %)",
            "  kept (not run): 32-fast",
            "  stale (no such config; kept, --npubench-prune drops): 64-gone",
        ]
    )
    assert sorted(project.baseline()["configs"]) == ["16-fast", "16-slow", "32-fast", "64-gone"]

    again = project.run("--regen-baselines", "-k", "16")
    again.stdout.fnmatch_lines(["baselines/toy.json: unchanged: 0 added, 0 changed, 2 unchanged"])


def test_failed_check_is_not_written(project: Project) -> None:
    """A config whose functional check fails fails its item and keeps its old entry."""
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(ok=False, message="C != A @ B at (0, 3)", scale=2.0)
    result = project.run("--regen-baselines")
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(
        ["toy[16-fast]: functional check failed: C != A @ B at (0, 3)", "*not updated (failed)*"]
    )
    assert project.baseline()["configs"]["16-fast"]["metrics"]["latency_ns"] == 16.0


def test_baselines_and_artifacts_are_byte_identical_under_n0_and_n2(
    project: Project, pytester: pytest.Pytester
) -> None:
    """The controller alone writes; -n 0 and -n 2 produce the same baseline, results.json,
    summary.md and PNG bytes (all but results.json's run.invocation line: ADR 0030), and
    leave no temp files."""
    project.bench(regen_only=True, figures=True)
    files = [
        "baselines/toy.json",
        "npubench-artifacts/results.json",
        "npubench-artifacts/summary.md",
        "npubench-artifacts/toy/latency.png",
    ]
    project.run("--regen-baselines").assert_outcomes(passed=4)
    serial = {f: same_run(f, (project.path / f).read_bytes()) for f in files}
    for f in files:
        (project.path / f).unlink()

    parallel = project.run("--regen-baselines", xdist=True)
    parallel.assert_outcomes(passed=4)
    assert {f: same_run(f, (project.path / f).read_bytes()) for f in files} == serial
    assert not list((project.path / "baselines").glob(".*.tmp")), output(parallel)


def test_changed_lines_put_gated_metrics_first_and_hide_the_rest_behind_v(
    project: Project,
) -> None:
    """A regen's changed line shows the gated metrics as old -> new (change); ungated ones that
    moved are a count unless -v."""
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=2.0, util=0.25)
    result = project.run("--regen-baselines", "-k", "16-fast")
    result.stdout.fnmatch_lines(
        [
            "  changed    16-fast: latency_ns 16 ns -> 32 ns (+100.00 %) "
            "(+1 ungated metric, -v lists them)"
        ]
    )
    project.knobs(scale=3.0, util=0.125)
    verbose = project.run("--regen-baselines", "-k", "16-fast", "-v")
    verbose.stdout.fnmatch_lines(
        [
            "  changed    16-fast: latency_ns 32 ns -> 48 ns (+50.00 %), "
            "util 0.25 -> 0.125 (-50.00 %)"
        ]
    )
