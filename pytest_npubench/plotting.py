"""Small helpers that bench figure functions share: time units, measured-vs-reused styling,
and one way to save a PNG reproducibly and cheaply.

Every figure says which of its points were measured in this run and which were reused from
the baseline (regen-only configs a normal run does not simulate): measured points are drawn
filled, reused ones hollow (or pale), and the subtitle counts both (:func:`provenance`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_npubench.compare import ConfigResult

#: (threshold in ns, divisor, unit): a time >= threshold is shown in that unit
_TIME_UNITS = ((1e9, 1e9, "s"), (1e6, 1e6, "ms"), (1e3, 1e3, "µs"), (0.0, 1.0, "ns"))
REUSED_ALPHA = 0.35


def time_unit(largest_ns: float) -> tuple[float, str]:
    """The divisor and unit (ns, µs, ms, s) in which ``largest_ns`` reads as 1 .. 999."""
    for threshold, divisor, unit in _TIME_UNITS:
        if largest_ns >= threshold:
            return divisor, unit
    return 1.0, "ns"


def format_ns(value_ns: float) -> str:
    """A time in ns as 3 significant figures in its own unit: ``1.5 µs``, ``210 ms``."""
    divisor, unit = time_unit(abs(value_ns))
    return f"{value_ns / divisor:.3g} {unit}"


def ns_tick_formatter() -> Any:
    """A matplotlib formatter for an axis whose values are ns: each tick in its own unit."""
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _pos: format_ns(value) if value > 0 else "0")


def measured(result: ConfigResult) -> bool:
    """True if this run simulated the config; False if its values were reused."""
    return result.source == "run"


def provenance(results: Iterable[ConfigResult], where: str = "") -> str:
    """``65 configs on hw: 33 measured in this run, 32 reused from the baseline (not re-run)``."""
    listed = list(results)
    ran = sum(measured(r) for r in listed)
    plural = "" if len(listed) == 1 else "s"
    text = f"{len(listed)} config{plural}{where}: {ran} measured in this run"
    if len(listed) - ran:
        text += f", {len(listed) - ran} reused from the baseline (regen-only, not re-run)"
    return text


def markers(
    ax: Any, xs: list[Any], ys: list[float], rows: list[ConfigResult], color: str, **style: Any
) -> None:
    """One marker per config, filled where measured in this run and hollow where reused: two
    ``plot`` calls per series, not one per point (each Line2D costs about a millisecond)."""
    for ran in (True, False):
        sel = [(x, y) for x, y, r in zip(xs, ys, rows, strict=True) if measured(r) == ran]
        if sel:
            ax.plot(
                [x for x, _ in sel],
                [y for _, y in sel],
                linestyle="none",
                color=color,
                markerfacecolor=color if ran else "white",
                **{"marker": "o", **style},
            )


def provenance_handles(prefix: str = "") -> list[Any]:
    """Legend entries for the two marker styles: filled = measured, hollow = reused."""
    from matplotlib.lines import Line2D

    style: dict[str, Any] = {"color": "gray", "marker": "o", "linestyle": "none"}
    return [
        Line2D([], [], **style, label=f"{prefix}measured in this run"),
        Line2D([], [], **style, markerfacecolor="white", label=f"{prefix}reused from the baseline"),
    ]


def bars(ax: Any, xs: list[float], heights: list[float], width: float, colors: list[Any]) -> None:
    """Vertical bars from 0 as one collection: a figure of many small panels pays per artist
    (``ax.bar`` makes and lays out one Rectangle per bar)."""
    from matplotlib.collections import PolyCollection

    verts = [
        [(x - width / 2, 0.0), (x - width / 2, h), (x + width / 2, h), (x + width / 2, 0.0)]
        for x, h in zip(xs, heights, strict=True)
    ]
    ax.add_collection(PolyCollection(verts, facecolors=colors, edgecolors="none"))
    ax.update_datalim([(x, h) for x, h in zip(xs, heights, strict=True)] + [(xs[0], 0.0)])
    ax.autoscale_view()


def titled(ax: Any, text: str, **style: Any) -> None:
    """``ax.set_title`` at a fixed height: an automatic one measures the axis ticks of every
    panel to dodge them (a sixth of a many-panel figure's drawing time)."""
    ax.set_title(text, y=1.0, pad=4, **style)


def save(fig: Any, path: Path, dpi: int = 100) -> Path:
    """Save without a timestamp or software tag (byte-reproducible), then close the figure."""
    import matplotlib.pyplot as plt

    # zlib level 3: about as small as matplotlib's default 6 here, and faster to encode
    fig.savefig(path, dpi=dpi, metadata={"Software": None}, pil_kwargs={"compress_level": 3})
    plt.close(fig)
    return path
