"""A failing config in one line, headline first (issue 27): the bench's headline metric and its
change, then how many more gated metrics moved beyond tolerance and the largest of them.

Every output that lists failing configs (the terminal, summary.md, index.html, the first line
of a failure message) uses :func:`headline_line`; tables of a config's metrics list them in
:func:`ranked_metrics` order: the headline pinned first, the rest by relative change.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_npubench.bench import Bench
from pytest_npubench.numbers import format_change, format_percent, format_value
from pytest_npubench.outcome import ConfigResult

#: item verdicts of a config that failed its gate on metric values (not a check or an error)
GATE_VERDICTS = ("regression", "changed", "improved")


def _size(change: float | None) -> float:
    return float("inf") if change is None else abs(change)


def moved(bench: Bench, result: ConfigResult) -> list[str]:
    """The gated metrics beyond tolerance, largest relative change first (sweep order ties)."""
    names = [
        n
        for n, c in result.comparisons.items()
        if c.verdict != "pass" and n in bench.metrics and bench.metrics[n].gate
    ]
    order = {n: i for i, n in enumerate(bench.metrics)}
    return sorted(names, key=lambda n: (-_size(result.comparisons[n].change), order[n]))


def ranked_metrics(bench: Bench, result: ConfigResult, names: Sequence[str] = ()) -> list[str]:
    """The headline metric first, then the metrics that moved beyond tolerance (``names`` if
    given, else :func:`moved`) by relative change, largest first."""
    head = bench.headline_metric
    rest = [n for n in (names or moved(bench, result)) if n != head]
    order = {n: i for i, n in enumerate(bench.metrics)}
    rest.sort(key=lambda n: (-_size(_change(result, n)), order.get(n, 0)))
    return [head, *rest] if head in result.metrics else rest


def _change(result: ConfigResult, name: str) -> float | None:
    comparison = result.comparisons.get(name)
    return comparison.change if comparison is not None else 0.0


def metric_change(bench: Bench, result: ConfigResult, name: str) -> str:
    """``latency_ns +0.58 % (416 ns -> 418 ns)``: one metric's change in engineering units."""
    unit = bench.metrics[name].unit
    old = (result.baseline or {}).get(name)
    new = result.metrics.get(name)
    comparison = result.comparisons.get(name)
    if comparison is None or old is None:
        return f"{name} {format_value(new, unit)} (no baseline)"
    return f"{name} {format_percent(comparison.change)} ({format_change(old, new, unit)})"


def headline_line(bench: Bench, result: ConfigResult, most: int = 2) -> str:
    """One line for a config that moved: ``latency_ns +0.58 % (416 ns -> 418 ns); 5 more
    metrics moved: dma_out.inflight_ns +0.71 %, dma_in.inflight_ns +0.65 %, +3 more``
    ("moved" is beyond tolerance; a headline within it says so)."""
    head = bench.headline_metric
    others = [n for n in moved(bench, result) if n != head]
    comparison = result.comparisons.get(head)
    if head in result.metrics and comparison is not None:
        text = metric_change(bench, result, head)
        if comparison.verdict == "pass":
            text = text[:-1] + f", within {bench.metrics[head].tolerance * 100:g} %)"
    elif others:
        text = f"{head} not compared"
    else:
        return result.message.splitlines()[0] if result.message else result.verdict
    if not others:
        return text
    shown = ", ".join(f"{n} {format_percent(result.comparisons[n].change)}" for n in others[:most])
    extra = f", +{len(others) - most} more" if len(others) > most else ""
    plural = "metric" if len(others) == 1 else "metrics"
    return f"{text}; {len(others)} more {plural} moved: {shown}{extra}"


def counters_changed(bench: Bench, result: ConfigResult) -> list[str]:
    """The gated exact counters of this config that changed."""
    return [n for n in moved(bench, result) if result.comparisons[n].verdict == "changed"]


COUNTER_NOTE = (
    "an exact counter changed ({names}): the program now moves, counts or holds other amounts "
    "than the baseline says; a count is neither better nor worse by itself, so find out why "
    "(a skipped step or transfer reads as 'fewer') before accepting it"
)
