"""Small helpers that bench figure functions share: time units, measured-vs-reused styling,
and one way to save a PNG reproducibly and cheaply.

Every figure says which of its points were measured in this run and which were reused from
the baseline (regen-only configs a normal run does not simulate): measured points are drawn
filled, reused ones hollow (or pale), and the subtitle counts both (:func:`provenance`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_npubench import figure_context
from pytest_npubench.compare import ConfigResult

#: (threshold in ns, divisor, unit): a time >= threshold is shown in that unit
_TIME_UNITS = ((1e9, 1e9, "s"), (1e6, 1e6, "ms"), (1e3, 1e3, "µs"), (0.0, 1.0, "ns"))
REUSED_ALPHA = 0.35
FAILED_COLOR = "#d62728"
#: verdicts that mark a config failed when no plugin context says which failed (a notebook)
FAILED_VERDICTS = frozenset({"regression", "failed-check", "error", "new"})
BANNER_LINE_IN = 0.2  # inches of figure height per banner line


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
    mark_failed(ax, xs, ys, rows)


def failed(result: ConfigResult) -> bool:
    """True if this config's item failed in this run (the plugin's context says which;
    without one, its verdict)."""
    context = figure_context.current()
    if context is not None:
        return result.config_id in context.failed
    return result.verdict in FAILED_VERDICTS


def mark_failed(ax: Any, xs: list[Any], ys: list[float], rows: list[ConfigResult]) -> int:
    """A red x over each point of a failed config (one ``plot`` call); how many were marked."""
    sel = [(x, y) for x, y, r in zip(xs, ys, rows, strict=True) if failed(r)]
    if sel:
        ax.plot(
            [x for x, _ in sel],
            [y for _, y in sel],
            linestyle="none",
            marker="x",
            markersize=11,
            markeredgewidth=2.2,
            color=FAILED_COLOR,
            zorder=10,
            gid="npubench-failed",
        )
    return len(sel)


def failed_handle() -> Any:
    """The legend entry of :func:`mark_failed`'s marker."""
    from matplotlib.lines import Line2D

    return Line2D(
        [],
        [],
        linestyle="none",
        marker="x",
        markersize=9,
        markeredgewidth=2.2,
        color=FAILED_COLOR,
        label="failed in this run",
    )


def any_failed(results: Iterable[ConfigResult]) -> bool:
    """Whether a legend needs :func:`failed_handle`."""
    return any(failed(r) for r in results)


def banner(fig: Any) -> list[str]:
    """Stamp the run's banner (partial run, what-if, failures: ``figure_context``) in red
    above the figure, the figure grown to make room so nothing is covered; the lines."""
    context = figure_context.current()
    lines = [] if context is None else context.banner()
    if not lines:
        return []
    width, height = fig.get_size_inches()
    extra = BANNER_LINE_IN * len(lines) + 0.1
    scale = height / (height + extra)
    fig.set_size_inches(width, height + extra, forward=False)
    for ax in fig.axes:  # keep every panel, text and title where it was, in inches
        box = ax.get_position(original=True)
        ax.set_position([box.x0, box.y0 * scale, box.width, box.height * scale])
    texts = list(fig.texts)  # the suptitle is one of them (Figure.text): moved once
    if fig._suptitle is not None and all(fig._suptitle is not t for t in texts):
        texts.append(fig._suptitle)
    for text in texts:
        x, y = text.get_position()
        text.set_position((x, y * scale))
    for legend in fig.legends:
        anchor = legend.get_bbox_to_anchor().transformed(fig.transFigure.inverted())
        legend.set_bbox_to_anchor(
            (anchor.x0, anchor.y0 * scale, anchor.width, anchor.height * scale),
            transform=fig.transFigure,
        )
    fig.text(
        0.5,
        1 - 0.05 / (height + extra),
        "\n".join(lines),
        ha="center",
        va="top",
        color=FAILED_COLOR,
        fontsize=9,
        fontweight="bold",
        gid="npubench-banner",
    )
    return lines


def drawn_failures() -> bool:
    """The plugin's context says a config with values to draw failed in this run."""
    context = figure_context.current()
    return context is not None and len(context.failed) > len(context.failed_unplotted)


def provenance_handles(
    prefix: str = "", results: Iterable[ConfigResult] | None = None, marker: str = "o"
) -> list[Any]:
    """Legend entries for the two marker styles: filled = measured, hollow = reused (given
    ``results``, only the styles they use); and the red x of a failed config when any drawn
    failed (in ``results``, or per the context)."""
    from matplotlib.lines import Line2D

    style: dict[str, Any] = {"color": "gray", "marker": marker, "linestyle": "none"}
    listed = None if results is None else list(results)
    handles = []
    if listed is None or any(measured(r) for r in listed):
        handles.append(Line2D([], [], **style, label=f"{prefix}measured in this run"))
    if listed is None or not all(measured(r) for r in listed):
        handles.append(
            Line2D(
                [], [], **style, markerfacecolor="white", label=f"{prefix}reused from the baseline"
            )
        )
    shown = any_failed(listed) if listed is not None else drawn_failures()
    return handles + ([failed_handle()] if shown else [])


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

    banner(fig)
    # zlib level 3: about as small as matplotlib's default 6 here, and faster to encode
    fig.savefig(path, dpi=dpi, metadata={"Software": None}, pil_kwargs={"compress_level": 3})
    plt.close(fig)
    return path


def nice_log_ticks(low: float, high: float, margin: float = 1.15) -> list[float]:
    """Limits ``low / margin`` and ``high * margin`` (both > 0), then every 1, 2, 3, 5 x 10^k
    between them (with 1.5 and 7 if that gives fewer than three): the ticks of a log axis
    that labels every decade and is never left without a label across its data."""
    if not 0 < low <= high:
        raise ValueError(f"log ticks need 0 < low <= high, got {low!r}, {high!r}")
    lo, hi = low / margin, high * margin
    for steps in ((1, 2, 3, 5), (1, 1.5, 2, 3, 5, 7)):
        ticks = [
            step * 10.0**exponent
            for exponent in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
            for step in steps
            if lo <= step * 10.0**exponent <= hi
        ]
        if len(ticks) >= 3:
            break
    return [lo, *ticks, hi] if len(ticks) < 2 else ticks


def log_time_axis(ax: Any, values: Iterable[float]) -> list[float]:
    """A log y axis of times in ns, its limits at 1-2-5 ticks around ``values``, each tick
    labelled in its own unit (``ns_tick_formatter``), no unlabelled minor ticks; the ticks."""
    from matplotlib.ticker import NullFormatter, NullLocator

    shown = [v for v in values if v > 0]
    low, high = min(shown), max(shown)
    ticks = nice_log_ticks(low, high)
    ax.set_yscale("log")
    ax.set_ylim(low / 1.15, high * 1.15)
    ax.set_yticks(ticks)
    ax.yaxis.set_major_formatter(ns_tick_formatter())
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())
    return ticks


TIMES = "\N{MULTIPLICATION SIGN}"
_SUPERSCRIPTS = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def power_label(value: float, base: int = 10) -> str:
    """A log tick's label as plain text: ``10⁻¹``, ``10²``, ``2¹¹``, 2 times 10³ (the look of
    matplotlib's default mathtext labels, without parsing mathtext for each figure)."""
    if value <= 0:
        return f"{value:g}"
    exponent = math.floor(math.log(value, base) + 1e-9)
    mantissa = value / base**exponent
    if math.isclose(mantissa, round(mantissa), rel_tol=1e-6) and round(mantissa) == base:
        mantissa, exponent = 1.0, exponent + 1
    power = f"{base}{str(exponent).translate(_SUPERSCRIPTS)}"
    if math.isclose(mantissa, 1.0, rel_tol=1e-6):
        return power
    return f"{mantissa:.3g}{TIMES}{power}"


def minor_log_values(low: float, high: float, base: int = 10) -> list[float]:
    """The unlabelled minor ticks of a log axis from ``low`` to ``high`` (as matplotlib's
    ``LogLocator(subs='auto')`` puts them): 2 .. base-1 times each power, none when ten or
    more powers are in view."""
    low, high = sorted((low, high))
    if low <= 0 or base < 3:
        return []
    first = math.floor(math.log(low, base))
    last = math.ceil(math.log(high, base))
    powers = [base**k for k in range(first, last + 1)]
    if sum(low <= p <= high for p in powers) >= 10:
        return []
    return [m * p for p in powers for m in range(2, base) if low <= m * p <= high]


def log_axis(
    ax: Any,
    which: str = "y",
    base: int = 10,
    minor: bool = True,
    minor_grid: float | None = None,
) -> None:
    """Put ``ax``'s x or y axis on a log scale: the powers labelled as plain text
    (:func:`power_label`); its unlabelled minor ticks (unless not ``minor``) and, given
    ``minor_grid`` (an alpha), their grid lines, each drawn as one line (``MinorLogTicks``)
    where matplotlib builds a Tick of three lines and two texts per minor tick (the most
    expensive part of a log panel). Call it instead of ``set_xscale``/``set_yscale``, and
    ``ax.grid`` after it as before (it draws the major grid lines)."""
    from matplotlib.ticker import FuncFormatter, NullLocator

    if which == "y":
        ax.set_yscale("log", base=base)
        shared = ax.get_shared_y_axes().get_siblings(ax)
    else:
        ax.set_xscale("log", base=base)
        shared = ax.get_shared_x_axes().get_siblings(ax)
    for sibling in shared:  # the scale was set on each: so are its ticks
        axis = sibling.yaxis if which == "y" else sibling.xaxis
        axis.set_major_locator(_log_major_locator_class()(base=base))
        axis.set_major_formatter(FuncFormatter(lambda value, _pos: power_label(value, base)))
        axis.set_minor_locator(NullLocator())
    ticks = _minor_log_ticks_class()
    if minor:
        ax.add_artist(ticks(ax, which, base, ticks=True))
    if minor_grid is not None:
        ax.add_artist(ticks(ax, which, base, ticks=False, alpha=minor_grid))


@functools.cache
def _log_major_locator_class() -> Any:
    from matplotlib.ticker import LogLocator

    class LogMajorLocator(LogLocator):
        """matplotlib's major log locator, but with 1, 2, 5 times each power when the view spans
        at most one power (where matplotlib would label minor ticks instead)."""

        def __init__(self, base: float = 10.0, **kwargs: Any) -> None:
            super().__init__(base=base, **kwargs)
            self._npubench_base = base

        def tick_values(self, vmin: float, vmax: float) -> Any:
            low, high = sorted((vmin, vmax))
            base = self._npubench_base
            if low > 0 and math.log(high / low, base) <= 1:
                first = math.floor(math.log(low, base))
                ticks = [
                    m * base**k
                    for k in range(first, first + 2)
                    for m in (1, 2, 5)
                    if low <= m * base**k <= high
                ]
                if len(ticks) >= 2:
                    return ticks
            return super().tick_values(vmin, vmax)

    return LogMajorLocator


@functools.cache
def _minor_log_ticks_class() -> Any:
    from matplotlib import markers as mmarkers
    from matplotlib import rcParams as rc_params
    from matplotlib.artist import Artist
    from matplotlib.lines import Line2D

    class MinorLogTicks(Artist):
        """A log axis' minor ticks (or their grid lines) as one line, placed when drawn from
        the axis' final limits and tick side, in the style of matplotlib's own minor ticks
        and grid. Not a Line2D itself, so ``ax.get_lines()`` lists the data only."""

        def __init__(
            self, ax: Any, which: str, base: int, ticks: bool, alpha: float | None = None
        ) -> None:
            super().__init__()
            self._which, self._base, self._ticks = which, base, ticks
            rcParams: Any = rc_params  # indexed by composed keys below
            style: dict[str, Any]
            if ticks:
                style = {
                    "linestyle": "none",
                    "markersize": rcParams[f"{which}tick.minor.size"],
                    "markeredgewidth": rcParams[f"{which}tick.minor.width"],
                    "color": rcParams[f"{which}tick.color"],
                }
            else:
                style = {
                    "color": rcParams["grid.color"],
                    "linestyle": rcParams["grid.linestyle"],
                    "linewidth": rcParams["grid.linewidth"],
                    "alpha": alpha,
                }
            self._line = Line2D([], [], **style)
            self._line.set_transform(
                ax.get_yaxis_transform() if which == "y" else ax.get_xaxis_transform()
            )
            self.set_zorder(2.5 if ticks else 1.5)
            self.set_gid("npubench-minor-ticks" if ticks else "npubench-minor-grid")

        def draw(self, renderer: Any) -> None:
            ax: Any = self.axes
            line = self._line
            axis = ax.yaxis if self._which == "y" else ax.xaxis
            if not self.get_visible() or not axis.get_visible():
                return
            low, high = ax.get_ylim() if self._which == "y" else ax.get_xlim()
            values = minor_log_values(low, high, base=self._base)
            line.set_figure(ax.figure)
            if self._ticks:
                side = axis.get_ticks_position()
                far = side in ("right", "top")
                marker: Any  # matplotlib's TICK* constants, typed int
                if self._which == "y":
                    marker = mmarkers.TICKRIGHT if far else mmarkers.TICKLEFT
                else:
                    marker = mmarkers.TICKUP if far else mmarkers.TICKDOWN
                line.set_marker(marker)
                across, along = [1.0 if far else 0.0] * len(values), values
                line.set_clip_on(False)
            else:
                across = [v for _ in values for v in (0.0, 1.0, math.nan)]
                along = [v for value in values for v in (value, value, math.nan)]
                line.set_clip_path(ax.patch)
            line.set_data(*((across, along) if self._which == "y" else (along, across)))
            line.draw(renderer)
            self.stale = False

    return MinorLogTicks
