"""The one number formatter of every output (terminal, summary.md, index.html, regen lines).

A value is shown in engineering units chosen from its metric's declared unit, to three
significant figures:

- time (``ns``, ``us``/``µs``, ``ms``, ``s``): ``416 ns``, ``28.4 µs``, ``1.01 ms``, ``3.2 s``;
- bytes (``B``): ``512 B``, ``10 KiB``, ``1.15 MiB``, ``2 GiB`` (binary prefixes);
- rates (``GB/s``, ``TFLOP/s``, any ``<prefix><thing>/s``): ``512 GB/s``, ``1.23 TB/s``;
- anything else (``1``, ``elements``, ``FLOP/B``): whole numbers below 10,000 exactly
  (``2048``), larger ones with an SI suffix (``12.3 k``), fractions to three figures
  (``0.00478``).

No output ever shows ``1.01e+03 us`` or ``2.75251e+06``. Where three figures hide a change (a
counter that moved by 64 bytes in 2.6 MiB), :func:`format_change` adds the exact difference.
Only magnitudes below 1e-4 or beyond 1e18 of a plain number fall back to ``1.23e-05``.
"""

from __future__ import annotations

import math

#: a time unit's size in ns
TIME_UNITS = {"ps": 1e-3, "ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
_TIME_STEPS = (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0))
_BYTE_STEPS = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
_BYTE_UNITS = ("B", "bytes")
_SI_UP = (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))
_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_DIMENSIONLESS = ("", "1")


def sig3(value: float) -> str:
    """``value`` to three significant figures, never in exponent form for 1e-4 <= |v| < 1e18
    (``418``, ``28.4``, ``0.00478``, ``26.0``); trailing zeros are dropped only where the
    value is exact (``10`` KiB is 10240 bytes; ``26.0`` µs is 25.98 rounded)."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    magnitude = abs(value)
    if magnitude < 1e-4 or magnitude >= 1e18:
        return f"{value:.2e}"
    digits = 2 - math.floor(math.log10(magnitude))
    rounded = round(value, digits)
    if rounded != 0 and math.floor(math.log10(abs(rounded))) > math.floor(math.log10(magnitude)):
        digits -= 1  # 999.6 -> 1000, not 1000.0
        rounded = round(value, digits)
    if digits <= 0:
        return str(int(rounded))
    text = f"{rounded:.{digits}f}"
    if "." in text and float(text) == value:  # exact: 10 KiB; rounded keeps its zeros: 26.0
        text = text.rstrip("0").rstrip(".")
    return text


def _scaled(value: float, steps: tuple[tuple[str, float], ...], base: str) -> str:
    for name, size in steps:
        if abs(value) >= size * 0.9995:  # 999.96 µs reads as 1 ms, not 1000 µs
            return f"{sig3(value / size)} {name}"
    return f"{sig3(value)} {base}"


def _rate(value: float, unit: str) -> str | None:
    """``GB/s``, ``TFLOP/s``, ``MB/s``: rescale the prefix; None if ``unit`` is not a rate."""
    head, _, tail = unit.partition("/")
    if tail != "s" or not head:
        return None
    prefix, thing = (head[0], head[1:]) if head[0] in _SI and len(head) > 1 else ("", head)
    base = value * _SI[prefix]
    for name, size in _SI_UP:
        if abs(base) >= size * 0.9995:
            return f"{sig3(base / size)} {name}{thing}/s"
    return f"{sig3(base)} {thing}/s"


def format_value(value: float | None, unit: str) -> str:
    """One value in engineering units for its metric's ``unit`` (``-`` for none)."""
    if value is None:
        return "-"
    value = float(value)
    if unit in TIME_UNITS:
        return _scaled(value * TIME_UNITS[unit], _TIME_STEPS, "ns")
    if unit in _BYTE_UNITS:
        if value.is_integer() and abs(value) < 1024:
            return f"{int(value)} B"
        return _scaled(value, _BYTE_STEPS, "B")
    rate = _rate(value, unit)
    if rate is not None:
        return rate
    return _plain(value) + ("" if unit in _DIMENSIONLESS else f" {unit}")


def _plain(value: float) -> str:
    if value.is_integer() and abs(value) < 10_000:
        return str(int(value))
    if abs(value) >= 10_000:
        for name, size in _SI_UP:
            if abs(value) >= size * 0.9995:
                return f"{sig3(value / size)} {name}"
    return sig3(value)


def format_exact(value: float, unit: str) -> str:
    """A difference shown exactly (a counter's ``+64 B``, ``-1``), else to three figures."""
    value = float(value)
    sign = "+" if value > 0 else ""
    if value.is_integer() and abs(value) < 1e15:
        text = f"{int(value):,}".replace(",", "\u2009")  # thin space: 1 048 576
        if unit in _BYTE_UNITS:
            return f"{sign}{text} B"
        if unit in _DIMENSIONLESS:
            return f"{sign}{text}"
        if unit not in TIME_UNITS:
            return f"{sign}{text} {unit}"
    return sign + format_value(value, unit)


def format_percent(change: float | None) -> str:
    """A signed relative change: ``+0.58 %``, ``-12.5 %``, ``+0.0012 %``; ``inf`` from zero."""
    if change is None:
        return "from 0"
    if change == 0:
        return "0 %"
    pct = change * 100
    text = f"{pct:+.2f}" if abs(pct) >= 0.01 else f"{pct:+.2g}"
    return f"{text} %"


def format_change(old: float | None, new: float | None, unit: str) -> str:
    """``416 ns -> 418 ns``; when both read the same at three figures, the exact difference
    follows (``2.63 MiB -> 2.63 MiB (+64 B)``), so no moved value looks unchanged."""
    before, after = format_value(old, unit), format_value(new, unit)
    text = f"{before} -> {after}"
    if old is not None and new is not None and old != new and before == after:
        text += f" ({format_exact(float(new) - float(old), unit)})"
    return text


_NAME_SUFFIXES = {
    "ns": ("_ns",),
    "us": ("_us",),
    "µs": ("_us",),
    "ms": ("_ms",),
    "s": ("_s",),
    "GB/s": ("_gbs",),
}


def column_header(name: str, unit: str) -> str:
    """A table header for a metric whose cells carry their own (scaled) unit: the metric name
    without a unit suffix the cells may not use (``latency_ns`` over ``28.4 µs`` reads
    ``latency``; ``algbw_gbs`` over ``1.2 TB/s`` reads ``algbw``)."""
    for suffix in _NAME_SUFFIXES.get(unit, ()):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name
