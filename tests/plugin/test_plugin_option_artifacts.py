"""--npubench-artifacts: results.json, summary.md and <bench>/*.png, written at session end."""

from __future__ import annotations

import pytest
from toyproject import Project, output


def test_results_json_holds_metrics_baselines_and_verdicts(project: Project) -> None:
    """results.json has every metric of the run, the baseline values, verdict, source, params
    (JSON-friendly) and the bench's metric spec and figure files."""
    project.bench(figures=True)
    project.run("--regen-baselines", "-k", "fast").assert_outcomes(passed=2)
    project.knobs(scale=2.0)
    project.run("--npubench", "toy").assert_outcomes(failed=4)
    toy = project.results()["benches"]["toy"]
    assert toy["fingerprint"] == "toy-hw:1"
    assert toy["baseline_file"] == "baselines/toy.json"
    assert toy["figures"] == ["toy/latency.png"]
    assert toy["metrics"]["latency_ns"] == {
        "direction": "lower",
        "gate": True,
        "tolerance": 0.01,
        "unit": "ns",
    }
    assert toy["configs"]["16-fast"] == {
        "baseline": {"latency_ns": 16.0, "throughput": 10.0, "util": 0.5},
        "changes": {"latency_ns": 1.0, "throughput": 0.0, "util": 0.0},
        "comparisons": {"latency_ns": "regression", "throughput": "pass", "util": "pass"},
        "message": "",
        "metrics": {"latency_ns": 32.0, "throughput": 10.0, "util": 0.5},
        "params": {"size": 16, "variant": "fast"},
        "source": "run",
        "verdict": "regression",
    }
    assert toy["configs"]["16-slow"]["verdict"] == "new"
    assert (project.path / "npubench-artifacts" / "toy" / "latency.png").read_bytes()[:4] == (
        b"\x89PNG"
    )


def test_summary_md_lists_regressions_and_new_configs(project: Project) -> None:
    """summary.md is a Markdown table a CI job can append to $GITHUB_STEP_SUMMARY."""
    project.bench(figures=True)
    project.run("--regen-baselines", "-k", "fast").assert_outcomes(passed=2)
    project.knobs(scale=2.0)
    project.run("--npubench", "toy")
    summary = project.read("npubench-artifacts/summary.md")
    assert summary.startswith(
        "# npubench summary\n\n"
        "- **toy: 4 run: 0 passed, 4 failed (2 regressions, 2 new (no baseline))**"
    )
    assert "| toy | `16-fast` | regression | latency_ns +100.00 % (16 ns -&gt; 32 ns) |" in summary
    assert "| toy | `16-slow` | new |  | `pytest --npubench toy --regen-baselines" in summary
    assert "    pytest --npubench toy --regen-baselines\n" in summary
    assert "](" not in summary  # no relative links: they break in $GITHUB_STEP_SUMMARY
    assert "The 1 figure(s), results.json and index.html are in the artifact folder" in summary


def test_custom_artifact_folder(project: Project) -> None:
    """--npubench-artifacts DIR puts the files there (relative to the invocation folder)."""
    project.bench()
    project.run("--regen-baselines", "--npubench-artifacts", "out/perf").assert_outcomes(passed=4)
    assert (project.path / "out" / "perf" / "results.json").is_file()
    assert (project.path / "out" / "perf" / "summary.md").is_file()
    assert not (project.path / "npubench-artifacts").exists()


def test_artifact_folder_that_is_a_file_is_a_usage_error(project: Project) -> None:
    """A path that exists and is not a folder is refused by the option parser."""
    project.bench()
    project.write("taken", "")
    result = project.run("--npubench", "toy", "--npubench-artifacts", "taken")
    assert result.ret == 4
    assert "--npubench-artifacts 'taken': give a folder" in output(result)


def test_raising_figure_function_is_an_error_but_other_artifacts_are_written(
    project: Project,
) -> None:
    """A figures function that raises is reported as an error naming the bench (exit status
    1 although every item passed); results.json and summary.md are still written."""
    project.bench(figures=True)
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(figures_raise=True)
    result = project.run("--npubench", "toy")
    result.assert_outcomes(passed=4)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "ERROR figures of bench 'toy' failed: ValueError('the figure function broke')",
            '*raise ValueError("the figure function broke")',
        ]
    )
    assert "pytest_npubench/" not in output(result)
    assert project.results()["benches"]["toy"]["figures"] == []
    assert "figures of bench 'toy' failed" in project.read("npubench-artifacts/summary.md")


def test_summary_md_of_a_regen_says_the_changes_were_accepted(project: Project) -> None:
    """After --regen-baselines, new and changed configs are listed as accepted, not as work
    still to do."""
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    summary = project.read("npubench-artifacts/summary.md")
    assert "Baselines rewritten (--regen-baselines)" in summary
    assert "| toy | `16-fast` | new |  | accepted (baseline rewritten) |" in summary


def test_two_word_artifacts_folder_outside_the_project_is_refused_with_the_fix(
    project: Project, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """pytest picks its rootdir before plugin options are known, so a two-word
    ``--npubench-artifacts /elsewhere`` used to end in "unknown bench 'toy'; known benches:
    none". Now it is one usage error giving the one-word spelling, which works."""
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "out"
    result = project.pytester.runpytest_subprocess(
        "-p", "no:hypothesispytest", "--npubench", "toy", "--npubench-artifacts", str(elsewhere)
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"write it as one word: --npubench-artifacts={elsewhere}" in output(result)
    ok = project.run("--npubench", "toy", f"--npubench-artifacts={elsewhere}")
    ok.assert_outcomes(passed=4)
    assert (elsewhere / "results.json").is_file()


def test_results_json_has_run_metadata_integers_and_natural_id_order(project: Project) -> None:
    """results.json says what produced it (command without xdist options, the invocation as
    typed, -n included (issue 27), commit or null, versions), keeps whole-number metrics as
    integers and lists ids 2, 10, 100 in that order."""
    project.write(
        "benches/toy.py",
        """\
        from pytest_npubench import Bench, Metric, Result

        BENCH = Bench(
            name="toy",
            sweep={"size": [100, 2, 10]},
            run=lambda p: Result(metrics={"count": p["size"], "time_ns": p["size"] * 1.5}),
            metrics={
                "count": Metric(unit="1", direction="lower"),
                "time_ns": Metric(unit="ns", direction="lower"),
            },
            config_id=lambda p: f"{p['size']}KiB",
            fingerprint=lambda: "hw",
            topology=lambda: {"name": "toy-hw", "link": {"bw_gbs": 50}},
        )
        """,
    )
    project.run("--regen-baselines", "-n", "0").assert_outcomes(passed=3)
    data = project.results()
    run = data["run"]
    assert run["command"] == "pytest -p no:hypothesispytest --regen-baselines"
    assert run["invocation"] == "pytest -p no:hypothesispytest --regen-baselines -n 0"
    assert "commit" in run and run["versions"]["pytest-npubench"]
    assert set(run["versions"]) == {"pytest-npubench", "pytest", "numpy", "python"}
    toy = data["benches"]["toy"]
    assert list(toy["configs"]) == ["2KiB", "10KiB", "100KiB"]
    assert toy["topology"] == {"name": "toy-hw", "link.bw_gbs": 50}
    assert '"count": 10,' in project.read("npubench-artifacts/results.json")
    assert toy["configs"]["10KiB"]["params"] == {"size": 10}
