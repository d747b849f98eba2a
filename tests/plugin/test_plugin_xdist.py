"""Metrics travel in report.user_properties: they survive -n 2 and land in --junitxml."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from toyproject import Project, output, same_run


@pytest.mark.parametrize("xdist", [False, True], ids=["-n0", "-n2"])
def test_metrics_are_junitxml_properties(project: Project, xdist: bool) -> None:
    """Each item's metrics appear as <property> elements of its testcase in --junitxml, and the
    controller's summary table has every config."""
    project.bench()
    result = project.run("--regen-baselines", "--junitxml=junit.xml", xdist=xdist)
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "  verdict  config   latency  throughput",
            "  new      16-fast  16 ns    10 GB/s",
            "  new      16-slow  32 ns    10 GB/s",
            "  new      32-fast  32 ns    10 GB/s",
            "  new      32-slow  64 ns    10 GB/s",
        ]
    )
    cases = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(project.path / "junit.xml").iter("testcase")
    }
    assert sorted(cases) == ["toy[16-fast]", "toy[16-slow]", "toy[32-fast]", "toy[32-slow]"]
    props = cases["toy[32-slow]"]
    assert props["npubench.latency_ns"] == "64.0"
    assert props["npubench.throughput"] == "10.0"
    assert '"verdict": "new"' in props["npubench"]


PID_FIGURE = """
import os


def figures(results, outdir):
    import matplotlib.pyplot as plt

    if os.environ.get("TOY_FIGURES_RAISE"):
        raise ValueError("the figure function broke")
    (outdir / "pid.txt").write_text(str(os.getpid()))
    fig, ax = plt.subplots(figsize=(3, 2), dpi=50)
    ax.bar(list(results), [r.metrics["latency_ns"] for r in results.values()])
    fig.savefig(outdir / "latency.png")
    plt.close(fig)
    return [outdir / "latency.png"]


BENCH = Bench(
    name=NAME,
    sweep={"size": [16, 32]},
    run=lambda p: Result(metrics={"latency_ns": float(p["size"])}),
    metrics={"latency_ns": Metric(unit="ns", direction="lower")},
    fingerprint=lambda: "toy-hw:1",
    figures=figures,
)
"""


def _two_benches(project: Project) -> None:
    for name in ("alpha", "beta"):
        header = f"from pytest_npubench import Bench, Metric, Result\nNAME = {name!r}\n"
        project.write(f"benches/{name}.py", header + PID_FIGURE)


def test_under_xdist_two_benches_are_drawn_by_two_processes_with_the_same_bytes(
    project: Project,
) -> None:
    """With -n 2 one bench's figures are drawn in a child process while the controller draws
    the other (ADR 0013), and every artifact is byte-identical to a -n 0 run."""
    _two_benches(project)
    project.run("--regen-baselines").assert_outcomes(passed=4)
    files: dict[bool, dict[str, bytes]] = {}
    pids: dict[bool, set[str]] = {}
    for xdist in (False, True):
        project.run("--npubench", "all", xdist=xdist).assert_outcomes(passed=4)
        art = project.path / "npubench-artifacts"
        pids[xdist] = {project.read(f"npubench-artifacts/{b}/pid.txt") for b in ("alpha", "beta")}
        files[xdist] = {
            p.relative_to(art).as_posix(): same_run(p.name, p.read_bytes())
            for p in sorted(art.rglob("*"))
            if p.is_file() and p.name != "pid.txt"
        }
        assert ("-n 2" in project.results()["run"]["invocation"]) == xdist
    assert len(pids[False]) == 1  # -n 0: one process drew both
    assert len(pids[True]) == 2  # -n 2: two processes, at the same time
    assert "alpha/latency.png" in files[True] and "beta/latency.png" in files[True]
    assert files[True].keys() == files[False].keys()
    different = [name for name in files[True] if files[True][name] != files[False][name]]
    assert different == [], different


def test_a_figures_function_that_raises_in_a_child_is_reported_as_in_the_controller(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child's error names the bench and the exception, with the bench's own traceback and
    no plugin frames; the run fails, the other files are still written."""
    _two_benches(project)
    project.run("--regen-baselines").assert_outcomes(passed=4)
    monkeypatch.setenv("TOY_FIGURES_RAISE", "1")
    result = project.run("--npubench", "all", xdist=True)
    assert result.ret == 1
    for name in ("alpha", "beta"):  # one drawn here, one in a child: reported alike
        result.stdout.fnmatch_lines(
            [
                f"ERROR figures of bench {name!r} failed: ValueError('the figure function broke')",
                f"benches/{name}.py:*: in figures",
                '*raise ValueError("the figure function broke")',
            ]
        )
    assert "pytest_npubench/" not in result.stdout.str()
    assert project.results()["benches"]["alpha"]["figures"] == []


def test_a_run_with_nothing_to_draw_lets_the_figure_child_go(project: Project) -> None:
    """The child started with the session exits when no config ran (-k matches none): no
    error, no figure, and no process left running (pytest would warn of it)."""
    _two_benches(project)
    result = project.run("--npubench", "all", "-k", "no-such-config", "-W", "error", xdist=True)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED, output(result)
    assert "ERROR" not in output(result) and "ResourceWarning" not in output(result)
    assert not (project.path / "npubench-artifacts" / "alpha").exists()


EARLY_ALPHA = """
from pytest_npubench import Bench, Metric, Result


def figures(results, outdir):
    (outdir / "drawn.txt").write_text("yes")
    return [outdir / "drawn.txt"]


BENCH = Bench(
    name="alpha",
    sweep={"size": [16, 32]},
    run=lambda p: Result(metrics={"latency_ns": float(p["size"])}),
    metrics={"latency_ns": Metric(unit="ns", direction="lower")},
    fingerprint=lambda: "toy-hw:1",
    figures=figures,
)
"""

EARLY_BETA = """
import os
import time
from pathlib import Path

from pytest_npubench import Bench, Metric, Result

DRAWN = Path(__file__).parents[1] / "npubench-artifacts" / "alpha" / "drawn.txt"


def run(p):
    if p["size"] == 32 and os.environ.get("TOY_WAIT_FOR_ALPHA"):
        # beta's last config: wait (bounded) to see alpha's figures drawn
        deadline = time.monotonic() + 30
        while not DRAWN.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        Path(__file__).with_name("seen.txt").write_text(str(DRAWN.exists()))
    return Result(metrics={"latency_ns": float(p["size"])})


BENCH = Bench(
    name="beta",
    sweep={"size": [16, 32]},
    run=run,
    metrics={"latency_ns": Metric(unit="ns", direction="lower")},
    fingerprint=lambda: "toy-hw:1",
    figures=lambda results, outdir: [],
)
"""


def test_a_bench_is_drawn_as_soon_as_its_last_config_reports(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under -n 2 the first bench's figures are drawn while the workers still run the next
    bench (its results are all in), not after the session: beta's last config sees alpha's
    figure file appear before it finishes."""
    project.write("benches/alpha.py", EARLY_ALPHA)
    project.write("benches/beta.py", EARLY_BETA)
    project.run("--regen-baselines").assert_outcomes(passed=4)
    (project.path / "npubench-artifacts" / "alpha" / "drawn.txt").unlink()
    monkeypatch.setenv("TOY_WAIT_FOR_ALPHA", "1")
    project.run("--npubench", "all", xdist=True).assert_outcomes(passed=4)
    assert project.read("benches/seen.txt") == "True"
    assert project.results()["benches"]["alpha"]["figures"] == ["alpha/drawn.txt"]


def test_one_child_draws_every_bench_but_the_last_under_two_workers(project: Project) -> None:
    """-n 2 starts one drawing child (N - 1), which draws the first two of three benches one
    after another; the controller draws the last: two processes, the same bytes as -n 0."""
    for name in ("alpha", "beta", "gamma"):
        header = f"from pytest_npubench import Bench, Metric, Result\nNAME = {name!r}\n"
        project.write(f"benches/{name}.py", header + PID_FIGURE)
    project.run("--regen-baselines").assert_outcomes(passed=6)
    project.run("--npubench", "all", xdist=True).assert_outcomes(passed=6)
    pid = {b: project.read(f"npubench-artifacts/{b}/pid.txt") for b in ("alpha", "beta", "gamma")}
    assert pid["alpha"] == pid["beta"] != pid["gamma"]
    art = project.path / "npubench-artifacts"
    drawn = {b: (art / b / "latency.png").read_bytes() for b in pid}
    project.run("--npubench", "all").assert_outcomes(passed=6)
    assert {b: (art / b / "latency.png").read_bytes() for b in pid} == drawn


THREAD_FIGURE = PID_FIGURE.replace(
    '(outdir / "pid.txt").write_text(str(os.getpid()))',
    'import threading\n    (outdir / "pid.txt").write_text(threading.current_thread().name)',
)


def test_the_controllers_own_bench_is_drawn_by_its_drawing_thread(project: Project) -> None:
    """Under -n 2 the bench the controller draws itself (the last) is drawn in the
    controller's drawing thread as soon as it is complete, not by the main thread after the
    workers stopped; -n 0 draws in the main thread. Same bytes either way."""
    for name in ("alpha", "beta"):
        header = f"from pytest_npubench import Bench, Metric, Result\nNAME = {name!r}\n"
        project.write(f"benches/{name}.py", header + THREAD_FIGURE)
    project.run("--regen-baselines").assert_outcomes(passed=4)
    assert project.read("npubench-artifacts/beta/pid.txt") == "MainThread"
    drawn = (project.path / "npubench-artifacts" / "beta" / "latency.png").read_bytes()
    project.run("--npubench", "all", xdist=True).assert_outcomes(passed=4)
    assert project.read("npubench-artifacts/beta/pid.txt") == "npubench-figures"
    assert project.read("npubench-artifacts/alpha/pid.txt") == "MainThread"  # in its child
    assert (project.path / "npubench-artifacts" / "beta" / "latency.png").read_bytes() == drawn
