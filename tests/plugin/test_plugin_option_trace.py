"""--npubench-trace and --npubench-trace-limit: one trace file per selected config."""

from __future__ import annotations

import json

import pytest
from toyproject import TOY, Project, output

TRACE = (
    "    trace=lambda params, path, limit: path.write_text(json.dumps("
    '{"traceEvents": [], "otherData": {"params": params, "limit": limit}})),'
)


@pytest.mark.parametrize("xdist", [False, True], ids=["-n0", "-n2"])
def test_traces_of_the_selected_configs_only(project: Project, xdist: bool) -> None:
    """With -k, only the selected configs get a trace, named after their config id, with the
    limit passed through; index.html links them."""
    project.write("benches/toy.py", TOY.format(name="toy", extra=TRACE))
    project.run("--regen-baselines").assert_outcomes(passed=4)
    result = project.run(
        "--npubench",
        "toy",
        "-k",
        "fast",
        "--npubench-trace",
        "--npubench-trace-limit",
        "50",
        xdist=xdist,
    )
    result.assert_outcomes(passed=2)
    traces = project.path / "npubench-artifacts" / "toy" / "traces"
    assert sorted(p.name for p in traces.iterdir()) == ["16-fast.json", "32-fast.json"]
    doc = json.loads((traces / "16-fast.json").read_text())
    assert doc["otherData"] == {"params": {"size": 16, "variant": "fast"}, "limit": 50}
    result.stdout.fnmatch_lines(["npubench: 2 trace(s) of toy in npubench-artifacts/toy/traces/"])
    assert 'href="toy/traces/16-fast.json"' in project.read("npubench-artifacts/index.html")


def test_no_traces_without_the_option_and_a_note_for_benches_without_trace(
    project: Project,
) -> None:
    """No option, no trace folder; asking a bench that cannot trace says so."""
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.run("--npubench", "toy").assert_outcomes(passed=4)
    assert not (project.path / "npubench-artifacts" / "toy" / "traces").exists()
    result = project.run("--npubench", "toy", "--npubench-trace")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["npubench: bench 'toy' writes no traces (no trace= in its Bench)"])


@pytest.mark.parametrize("bad", ["0", "-3", "many"])
def test_bad_trace_limit_is_a_usage_error(project: Project, bad: str) -> None:
    """A limit that is not a positive integer is refused with the fix."""
    project.bench()
    result = project.run("--npubench", "toy", "--npubench-trace-limit", bad)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--npubench-trace-limit {bad!r} is not a positive integer" in output(result)
