"""tp_layer's figures as a design review reads them (issue 27): legends that match what is
drawn, modes told apart where their lines coincide, labelled log axes, the superlinear step
explained, bars on a scale where the modes differ, timeline panels with the same rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from figure_checks import assert_legend_matches, baseline_results, captured, failed_marks

__all__ = ["captured"]

GATED = frozenset(
    {
        "mlp-h4096-t512-p4-ring-serial",
        "mlp-h4096-t512-p4-ring-gemm_ar",
        "attn-h4096-t512-p4-ring-ag_rs",
    }
)


def _draw(captured: dict[str, Any], tmp_path: Path, **kw: Any) -> dict[str, Any]:
    import benches.tp_layer as tp

    tp.BENCH.figures(baseline_results("tp_layer", **kw), tmp_path)
    return captured


def test_speedup_legend_tells_every_series_apart_and_matches_the_lines(
    captured: dict[str, Any], tmp_path: Path
) -> None:
    figs = _draw(captured, tmp_path, measured=GATED)
    assert_legend_matches(figs["speedup.png"])
    titles = [ax.get_title() for ax in figs["speedup.png"].axes]
    assert {t.split(",")[0] for t in titles} == {"mlp", "attn"}  # one layer per panel


def test_strong_scaling_labels_the_top_of_every_log_axis_and_separates_the_modes(
    captured: dict[str, Any], tmp_path: Path
) -> None:
    fig = _draw(captured, tmp_path)["strong_scaling.png"]
    assert_legend_matches(fig)
    for ax in fig.axes[:2]:  # the latency panels
        top = max(max(line.get_ydata()) for line in ax.get_lines())
        low, high = ax.get_ylim()
        ticks = [t for t in ax.get_yticks() if low <= t <= high]
        labels = [ax.yaxis.get_major_formatter()(t, 0) for t in ticks]
        assert len(ticks) >= 2 and all(labels), labels
        assert max(ticks) >= top / 1.6, (ax.get_title(), ticks, top)  # no bare top of the axis
        markers = {line.get_marker() for line in ax.get_lines() if line.get_marker() != "None"}
        assert len(markers) >= 3  # serial, gemm_ar, ag_rs: told apart where they coincide
    assert len(fig.axes) == 4  # and each mode's latency over compute alone below


def test_the_superlinear_step_from_tp2_to_tp4_is_explained() -> None:
    """mlp hidden 8192: compute alone 201.9 -> 67.6 ms from TP 2 to 4 (2.98x) is real: at TP 2
    gemm2's K = 16384 leaves no room for two A+B panels in SRAM, so 'resident' streams tiles."""
    import benches._tp_figures as figs
    import benches.tp_layer as tp

    note = figs.scaling_note("mlp", 8192, 2048, [2, 4, 8], tp.topology_for, tp.layer_config)
    assert "TP 2" in note and "gemm2" in note and "16384" in note
    assert "TP 4" not in note and "TP 8" not in note
    assert figs.scaling_note("attn", 8192, 2048, [2, 4, 8], tp.topology_for, tp.layer_config) == ""


def test_time_breakdown_draws_some_bars_measured_on_a_scale_that_shows_the_differences(
    captured: dict[str, Any], tmp_path: Path
) -> None:
    from matplotlib.colors import to_rgba

    import benches._tp_figures as figs

    fig = _draw(captured, tmp_path, measured=GATED)["time_breakdown.png"]
    faces = {to_rgba(p.get_facecolor()) for ax in fig.axes for p in ax.patches}
    assert any(to_rgba(c) in faces for c in figs.MODE_COLORS.values())  # filled: measured
    for ax in fig.axes:
        tallest = max(p.get_height() for p in ax.patches)
        assert ax.get_ylim()[1] <= 1.3 * tallest  # the axis spans what differs


def test_timeline_panels_share_their_rows_and_the_legend_lists_only_drawn_stages(
    captured: dict[str, Any], tmp_path: Path
) -> None:
    from matplotlib.colors import to_rgba

    fig = _draw(captured, tmp_path)["timeline.png"]
    rows = [[t.get_text() for t in ax.get_yticklabels()] for ax in fig.axes]
    assert all(r == rows[0] for r in rows) and rows[0]
    drawn = {to_rgba(c) for ax in fig.axes for coll in ax.collections for c in coll.get_facecolor()}
    for handle in fig.legends[0].legend_handles:
        assert to_rgba(handle.get_facecolor()) in drawn, handle.get_label()


def test_a_failed_config_is_marked(captured: dict[str, Any], tmp_path: Path) -> None:
    failed = frozenset({"mlp-h4096-t512-p4-ring-gemm_ar"})
    figs = _draw(captured, tmp_path, failed=failed)
    assert failed_marks(figs["speedup.png"]) >= 1
    assert failed_marks(figs["time_breakdown.png"]) >= 1
