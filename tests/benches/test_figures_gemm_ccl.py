"""gemm's and ccl's figures as a design review reads them (issue 27): roofline labels that
cover no marker, roof or other label; the model's dash above the simulated dot, in a file that
says simulated; ccl legends that show what the panels draw, titles that name the topology."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from figure_checks import assert_legend_matches, baseline_results, captured, failed_marks

__all__ = ["captured"]


def test_roofline_labels_cover_no_marker_no_roof_and_no_other_label(
    captured: dict[str, Any], tmp_path: Path
) -> None:
    from matplotlib.text import Text

    import benches.gemm as gemm

    gemm.BENCH.figures(baseline_results("gemm"), tmp_path)
    fig = captured["roofline.png"]
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    labels = [t for t in ax.texts if "x" in t.get_text()]
    boxes = [Text.get_window_extent(t, renderer) for t in labels]  # the text, not its leader
    names = [n for t in labels for n in t.get_text().split("\n")]
    grid = gemm.figure_grid(baseline_results("gemm"))
    assert sorted(names) == sorted("x".join(map(str, s)) for s in grid)  # every shape, once
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), (labels[i].get_text(), a, b)
    points = [
        ax.transData.transform((x, y))
        for line in ax.get_lines()
        if line.get_linestyle() in ("None", "none")
        for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
    ]
    roof = [ax.transData.transform(xy) for xy in ax.get_lines()[0].get_xydata()]
    for text, box in zip(labels, boxes, strict=True):
        for px, py in points + roof:
            assert not (box.x0 < px < box.x1 and box.y0 < py < box.y1), (text.get_text(), px, py)


def test_the_model_dash_is_drawn_over_the_simulated_dot_in_a_file_named_simulated(
    captured: dict[str, Any], tmp_path: Path
) -> None:
    import benches.gemm as gemm

    paths = gemm.BENCH.figures(baseline_results("gemm"), tmp_path)
    assert "model_vs_simulated.png" in {p.name for p in paths}
    assert not any("measured" in p.name for p in paths)
    top = captured["model_vs_simulated.png"].axes[0]
    dashes = [line for line in top.get_lines() if line.get_marker() == "_"]
    dots = [line for line in top.get_lines() if line.get_marker() == "o"]
    assert dashes and dots
    assert min(d.get_zorder() for d in dashes) > max(d.get_zorder() for d in dots)
    assert min(d.get_markersize() for d in dashes) > max(d.get_markersize() for d in dots)


def test_ccl_legends_match_the_panels_and_titles_name_the_topology(
    captured: dict[str, Any], tmp_path: Path
) -> None:
    import benches.ccl as ccl

    ccl.BENCH.figures(baseline_results("ccl"), tmp_path)
    for name in ("time_vs_size.png", "sim_vs_model.png"):
        assert_legend_matches(captured[name])
    named = ("time_vs_size.png", "sim_vs_model.png", "busbw_vs_size.png")
    for name in (*named, "energy_per_byte_vs_size.png"):
        for ax in captured[name].axes:
            assert ax.get_title().startswith("topology: "), (name, ax.get_title())
    coloured = {
        line.get_marker()
        for ax in captured["sim_vs_model.png"].axes
        for line in ax.get_lines()
        if line.get_marker() not in ("None", "x")
    }
    assert coloured == {"o"}  # one marker: chip counts are a band, not six markers


def test_a_failed_config_is_marked_in_every_figure_that_draws_it(
    captured: dict[str, Any], tmp_path: Path
) -> None:
    """A red x on every figure: each failed config below appears in the figures listed."""
    import benches.ccl as ccl
    import benches.gemm as gemm
    import benches.real_systems as real

    cases = [
        (gemm, {"16x32x16-load_ref", "100x300x200-prefetch-systolic"}),
        (
            ccl,
            {
                "ring-p8-ring-1MiB",
                "two_level-p16-hierarchical-1MiB",
                *(f"{c}-ring-p8-{a}-1MiB" for c in COLLECTIVES for a in ALGOS),
            },
        ),
        (real, {"mi300x-8-mid"}),
    ]
    for module, failed in cases:
        captured.clear()
        bench = module.BENCH
        results = baseline_results(bench.name, failed=frozenset(failed & _ids(bench)))
        paths = bench.figures(results, tmp_path)
        assert paths
        for path in paths:
            assert failed_marks(captured[path.name]) >= 1, (bench.name, path.name)


ALGOS = ("ring", "direct")
COLLECTIVES = ("all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")


def _ids(bench: Any) -> set[str]:
    return {c.config_id for c in bench.configs}
