"""What a calibration leaves behind: the YAML's header comment and the figure.

The header records what was fitted to what: the measured file and its sha256, the topology it
started from, the collective, algorithm and sizes, each fitted key with its bounds, start and
value, and the residual (geomean error) per size band and overall before and after. The
figure draws measured and simulated busbw against size, and their ratio below.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sim.calibrate.bands import BandErrors
from sim.calibrate.files import write_atomic
from sim.calibrate.fit import FitResult
from sim.calibrate.nccltests import bus_factor

__all__ = ["Curves", "busbw_gbs", "draw_figure", "header", "size_text", "tag"]


def size_text(nbytes: float) -> str:
    """8 B, 64 KiB, 8 GiB: a size as nccl-tests users read it."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            value = nbytes / (1 << shift)
            return f"{value:g} {unit}" if value == int(value) else f"{value:.3g} {unit}"
    return f"{nbytes:g} B"


def busbw_gbs(
    collective: str, ranks: int, sizes: Sequence[int], time_us: Sequence[float]
) -> list[float]:
    """nccl-tests' busbw (GB/s, 1e9 B) of each size from its time: size / time x the factor."""
    factor = bus_factor(collective, ranks)
    return [s / (t * 1e3) * factor if t > 0 else 0.0 for s, t in zip(sizes, time_us, strict=True)]


def tag(measured: str, residual: BandErrors) -> str:
    """The preset comment of a fitted value (docs/adr/0021 decision 4)."""
    overall = 100 * (residual.overall or 0.0)
    return f"calibrated: sim calibrate on {Path(measured).name}, residual {overall:.1f} %"


@dataclass(frozen=True)
class Curves:
    """What the header and the figure show: the sizes and their times (us) measured, simulated
    from the file's values (the start) and with the fitted values; ``exact`` False where the
    simulator's line was extended (:func:`sim.calibrate.evaluate.simulate`)."""

    collective: str
    algorithm: str
    ranks: int
    sizes: tuple[int, ...]
    measured_us: tuple[float, ...]
    start_us: tuple[float, ...]
    fitted_us: tuple[float, ...]
    exact: tuple[bool, ...]


def header(
    *,
    measured: str,
    sha256: str,
    topology: str,
    half: str,
    curves: Curves,
    result: FitResult,
    before: BandErrors,
    after: BandErrors,
    figure: str,
) -> list[str]:
    """The calibrated YAML's header comment, one string per line (each starts with ``#``)."""
    lines = [
        "# Calibrated by `python -m sim calibrate` (sim.calibrate); edit the source files and",
        "# run it again rather than editing the fitted values by hand.",
        f"# measured: {measured}",
        f"#   sha256 {sha256}",
        f"#   {curves.collective}, {curves.ranks} ranks, {len(curves.sizes)} sizes "
        f"{size_text(min(curves.sizes))} .. {size_text(max(curves.sizes))}, {half} times",
        f"# topology: {topology} (algorithm {curves.algorithm})",
        "# fitted (bounds; start -> value):",
    ]
    for key, literal in zip(result.keys, result.literals, strict=True):
        lines.append(
            f"#   {key.key} = {literal} ({key.lo:g} .. {key.hi:g}; {key.spot.text} -> {literal})"
        )
    lines.append("# residual (geomean of |simulated / measured time - 1| over sizes):")
    lines.append(f"#   before: {before.describe()}")
    lines.append(f"#   after:  {after.describe()}")
    extended = [s for s, e in zip(curves.sizes, curves.exact, strict=True) if not e]
    if extended:
        lines.append(
            f"#   sizes from {size_text(min(extended))} were beyond what the simulator can run "
            "and extend the line of the two largest simulated sizes"
        )
    capped = " (stopped at the evaluation cap)" if result.capped else ""
    lines.append(f"# {result.evaluations} evaluations{capped}; figure: {figure}")
    return lines


def draw_figure(path: Path, curves: Curves, title: str) -> Path:
    """Measured and simulated busbw against size (start dashed, fitted solid), and the ratio
    simulated / measured busbw below; written atomically as a PNG without timestamps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    sizes = list(curves.sizes)
    bw = {
        name: busbw_gbs(curves.collective, curves.ranks, sizes, times)
        for name, times in (
            ("measured", curves.measured_us),
            ("start", curves.start_us),
            ("fitted", curves.fitted_us),
        )
    }
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(11, 8.5), sharex=True, gridspec_kw={"height_ratios": [2, 1]}
    )
    fig.suptitle(title, fontsize=10)
    top.plot(sizes, bw["measured"], "o", color="black", label="measured", markersize=5)
    top.plot(sizes, bw["start"], "--", color="#999999", label="simulated, file's values")
    top.plot(sizes, bw["fitted"], "-", color="#c44e52", label="simulated, fitted values")
    top.set_yscale("log")
    top.set_ylabel("busbw (GB/s, from time: size / time x bus factor)")
    top.legend(fontsize=8, loc="upper left")
    ratios = [f / m if m > 0 else 1.0 for f, m in zip(bw["fitted"], bw["measured"], strict=True)]
    start = [s / m if m > 0 else 1.0 for s, m in zip(bw["start"], bw["measured"], strict=True)]
    bottom.plot(sizes, start, "--", color="#999999")
    bottom.plot(sizes, ratios, "o-", color="#c44e52", markersize=4)
    bottom.axhline(1.0, color="black", linewidth=0.8)
    bottom.set_yscale("log", base=2)
    bottom.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:.3g}"))
    bottom.set_ylabel("simulated / measured busbw")
    for ax in (top, bottom):
        ax.set_xscale("log", base=2)
        for edge in (1 << 20, 64 << 20):
            ax.axvline(edge, color="#dddddd", linewidth=0.8, zorder=0)
        ax.grid(True, which="major", alpha=0.3)
    bottom.set_xlabel("message size (bytes; bands split at 1 MiB and 64 MiB)")
    ticks = [s for i, s in enumerate(sizes) if i % max(1, len(sizes) // 12) == 0]
    bottom.set_xticks(ticks)
    bottom.set_xticklabels([size_text(s) for s in ticks], rotation=45, ha="right")
    bottom.minorticks_off()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return write_atomic(path, buffer.getvalue())
