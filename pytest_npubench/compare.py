"""Comparing a config's metrics with its baseline, and the verdict that follows.

:class:`Comparison` and :class:`ConfigResult` live in :mod:`pytest_npubench.outcome` (the
bench API's figure functions take them, so that module imports neither this one nor
:mod:`pytest_npubench.bench`); they are imported here under their old names.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_npubench.bench import Bench, Metric
from pytest_npubench.outcome import Comparison as Comparison
from pytest_npubench.outcome import ConfigResult as ConfigResult
from pytest_npubench.outcome import MetricVerdict as MetricVerdict
from pytest_npubench.outcome import Source as Source

#: Item verdicts, in the order the summaries list them (worst first).
VERDICTS = (
    "changed",
    "regression",
    "failed-check",
    "error",
    "new",
    "improved",
    "pass",
    "reused-baseline",
    "missing-baseline",
)


def relative_change(baseline: float, current: float) -> float | None:
    """(current - baseline) / |baseline|; 0 for equal values, None for a change from 0."""
    if current == baseline:
        return 0.0
    if baseline == 0:
        return None
    return (current - baseline) / abs(baseline)


def compare_metric(metric: Metric, baseline: float, current: float) -> Comparison:
    """The default comparison: relative tolerance, direction decides regression vs improvement;
    an exact counter (:meth:`Metric.is_counter`) that moved is ``changed``, never improved."""
    change = relative_change(baseline, current)
    if abs(current - baseline) <= metric.tolerance * abs(baseline):
        return Comparison("pass", change)
    if metric.is_counter(baseline, current):
        return Comparison("changed", change)
    worse = current > baseline if metric.direction == "lower" else current < baseline
    return Comparison("regression" if worse else "improved", change)


def counted(comparisons: Mapping[str, Comparison]) -> dict[str, Comparison]:
    """The comparisons of one config, with every ``improved`` made ``changed`` when an exact
    counter moved: the program did other work, so a number that fell with it (a total energy,
    a busy time) is explained by the count, not better (issue 26, issue 29)."""
    if not any(c.verdict == "changed" for c in comparisons.values()):
        return dict(comparisons)
    return {
        name: Comparison("changed", c.change) if c.verdict == "improved" else c
        for name, c in comparisons.items()
    }


def config_verdict(
    bench: Bench, baseline: Mapping[str, float] | None, comparisons: Mapping[str, Comparison]
) -> str:
    """The item verdict of a run whose functional check passed."""
    gated = [name for name, m in bench.metrics.items() if m.gate]
    if baseline is None or any(name not in baseline for name in gated):
        return "new"
    verdicts = {comparisons[name].verdict for name in gated}
    if "changed" in verdicts:  # a counter moved: other work was done, whatever the times say
        return "changed"
    if "regression" in verdicts:
        return "regression"
    if "improved" in verdicts:
        return "improved"
    return "pass"


#: item verdicts that fail a run whatever --npubench-allow-improvements says (not regen)
GATE_FAILURES = ("regression", "changed")


def verdict_rank(verdict: str) -> int:
    """Sort key: regressions first, reused baselines last."""
    return VERDICTS.index(verdict) if verdict in VERDICTS else len(VERDICTS)
