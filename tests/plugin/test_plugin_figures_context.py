"""What a bench's figures are told about the run (issue 27): a partial run (-k) says so in
every figure, a what-if draws only configs measured on this run's topology, failed configs are
marked, and figures of an earlier run are not left beside this run's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toyproject import Project

from pytest_npubench import ConfigResult, figure_context, plotting
from pytest_npubench.stale import FLAG, remove_stale

BENCH = """\
import json
from pathlib import Path

from pytest_npubench import Bench, Metric, Result, figure_context, plotting

KNOBS = Path(__file__).with_name("ctx_knobs.json")


def knobs():
    return json.loads(KNOBS.read_text()) if KNOBS.exists() else {}


def run(params):
    return Result(metrics={"latency_ns": params["size"] * knobs().get("scale", 1.0)})


def figures(results, outdir):
    import matplotlib.pyplot as plt

    context = figure_context.current()
    fig, ax = plt.subplots(figsize=(3, 2), dpi=50)
    rows = list(results.values())
    ys = [r.metrics["latency_ns"] for r in rows]
    plotting.markers(ax, list(range(len(rows))), ys, rows, "C0")
    lines = plotting.banner(fig)
    seen = {
        "context": None if context is None else context.to_json(),
        "drawn": sorted(results),
        "banner": lines,
        "failed_marks": sum(
            len(line.get_xdata()) for line in ax.get_lines() if line.get_gid() == "npubench-failed"
        ),
    }
    (outdir / "seen.json").write_text(json.dumps(seen))
    return [plotting.save(fig, outdir / "latency.png")]


BENCH = Bench(
    name="ctx",
    sweep={"size": [16, 32], "variant": ["a", "b"]},
    run=run,
    metrics={"latency_ns": Metric(unit="ns", direction="lower")},
    fingerprint=lambda: knobs().get("fingerprint", "hw:1"),
    regen_only=lambda p: p["size"] == 32 and p["variant"] == "b",
    figures=figures,
)
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> Project:
    p = Project(pytester)
    p.write("benches/ctx.py", BENCH)
    p.bench("other", figures=True)
    return p


def _seen(project: Project) -> dict[str, object]:
    data: dict[str, object] = json.loads(project.read("npubench-artifacts/ctx/seen.json"))
    return data


def test_a_k_run_says_partial_in_the_figure_and_a_full_run_does_not(project: Project) -> None:
    project.run("--regen-baselines", "--npubench", "ctx").assert_outcomes(passed=4)
    project.run("--npubench", "ctx")
    assert _seen(project)["banner"] == []
    project.run("--npubench", "ctx", "-k", "16")
    seen = _seen(project)
    assert seen["drawn"] == ["16-a", "16-b"]
    assert any("partial run: 2 of 4 configs" in line for line in seen["banner"])  # type: ignore[union-attr]


def test_a_whatif_draws_only_configs_measured_on_its_topology_and_marks_failures(
    project: Project,
) -> None:
    project.run("--regen-baselines", "--npubench", "ctx").assert_outcomes(passed=4)
    project.write("benches/ctx_knobs.json", json.dumps({"fingerprint": "hw:2", "scale": 2.0}))
    project.run("--npubench", "ctx")
    seen = _seen(project)
    assert seen["drawn"] == ["16-a", "16-b", "32-a"]  # 32-b is reused: measured on hw:1
    context = seen["context"]
    assert isinstance(context, dict)
    assert context["dropped"] == 1 and "hw:2" in context["whatif"]
    assert sorted(context["failed"]) == ["16-a", "16-b", "32-a"]  # every re-measured one moved
    assert seen["failed_marks"] == 3
    banner = " ".join(seen["banner"])  # type: ignore[arg-type]
    assert "what-if" in banner and "3 configs FAILED" in banner


def test_figures_of_an_earlier_run_are_removed_and_other_files_kept(project: Project) -> None:
    art = project.path / "npubench-artifacts"
    for path in ("other/latency.png", "other/traces/x.json", "ctx/old_name.png"):
        (art / path).parent.mkdir(parents=True, exist_ok=True)
        (art / path).write_bytes(b"old")
    (art / "other" / "notes.txt").write_text("mine")
    (art / "unknown").mkdir()
    (art / "unknown" / "a.png").write_bytes(b"not a bench's")
    project.run("--regen-baselines", "--npubench", "ctx").assert_outcomes(passed=4)
    assert (art / "ctx" / "latency.png").is_file()
    assert not (art / "ctx" / "old_name.png").exists()
    assert not (art / "other" / "latency.png").exists()
    assert not (art / "other" / "traces").exists()
    assert (art / "other" / "notes.txt").read_text() == "mine"  # not ours: kept, and flagged
    assert "did not run bench 'other'" in (art / "other" / FLAG).read_text()
    project.bench("other", figures=True)
    project.run("--regen-baselines").assert_outcomes(passed=8)  # both benches: current again
    assert not (art / "other" / FLAG).exists()
    assert not (art / "ctx" / FLAG).exists()
    assert (art / "unknown" / "a.png").is_file()  # not a bench's folder: kept


def test_remove_stale_leaves_a_folder_it_did_not_fill(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "f.png").write_bytes(b"x")
    assert remove_stale(tmp_path, {"a", "b"}, {"a": []}) == [Path("b/f.png")]
    assert not (tmp_path / "b").exists()


def _result(cid: str, verdict: str, source: str = "run") -> ConfigResult:
    metrics = {} if verdict == "error" else {"x": 1.0}
    return ConfigResult("b", cid, {}, metrics, None, verdict, source)  # type: ignore[arg-type]


def test_the_context_counts_failures_as_the_gate_does() -> None:
    results = {
        "a": _result("a", "regression"),
        "b": _result("b", "improved"),
        "c": _result("c", "error"),
        "d": _result("d", "reused-baseline", "baseline"),
    }
    strict, drawn = figure_context.for_bench("b", 10, results, regen=False, fail_improvements=True)
    assert strict.failed == ("a", "b", "c") and strict.failed_unplotted == ("c",)
    assert sorted(drawn) == ["a", "b", "d"] and strict.partial
    allowed, _ = figure_context.for_bench("b", 4, results, regen=False, fail_improvements=False)
    assert allowed.failed == ("a", "c") and not allowed.partial
    regen, _ = figure_context.for_bench("b", 4, results, regen=True, fail_improvements=True)
    assert regen.failed == ("c",)


def test_the_banner_grows_the_figure_and_keeps_the_panels_in_place() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    before = ax.get_position().y1 * 3
    context = figure_context.FigureContext("b", 4, 1020)
    with figure_context.using(context):
        lines = plotting.banner(fig)
    assert lines == [
        "partial run: 4 of 1020 configs selected (-k / -m / node ids); not the full figure"
    ]
    height = fig.get_size_inches()[1]
    assert height > 3 and abs(ax.get_position().y1 * height - before) < 1e-9
    assert any(t.get_gid() == "npubench-banner" for t in fig.texts)
    plt.close(fig)


def test_the_banner_keeps_a_figure_legend_and_the_title_where_they_were() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    (line,) = ax.plot([0, 1], [0, 1], label="a")
    legend = fig.legend(handles=[line], loc="upper center", bbox_to_anchor=(0.5, 0.9))
    title = fig.suptitle("a title", y=0.97)
    renderer = fig.canvas.get_renderer()
    before = [a.get_window_extent(renderer).y0 for a in (legend, title)]
    context = figure_context.FigureContext("b", 1, 2, failed=("x",), whatif="hw:2 vs hw:1")
    with figure_context.using(context):
        assert len(plotting.banner(fig)) == 3
    after = [a.get_window_extent(fig.canvas.get_renderer()).y0 for a in (legend, title)]
    assert after == pytest.approx(before, abs=1.0)  # in pixels from the bottom
    plt.close(fig)
