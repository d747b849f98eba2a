"""The whole regression cycle, as pytest-regressions' check_regression_fixture_workflow does it."""

from __future__ import annotations

import pytest
from toyproject import Project, assert_no_plugin_traceback, output

BREAK_THE_WRITE = """\
import os

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session):
    real_replace = os.replace

    def interrupted(src, dst):
        {action}

    os.replace = interrupted
    try:
        return (yield)
    finally:
        os.replace = real_replace
"""


@pytest.mark.parametrize("xdist", [False, True], ids=["-n0", "-n2"])
def test_first_run_regen_pass_change_fail_regen_pass(project: Project, xdist: bool) -> None:
    """No baseline -> fails with the command; regen -> passes; worse -> fails with the table;
    -k regen -> rewrites that entry only; full regen -> passes again."""
    project.bench()

    first = project.run("--npubench", "toy", xdist=xdist)
    first.assert_outcomes(failed=4)
    first.stdout.fnmatch_lines(
        [
            "toy[16-fast]: baselines/toy.json has no entry for this config; create it with:",
            "  pytest --npubench toy --regen-baselines -k 'toy[[]16-fast[]]'",
        ]
    )

    regen = project.run("--npubench", "toy", "--regen-baselines", xdist=xdist)
    regen.assert_outcomes(passed=4)
    regen.stdout.fnmatch_lines(["wrote baselines/toy.json: 4 added, 0 changed, 0 unchanged"])
    assert sorted(project.baseline()["configs"]) == ["16-fast", "16-slow", "32-fast", "32-slow"]

    project.run("--npubench", "toy", xdist=xdist).assert_outcomes(passed=4)

    project.knobs(scale=1.5)
    worse = project.run("--npubench", "toy", xdist=xdist)
    worse.assert_outcomes(failed=4)
    worse.stdout.fnmatch_lines(  # 4 failed on metrics: one line each (tables under -v)
        [
            "toy: 4 run: 0 passed, 4 failed (4 regressions)",
            "  regression  16-fast: latency_ns +50.00 % (16 ns -> 24 ns)",
            "if every change is intended: pytest --npubench toy --regen-baselines*",
        ]
    )
    table = project.run("--npubench", "toy", "-v", xdist=xdist)
    table.assert_outcomes(failed=4)
    table.stdout.fnmatch_lines(
        [
            "toy[[]16-fast[]]: 1 gated metric(s) got worse beyond tolerance*",
            "  metric      baseline  current  change    tolerance  verdict",
            "  latency_ns  16 ns     24 ns    +50.00 %  1 %        regression",
            "if the change is intended, accept it with: "
            "pytest --npubench toy --regen-baselines -k 'toy[[]16-fast[]]'",
        ]
    )

    one = project.run("--npubench", "toy", "--regen-baselines", "-k", "toy[16-fast]", xdist=xdist)
    one.assert_outcomes(passed=1)
    one.stdout.fnmatch_lines(
        [
            "wrote baselines/toy.json: 0 added, 1 changed, 0 unchanged",
            "  changed    16-fast: latency_ns 16 ns -> 24 ns (+50.00 %)",
        ]
    )
    configs = project.baseline()["configs"]
    assert configs["16-fast"]["metrics"]["latency_ns"] == 24.0
    assert configs["16-slow"]["metrics"]["latency_ns"] == 32.0  # kept: not selected by -k

    project.run("--npubench", "toy", "--regen-baselines", xdist=xdist).assert_outcomes(passed=4)
    project.run("--npubench", "toy", xdist=xdist).assert_outcomes(passed=4)
    assert_no_plugin_traceback(worse)


def test_failed_write_during_regen_keeps_the_old_file(project: Project) -> None:
    """An exception while the new baseline is being put in place leaves the old file byte for
    byte, leaves no temp file behind, and is reported as an error naming the file."""
    project.bench()
    project.run("--npubench", "toy", "--regen-baselines").assert_outcomes(passed=4)
    before = project.read("baselines/toy.json")
    project.knobs(scale=3.0)
    project.write("conftest.py", BREAK_THE_WRITE.format(action='raise OSError("disk full")'))

    result = project.run("--npubench", "toy", "--regen-baselines")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "ERROR could not write baselines/toy.json (OSError('disk full')); "
            "the previous file is left as it was"
        ]
    )
    assert project.read("baselines/toy.json") == before
    left = sorted(p.name for p in (project.path / "baselines").iterdir())
    assert left == ["toy.json"]  # neither the lock file nor a temp file stays (issue 27)


def test_process_killed_mid_regen_leaves_the_old_file_intact(project: Project) -> None:
    """A process that dies between writing the new file and renaming it (os._exit: no cleanup
    at all) leaves the committed baseline exactly as it was; the next run still reads it."""
    project.bench()
    project.run("--npubench", "toy", "--regen-baselines").assert_outcomes(passed=4)
    before = project.read("baselines/toy.json")
    project.knobs(scale=3.0)
    project.write("conftest.py", BREAK_THE_WRITE.format(action="os._exit(9)"))

    killed = project.pytester.runpytest_subprocess(
        "-p", "no:hypothesispytest", "--npubench", "toy", "--regen-baselines"
    )
    assert killed.ret == 9
    assert project.read("baselines/toy.json") == before
    (leftover,) = (project.path / "baselines").glob(".toy.json.*.tmp")  # killed mid-write
    assert '"latency_ns": 48.0' in leftover.read_text()

    (project.path / "conftest.py").unlink()
    after = project.run("--npubench", "toy")
    after.assert_outcomes(failed=4)  # the old baseline gates the (3x slower) run
    assert "regression" in output(after)
