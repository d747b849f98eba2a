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
    names = sorted(p.name for p in traces.glob("*.json"))
    assert [n.rsplit("-", 1)[0] for n in names] == ["16-fast", "32-fast"], names
    assert (traces / names[0]).with_suffix(".png").read_bytes()[:4] == b"\x89PNG"  # timeline
    doc = json.loads((traces / names[0]).read_text())
    assert doc["otherData"] == {"params": {"size": 16, "variant": "fast"}, "limit": 50}
    result.stdout.fnmatch_lines(["npubench: 2 trace(s) of toy in npubench-artifacts/toy/traces/"])
    assert f'href="toy/traces/{names[0]}"' in project.read("npubench-artifacts/index.html")
    assert all((traces / n).stat().st_mode & 0o777 == 0o644 for n in names)


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


HOSTILE_IDS = (
    '    config_id=lambda p: {16: "a/b", 32: "a_b"}[p["size"]] + ("\\\\" if p["variant"] == "slow"'
    ' else "") + "x" * 300,'
)


def test_hostile_config_ids_get_unique_bounded_trace_names(project: Project) -> None:
    """Ids that differ only in unsafe characters (a/b, a_b, a\\b) and ids of 300+ characters
    each get their own trace file, with a name the file system accepts."""
    project.write("benches/toy.py", TOY.format(name="toy", extra=TRACE + "\n" + HOSTILE_IDS))
    project.run("--regen-baselines").assert_outcomes(passed=4)
    result = project.run("--npubench", "toy", "--npubench-trace")
    result.assert_outcomes(passed=4)
    names = [p.name for p in (project.path / "npubench-artifacts/toy/traces").glob("*.json")]
    assert len(set(names)) == 4 and all(len(n) <= 100 for n in names), names


def test_unwritable_trace_folder_is_a_run_error_not_a_failed_config(project: Project) -> None:
    """A trace that cannot be written leaves the measurement standing (items pass, a regen
    records them) and is one error per config naming the file, never a raw traceback."""
    project.write("benches/toy.py", TOY.format(name="toy", extra=TRACE))
    traces = project.path / "npubench-artifacts" / "toy" / "traces"
    traces.parent.mkdir(parents=True)
    traces.write_text("a file where the folder should be")
    result = project.run("--npubench", "toy", "--regen-baselines", "--npubench-trace")
    result.assert_outcomes(passed=4)
    assert result.ret == 1
    assert "toy[16-fast]: could not write its trace npubench-artifacts/toy/traces/" in output(
        result
    )
    assert "INTERNALERROR" not in output(result)
    assert len(project.baseline()["configs"]) == 4
