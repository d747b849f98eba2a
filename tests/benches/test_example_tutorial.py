"""docs/writing-a-bench.md, run as a user would: the example bench's whole life cycle.

The tutorial's commands run through pytester on a copy of examples/elementwise, so the
tutorial cannot rot: if a step in the text stops working, this test fails.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "elementwise"
TUTORIAL = ROOT / "docs" / "writing-a-bench.md"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True)
    for leftover in ("baselines", "npubench-artifacts"):
        shutil.rmtree(pytester.path / leftover, ignore_errors=True)
    return pytester


def test_tutorial_commands_are_the_ones_tested() -> None:
    """Every pytest command line in the tutorial is one this test runs."""
    commands = set(re.findall(r"^\$ (pytest [^\n]+)$", TUTORIAL.read_text(), re.M))
    assert commands == {
        "pytest --npubench elementwise",
        "pytest --npubench elementwise --regen-baselines",
    }


def test_tutorial_life_cycle(project: pytest.Pytester) -> None:
    """New bench -> fails asking for a baseline -> regen creates it -> passes ->
    a slower kernel fails with the table -> regen accepts it -> passes."""
    run = ("--npubench", "elementwise", "-p", "no:cacheprovider")
    first = project.runpytest_subprocess(*run)
    first.assert_outcomes(failed=2)
    first.stdout.fnmatch_lines(["*has no entry for this config; create it with:*"])

    project.runpytest_subprocess(*run, "--regen-baselines").assert_outcomes(passed=2)
    baseline = json.loads((project.path / "baselines" / "elementwise.json").read_text())
    assert sorted(baseline["configs"]) == ["1048576el", "65536el"]
    project.runpytest_subprocess(*run).assert_outcomes(passed=2)

    bench = project.path / "benches" / "elementwise.py"
    bench.write_text(bench.read_text().replace("BUFFERS = 2", "BUFFERS = 1"))
    slower = project.runpytest_subprocess(*run)
    slower.assert_outcomes(failed=2)
    slower.stdout.fnmatch_lines(["*latency_ns*regression*"])

    project.runpytest_subprocess(*run, "--regen-baselines").assert_outcomes(passed=2)
    project.runpytest_subprocess(*run).assert_outcomes(passed=2)
