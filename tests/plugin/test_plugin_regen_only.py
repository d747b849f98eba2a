"""Regen-only configs: skipped in a normal run, their baseline values still feed the figures."""

from __future__ import annotations

import json

import pytest
from toyproject import Project


@pytest.mark.parametrize("xdist", [False, True], ids=["-n0", "-n2"])
def test_regen_only_config_is_skipped_and_its_baseline_feeds_figures(
    project: Project, xdist: bool
) -> None:
    """A normal run skips the heavy config with 'regen-only: reusing baseline' and hands its
    baseline values (source 'baseline') to the figures function with the sweep's own params."""
    project.bench(regen_only=True, figures=True)
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=1.005)  # the runnable configs move a little, within tolerance

    result = project.run("--npubench", "toy", "-rs", xdist=xdist)
    result.assert_outcomes(passed=3, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] benches/toy.py: regen-only: reusing baseline"])
    seen = json.loads(project.read("npubench-artifacts/toy/seen.json"))
    assert seen["32-slow"] == {
        "source": "baseline",
        "params": "{'size': 32, 'variant': 'slow'}",
        "latency": 64.0,
    }
    assert seen["16-fast"]["source"] == "run" and seen["16-fast"]["latency"] == 16.08
    config = project.results()["benches"]["toy"]["configs"]["32-slow"]
    assert (config["verdict"], config["source"]) == ("reused-baseline", "baseline")


def test_regen_only_config_without_baseline_says_how_to_create_it(project: Project) -> None:
    """With no entry to reuse, the skip reason gives the command that measures it."""
    project.bench(regen_only=True)
    result = project.run("--npubench", "toy", "-rs", "-k", "32-slow")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED * regen-only: no baseline entry to reuse; create it with: pytest --npubench"
            " toy --regen-baselines -k 'toy[[]32-slow[]]'"
        ]
    )


def test_regen_runs_regen_only_configs(project: Project) -> None:
    """Under --regen-baselines the regen-only config runs and its entry is rewritten."""
    project.bench(regen_only=True)
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=2.0)
    project.run("--npubench", "toy", "--regen-baselines", "-m", "regen").assert_outcomes(passed=1)
    assert project.baseline()["configs"]["32-slow"]["metrics"]["latency_ns"] == 128.0
    assert project.baseline()["configs"]["32-fast"]["metrics"]["latency_ns"] == 32.0


def test_reused_config_carries_no_measurement_properties(project: Project) -> None:
    """In --junitxml a reused (skipped) config has its result payload but no per-metric
    ``npubench.<metric>`` properties: those are this run's measurements, and it was not run."""
    import xml.etree.ElementTree as ET

    project.bench(regen_only=True)
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.run("--npubench", "toy", "--junitxml=junit.xml", xdist=True).assert_outcomes(
        passed=3, skipped=1
    )
    cases = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(project.path / "junit.xml").iter("testcase")
    }
    reused, measured = cases["toy[32-slow]"], cases["toy[32-fast]"]
    assert '"verdict": "reused-baseline"' in reused["npubench"]
    assert not [name for name in reused if name.startswith("npubench.")]
    assert measured["npubench.latency_ns"] == "32.0"


@pytest.mark.parametrize("xdist", [False, True], ids=["-n0", "-n2"])
def test_a_benchs_reused_configs_are_one_skipped_item(project: Project, xdist: bool) -> None:
    """Two reused configs of a bench travel as one skipped item (not one per config, each a
    round trip through xdist) that still hands every reused result to results.json and the
    figures; a selection that leaves one reused config keeps it as its own item."""
    from toyproject import TOY

    extra = '    regen_only=lambda p: p["variant"] == "slow",\n    figures=figures,'
    project.write("benches/toy.py", TOY.format(name="toy", extra=extra))
    project.run("--regen-baselines").assert_outcomes(passed=4)

    result = project.run("--npubench", "toy", "-rs", xdist=xdist)
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]1[]] benches/toy.py: regen-only: 2 configs reuse their baseline entries*"]
    )
    configs = project.results()["benches"]["toy"]["configs"]
    verdicts = {cid: (c["verdict"], c["source"]) for cid, c in configs.items()}
    assert verdicts == {
        "16-fast": ("pass", "run"),
        "16-slow": ("reused-baseline", "baseline"),
        "32-fast": ("pass", "run"),
        "32-slow": ("reused-baseline", "baseline"),
    }
    seen = json.loads(project.read("npubench-artifacts/toy/seen.json"))
    assert seen["16-slow"]["source"] == seen["32-slow"]["source"] == "baseline"
    assert (seen["16-slow"]["latency"], seen["32-slow"]["latency"]) == (32.0, 64.0)

    one = project.run("--npubench", "toy", "-rs", "-k", "16", xdist=xdist)
    one.assert_outcomes(passed=1, skipped=1)
    one.stdout.fnmatch_lines(["SKIPPED [[]1[]] benches/toy.py: regen-only: reusing baseline"])
    assert sorted(project.results()["benches"]["toy"]["configs"]) == ["16-fast", "16-slow"]
