"""What the figure tests share: the committed baselines as results, and checks of the artists a
figure draws (legend handles that match the drawn lines, labelled ticks, failure marks)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_npubench import ConfigResult

ROOT = Path(__file__).resolve().parents[2]


def baseline_results(
    bench: str, measured: frozenset[str] = frozenset(), failed: frozenset[str] = frozenset()
) -> dict[str, ConfigResult]:
    """The committed baseline of ``bench`` as results: ids in ``measured`` as if run now,
    ids in ``failed`` as run now and regressed."""
    module = importlib.import_module(f"benches.{bench}")
    configs = json.loads((ROOT / "baselines" / f"{bench}.json").read_text())["configs"]
    out = {}
    for cid, entry in configs.items():
        ran = cid in measured or cid in failed
        verdict = "regression" if cid in failed else "pass" if ran else "reused-baseline"
        out[cid] = ConfigResult(
            bench,
            cid,
            module.BENCH.config(cid).params,
            entry["metrics"],
            entry["metrics"],
            verdict,
            "run" if ran else "baseline",
        )
    return out


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Figures by file name, kept open instead of saved (plotting.save still stamps them)."""
    import matplotlib

    matplotlib.use("Agg")
    from pytest_npubench import plotting

    figs: dict[str, Any] = {}

    def keep(fig: Any, path: Path, dpi: int = 100) -> Path:
        plotting.banner(fig)
        figs[Path(path).name] = fig
        return Path(path)

    for name in (
        "benches._gemm_figures",
        "benches._ccl_figures",
        "benches._tp_figures",
        "benches._ccl_collective_figures",
        "benches._ccl_two_level",
        "benches._gemm_systolic",
        "benches._real_figures",
        "benches._energy_figures",
    ):
        module = importlib.import_module(name)
        if hasattr(module, "save"):
            monkeypatch.setattr(module, "save", keep)
    yield figs
    import matplotlib.pyplot as plt

    plt.close("all")


def style(artist: Any) -> tuple[Any, str, str]:
    """(colour, linestyle, marker) of a Line2D, colours as RGBA tuples (a hollow marker's
    marker name ends in ``/hollow``)."""
    from matplotlib.colors import to_rgba

    line = artist.get_linestyle()
    return (
        to_rgba(artist.get_color()),
        "None" if line in ("None", "none", "", " ") else line,
        _marker(artist),
    )


def _marker(artist: Any) -> str:
    from matplotlib.colors import to_rgba

    marker = artist.get_marker()
    if marker in (None, "", " ", "None", "none"):
        return "None"
    face = artist.get_markerfacecolor()
    hollow = face not in ("none", None) and to_rgba(face) == to_rgba("white")
    return f"{marker}/hollow" if hollow else str(marker)


def legend_lines(fig: Any) -> list[Any]:
    """Every Line2D handle of every legend of the figure (its own and its panels')."""
    from matplotlib.lines import Line2D

    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return [h for lg in legends for h in lg.legend_handles if isinstance(h, Line2D)]


def drawn_lines(fig: Any) -> list[Any]:
    return [line for ax in fig.axes for line in ax.get_lines()]


def assert_legend_matches(fig: Any) -> None:
    """Legend entries are told apart (no two share colour, line and marker) and each colour
    with a line or marker in the legend is drawn with that line style or that marker."""
    from matplotlib.lines import Line2D

    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    for legend in legends:
        own = [style(h) for h in legend.legend_handles if isinstance(h, Line2D)]
        assert len(set(own)) == len(own), own  # two entries that look alike
    handles = [h for h in legend_lines(fig) if h.get_label() and not h.get_label().startswith("_")]
    styles = [style(h) for h in handles]
    drawn = [style(line) for line in drawn_lines(fig)]
    gray = {(0.5019607843137255, 0.5019607843137255, 0.5019607843137255, 1.0)}
    for handle, (color, line, marker) in zip(handles, styles, strict=True):
        if color in gray:  # a style key (measured / reused / hidden size): drawn in every colour
            if line != "None":
                assert any(d[1] == line for d in drawn), handle.get_label()
            if marker != "None":
                assert any(d[2] == marker for d in drawn), (handle.get_label(), marker)
            continue
        same = [d for d in drawn if d[0] == color]
        assert same, f"{handle.get_label()!r}: no drawn line in its colour"
        if marker != "None":  # filled or hollow: that is the measured / reused key's job
            base = marker.split("/")[0]
            assert any(d[2].split("/")[0] == base for d in same), (handle.get_label(), marker)
        if line != "None":
            assert any(d[1] == line for d in same), f"{handle.get_label()!r}: line {line}"
        else:
            assert any(d[1] == "None" for d in same), f"{handle.get_label()!r}: drawn as a line"


def failed_marks(fig: Any) -> int:
    """How many red-x failure marks the figure draws."""
    return sum(
        len(line.get_xdata()) for line in drawn_lines(fig) if line.get_gid() == "npubench-failed"
    )
