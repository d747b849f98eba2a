"""Comparing a config's metrics with its baseline, and the verdict that follows."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_npubench.bench import Bench, Metric, json_params

MetricVerdict = Literal["pass", "regression", "improved"]
Source = Literal["run", "baseline"]

#: Item verdicts, in the order the summaries list them (worst first).
VERDICTS = (
    "regression",
    "failed-check",
    "error",
    "new",
    "improved",
    "pass",
    "reused-baseline",
    "missing-baseline",
)


@dataclass(frozen=True)
class Comparison:
    """The verdict on one metric against its baseline value.

    ``change`` is the relative change ``(current - baseline) / |baseline|``; it is None when the
    baseline is 0 and the current value is not (an infinite relative change).
    """

    verdict: MetricVerdict
    change: float | None

    def __post_init__(self) -> None:
        if self.verdict not in ("pass", "regression", "improved"):
            raise ValueError(
                f"Comparison verdict {self.verdict!r} is invalid; use 'pass', 'regression' "
                "or 'improved'"
            )


def relative_change(baseline: float, current: float) -> float | None:
    """(current - baseline) / |baseline|; 0 for equal values, None for a change from 0."""
    if current == baseline:
        return 0.0
    if baseline == 0:
        return None
    return (current - baseline) / abs(baseline)


def compare_metric(metric: Metric, baseline: float, current: float) -> Comparison:
    """The default comparison: relative tolerance, direction decides regression vs improvement."""
    change = relative_change(baseline, current)
    if abs(current - baseline) <= metric.tolerance * abs(baseline):
        return Comparison("pass", change)
    worse = current > baseline if metric.direction == "lower" else current < baseline
    return Comparison("regression" if worse else "improved", change)


@dataclass(frozen=True)
class ConfigResult:
    """The outcome of one config in this session, as the controller gathered it.

    ``metrics`` are this run's values, or for a skipped regen-only config the baseline values
    (``source == "baseline"``). ``params`` are the config's parameters as given in the sweep.
    """

    bench: str
    config_id: str
    params: Mapping[str, Any]
    metrics: dict[str, float]
    baseline: dict[str, float] | None
    verdict: str
    source: Source
    message: str = ""
    comparisons: dict[str, Comparison] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-friendly dict of everything but the bench name (results.json, payloads)."""
        return {
            "params": json_params(self.params),
            "metrics": dict(self.metrics),
            "baseline": None if self.baseline is None else dict(self.baseline),
            "verdict": self.verdict,
            "source": self.source,
            "message": self.message,
            "changes": {name: c.change for name, c in self.comparisons.items()},
            "comparisons": {name: c.verdict for name, c in self.comparisons.items()},
        }

    def to_payload(self) -> str:
        """This result as one JSON string, to travel in ``report.user_properties``."""
        data = self.to_json()
        del data["params"]  # the controller re-creates them from the bench's own sweep
        data["bench"] = self.bench
        data["config_id"] = self.config_id
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_payload(cls, payload: str, bench: Bench) -> ConfigResult:
        """Rebuild a result sent by :meth:`to_payload`; params come from the bench's sweep."""
        data = json.loads(payload)
        changes: dict[str, float | None] = data["changes"]
        return cls(
            bench=data["bench"],
            config_id=data["config_id"],
            params=bench.config(data["config_id"]).params,
            metrics=data["metrics"],
            baseline=data["baseline"],
            verdict=data["verdict"],
            source=data["source"],
            message=data["message"],
            comparisons={
                name: Comparison(verdict, changes[name])
                for name, verdict in data["comparisons"].items()
            },
        )


def config_verdict(
    bench: Bench, baseline: Mapping[str, float] | None, comparisons: Mapping[str, Comparison]
) -> str:
    """The item verdict of a run whose functional check passed."""
    gated = [name for name, m in bench.metrics.items() if m.gate]
    if baseline is None or any(name not in baseline for name in gated):
        return "new"
    verdicts = {comparisons[name].verdict for name in gated}
    if "regression" in verdicts:
        return "regression"
    if "improved" in verdicts:
        return "improved"
    return "pass"


def verdict_rank(verdict: str) -> int:
    """Sort key: regressions first, reused baselines last."""
    return VERDICTS.index(verdict) if verdict in VERDICTS else len(VERDICTS)
