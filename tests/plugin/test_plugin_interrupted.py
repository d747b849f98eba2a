"""Ctrl-C during a run (issue 22): the files an interrupted run writes say so, none of them calls
the partial result clean, and no figure is drawn from partial results."""

from __future__ import annotations

import json

import pytest
from toyproject import TOY, Project

RUN = "def run(params):\n    k = knobs()\n"
INTERRUPTING = (
    RUN + "    if k.get(\"interrupt\") == f\"{params['size']}-{params['variant']}\":\n"
    "        raise KeyboardInterrupt\n"
)


def interrupting_bench(project: Project) -> None:
    text = TOY.format(name="toy", extra="    figures=figures,")
    assert RUN in text
    project.write("benches/toy.py", text.replace(RUN, INTERRUPTING))


def run(project: Project, *args: str, xdist: bool) -> pytest.RunResult:
    """A subprocess, as a user's Ctrl-C would stop it (in-process pytester re-raises it)."""
    extra = ("-n", "2") if xdist else ()
    return project.pytester.runpytest_subprocess(
        "-p", "no:hypothesispytest", *args, *extra, timeout=120
    )


@pytest.mark.parametrize("xdist", [False, True], ids=["-n0", "-n2"])
def test_an_interrupted_run_marks_its_files_and_draws_no_figure(
    project: Project, xdist: bool
) -> None:
    """A complete run, then one whose third config raises KeyboardInterrupt: it exits as
    interrupted; results.json, summary.md and index.html each say INTERRUPTED, the summary
    never says "No regressions"; the figures of the complete run are left as they were."""
    interrupting_bench(project)
    run(project, "--regen-baselines", xdist=False).assert_outcomes(passed=4)
    assert run(project, "--npubench", "toy", xdist=False).ret == pytest.ExitCode.OK
    artifacts = project.path / "npubench-artifacts"
    figures = {p: p.read_bytes() for p in (artifacts / "toy").iterdir()}
    assert len(figures) == 2  # latency.png and seen.json (which configs it was drawn from)
    project.knobs(interrupt="32-fast")
    result = run(project, "--npubench", "toy", xdist=xdist)
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    summary = (artifacts / "summary.md").read_text()
    assert summary.startswith("# npubench summary\n\n**INTERRUPTED: this run was stopped")
    assert "No regressions" not in summary
    assert json.loads((artifacts / "results.json").read_text())["run"]["interrupted"] is True
    index = (artifacts / "index.html").read_text()
    assert "INTERRUPTED" in index and "pass their gates" not in index
    assert {p: p.read_bytes() for p in (artifacts / "toy").iterdir()} == figures
    assert "npubench: artifacts in npubench-artifacts/ (interrupted: partial)" in (
        result.stdout.str()
    )


def test_a_complete_run_records_no_interruption(project: Project) -> None:
    """Only an interrupted run carries the mark: a complete one's files are as before."""
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.run("--npubench", "toy").assert_outcomes(passed=4)
    assert "interrupted" not in project.results()["run"]
    summary = project.read("npubench-artifacts/summary.md")
    assert "INTERRUPTED" not in summary and "No regressions" in summary
    assert "INTERRUPTED" not in project.read("npubench-artifacts/index.html")


def test_an_interrupted_regen_writes_no_baseline_and_accepts_nothing(project: Project) -> None:
    """Ctrl-C during --regen-baselines: the baseline file keeps its bytes, and summary.md says
    no baseline was rewritten instead of calling the changes accepted."""
    interrupting_bench(project)
    run(project, "--regen-baselines", xdist=False).assert_outcomes(passed=4)
    before = (project.path / "baselines" / "toy.json").read_bytes()
    project.knobs(interrupt="32-fast", scale=2.0)
    result = run(project, "--regen-baselines", xdist=False)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert (project.path / "baselines" / "toy.json").read_bytes() == before
    summary = project.read("npubench-artifacts/summary.md")
    assert "Baselines NOT rewritten: the --regen-baselines run was interrupted." in summary
    assert "accepted (baseline rewritten)" not in summary
    assert "NOT accepted" in summary
