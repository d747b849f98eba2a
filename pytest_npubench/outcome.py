"""What one config of a session came to: its metric comparisons and its result.

These are the records the plugin hands to a bench's ``figures`` and to the hooks. This module
imports neither :mod:`pytest_npubench.bench` nor :mod:`pytest_npubench.compare` (both import
it): :meth:`ConfigResult.from_payload` needs only a bench's ``config(config_id).params``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pytest_npubench.jsonable import json_params

MetricVerdict = Literal["pass", "regression", "improved", "changed"]
#: what a metric's comparison can say: ``changed`` is an exact counter that moved (neither
#: better nor worse: the program does other work)
METRIC_VERDICTS = ("pass", "regression", "improved", "changed")
Source = Literal["run", "baseline"]


class _Config(Protocol):
    @property
    def params(self) -> Mapping[str, Any]: ...


class ConfigLookup(Protocol):
    """What :meth:`ConfigResult.from_payload` needs of a bench: its configs by id."""

    def config(self, config_id: str) -> _Config: ...


@dataclass(frozen=True)
class Comparison:
    """The verdict on one metric against its baseline value.

    ``change`` is the relative change ``(current - baseline) / |baseline|``; it is None when the
    baseline is 0 and the current value is not (an infinite relative change).
    """

    verdict: MetricVerdict
    change: float | None

    def __post_init__(self) -> None:
        if self.verdict not in METRIC_VERDICTS:
            raise ValueError(
                f"Comparison verdict {self.verdict!r} is invalid; use 'pass', 'regression', "
                "'improved' or 'changed'"
            )


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
    def from_payload(cls, payload: str, bench: ConfigLookup) -> ConfigResult:
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
