"""Explaining a regression: where it came from, in the failure, summary.md and index.html."""

from __future__ import annotations

import pytest
from toyproject import TOY, Project, assert_no_plugin_traceback

EXPLAIN = (
    "    explain=lambda cur, base: "
    "[f\"size work {cur['latency_ns'] / base['latency_ns']:.1f}x the baseline's\"],"
)
RAISING = "    explain=lambda cur, base: 1 / 0,"


def regressed(project: Project, extra: str = "", xdist: bool = False) -> pytest.RunResult:
    project.write("benches/toy.py", TOY.format(name="toy", extra=extra))
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=2.0, util=0.25)
    result = project.run("--npubench", "toy", "-k", "16-fast", xdist=xdist)
    result.assert_outcomes(failed=1)
    return result


def test_default_explanation_lists_recorded_metrics_that_moved(project: Project) -> None:
    """Without explain=, the ungated metrics that changed most explain the failure; the
    table itself lists only the gated metric that failed."""
    result = regressed(project)
    result.stdout.fnmatch_lines(
        [
            "toy[[]16-fast[]]: 1 gated metric(s) got worse beyond tolerance*",
            "  latency_ns  16 ns     32 ns    +100.00 %  1 %        regression",
            "where it came from (current vs baseline, largest change first):",
            "  util -50.00 % (0.5 -> 0.25)",
        ]
    )
    assert "  util  " not in result.stdout.str()  # not a row of the gate table


@pytest.mark.parametrize("xdist", [False, True], ids=["-n0", "-n2"])
def test_bench_explanation_reaches_failure_summary_and_html(project: Project, xdist: bool) -> None:
    """A bench's explain= lines appear in the failure, in summary.md and at the top of
    index.html, under -n 0 and -n 2."""
    result = regressed(project, EXPLAIN, xdist=xdist)
    result.stdout.fnmatch_lines(["  size work 2.0x the baseline's"])
    summary = project.read("npubench-artifacts/summary.md")
    assert "### Where the changes came from" in summary
    assert "**toy `16-fast`** (regression): size work 2.0x the baseline's" in summary
    html = project.read("npubench-artifacts/index.html")
    card = html.index("toy[16-fast]: regression")
    assert card < html.index('<h2 id="toy">')  # regressions come before the bench tables
    assert "size work 2.0x the baseline&#x27;s" in html[card:]


def test_a_raising_explain_does_not_hide_the_verdict(project: Project) -> None:
    """An explain function that raises is reported as such; the item still fails clearly."""
    result = regressed(project, RAISING)
    result.stdout.fnmatch_lines(["*the explain function of bench 'toy' raised ZeroDivisionError*"])
    assert_no_plugin_traceback(result)
