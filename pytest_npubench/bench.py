"""The bench API: what a bench module declares, validated eagerly in the constructors.

A bench is a name, a sweep (the cartesian product of named parameter lists, or a union of
such products, each a :class:`Sweep` with its own gate rule), a run function that turns one
point of the sweep into a :class:`Result`, and the :class:`Metric` spec of what the result
measures. This module knows nothing of pytest: it is plain data plus validation.
"""

from __future__ import annotations

import itertools
import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pytest_npubench.jsonable import flat_content as flat_content
from pytest_npubench.jsonable import json_params as json_params
from pytest_npubench.jsonable import json_value as json_value
from pytest_npubench.outcome import ConfigResult

Params = dict[str, Any]
Direction = Literal["lower", "higher"]
FiguresFn = Callable[[dict[str, ConfigResult], Path], Sequence[Path]]
ExplainFn = Callable[[Mapping[str, float], Mapping[str, float]], Sequence[str]]
TraceFn = Callable[[Params, Path, int], Any]
Axes = Mapping[str, Sequence[Any]]

#: units of a count: a gated tolerance-0 metric in one of them is an exact counter
COUNT_UNITS = frozenset({"1", "B", "bytes", "elements", "records", "count"})
#: units of time: the default headline is a bench's first gated metric in one of them
TIME_UNITS = frozenset({"ps", "ns", "us", "µs", "ms", "s"})

_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")
RESERVED_NAMES = frozenset({"all"})


class ResultError(Exception):
    """A run function returned something that is not a valid :class:`Result` for its bench."""


def is_real_number(value: object) -> bool:
    """True for finite ints and floats (numpy scalars included), False for bool, NaN and inf."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int beyond float range
        return False


@dataclass(frozen=True)
class Metric:
    """What one metric means: its unit, which direction is better, and how much change is noise.

    ``tolerance`` is relative: ``0.001`` lets the metric move by 0.1 % of its baseline value.
    A metric with ``gate=False`` is recorded and reported but never fails an item.

    ``counter`` marks an exact count (buffers, transfers, records, bytes): any change to it is
    a change of what the program does, reported as ``changed`` (it fails, and is never called
    an improvement, whatever ``direction`` says). ``None`` (the default) infers it: a gated
    metric with tolerance 0 whose unit is a count (:data:`COUNT_UNITS`) and whose baseline
    and current values are whole numbers (:meth:`is_counter`).
    """

    unit: str
    direction: Direction
    tolerance: float = 0.0
    gate: bool = True
    counter: bool | None = None

    def __post_init__(self) -> None:
        if self.direction not in ("lower", "higher"):
            raise ValueError(
                f"Metric direction {self.direction!r} is invalid; use 'lower' or 'higher' "
                "(which way is better)"
            )
        if not is_real_number(self.tolerance) or self.tolerance < 0:
            raise ValueError(
                f"Metric tolerance {self.tolerance!r} is invalid; use a relative tolerance >= 0 "
                "(0.001 = 0.1 %)"
            )
        if not isinstance(self.unit, str):
            raise TypeError(f"Metric unit must be a string, got {self.unit!r}")
        if self.counter is not None and not isinstance(self.counter, bool):
            raise TypeError(f"Metric counter must be True, False or None, got {self.counter!r}")

    def is_counter(self, *values: float) -> bool:
        """True if this metric is an exact count: declared ``counter=True``, or (``counter``
        left ``None``) gated at tolerance 0 in a count unit with whole-number ``values``."""
        if self.counter is not None:
            return self.counter
        return (
            self.gate
            and self.tolerance == 0
            and self.unit in COUNT_UNITS
            and all(float(v).is_integer() for v in values)
        )


@dataclass(frozen=True)
class Result:
    """What one run of one config produced: its metrics and the outcome of its functional check."""

    metrics: Mapping[str, float]
    ok: bool = True
    message: str = ""


@dataclass(frozen=True)
class BenchConfig:
    """One point of a bench's sweep: its id, its params as given in the sweep, its regen flag."""

    config_id: str
    params: Mapping[str, Any]
    regen_only: bool


def _default_config_id(params: Params) -> str:
    return "-".join(str(v) for v in params.values())


@dataclass(frozen=True)
class Sweep:
    """One group of a bench's sweep: the cartesian product of ``axes``, first axis slowest.

    ``gated`` says which of the group's configs run in every gated run: ``True`` (all),
    ``False`` (none: all regen-only) or a predicate on a config's params; ``None`` leaves it
    to the bench's ``regen_only=`` (default: all gated). ``config_id`` names the group's
    configs (default: the bench's ``config_id=``). A bench's ``sweep=`` is one dict of axes
    (one group, gated by ``regen_only=``), one :class:`Sweep`, or a list of them: the union,
    listed group after group.
    """

    axes: Axes
    gated: bool | Callable[[Params], bool] | None = None
    config_id: Callable[[Params], str] | None = None

    def is_gated(self, params: Params) -> bool | None:
        """Whether this group gates ``params``; None if the group leaves it to the bench."""
        if self.gated is None or isinstance(self.gated, bool):
            return self.gated
        return bool(self.gated(dict(params)))


@dataclass(frozen=True, kw_only=True, eq=False)
class Bench:
    """A parameter sweep of one kernel; each config becomes one pytest item.

    Every argument is checked here, and the whole sweep is expanded here, so a bad bench fails
    when its module is imported, at the line that builds it.

    ``sweep`` is a dict of parameter lists (their cartesian product, first parameter slowest)
    or a list of such dicts and :class:`Sweep` groups: their union, group after group, each
    group with its own gate rule and ids if it says so.

    ``explain(current, baseline)`` returns lines saying where a regression came from (e.g. which
    stage got busier); without it, the recorded metrics that changed most are listed.
    ``trace(params, path, limit)`` writes a trace-event JSON of one config to ``path`` (at most
    ``limit`` events) when the run asks for ``--npubench-trace``.
    ``topology()`` returns the normalised content of what the numbers are measured on (nested
    mappings of plain values); baselines store it beside ``fingerprint()``, so a run on other
    hardware (a what-if) names the keys that changed.
    ``captions`` maps a figure's file name to what it shows and how to read it (index.html).
    ``cost(params)`` estimates a config's run time (any unit), to balance ``--npubench-shard``.
    ``headline`` names the metric a reader looks at first (a failing config's one line leads
    with it, whichever metric failed); default: the first gated metric with a time unit, else
    the first gated metric (:attr:`headline_metric`).
    """

    name: str
    sweep: Axes | Sweep | Sequence[Axes | Sweep]
    run: Callable[[Params], Result]
    metrics: Mapping[str, Metric]
    fingerprint: Callable[[], str]
    config_id: Callable[[Params], str] | None = None
    exclude: Callable[[Params], bool] | None = None
    regen_only: Callable[[Params], bool] | None = None
    figures: FiguresFn | None = None
    meta: Callable[[], Mapping[str, Any]] | None = None
    summary_metrics: Sequence[str] | None = None
    explain: ExplainFn | None = None
    trace: TraceFn | None = None
    topology: Callable[[], Mapping[str, Any]] | None = None
    captions: Mapping[str, str] | None = None
    cost: Callable[[Params], float] | None = None
    headline: str | None = None
    _groups: tuple[Sweep, ...] = field(init=False, repr=False)
    _configs: tuple[BenchConfig, ...] = field(init=False, repr=False)
    _by_id: dict[str, BenchConfig] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._check_name()
        self._check_callables()
        self._check_metrics()
        object.__setattr__(self, "_groups", self._sweep_groups())
        configs = self._expand()
        object.__setattr__(self, "_configs", configs)
        object.__setattr__(self, "_by_id", {c.config_id: c for c in configs})

    @property
    def headline_metric(self) -> str:
        """The metric a failing config's line leads with (see ``headline``)."""
        if self.headline is not None:
            return self.headline
        gated = [n for n, m in self.metrics.items() if m.gate] or list(self.metrics)
        return next((n for n in gated if self.metrics[n].unit in TIME_UNITS), gated[0])

    @property
    def groups(self) -> tuple[Sweep, ...]:
        """The groups of the sweep, in order (one for a sweep given as a dict of axes)."""
        return self._groups

    @property
    def configs(self) -> tuple[BenchConfig, ...]:
        """Every config of the sweep (excludes removed), in sweep order."""
        return self._configs

    def config(self, config_id: str) -> BenchConfig:
        """The config with this id; KeyError naming the bench if there is none."""
        try:
            return self._by_id[config_id]
        except KeyError:
            raise KeyError(f"bench {self.name!r} has no config {config_id!r}") from None

    def has_config(self, config_id: str) -> bool:
        """True if the sweep (after excludes) produces this config id."""
        return config_id in self._by_id

    def check_result(self, config_id: str, result: object) -> dict[str, float]:
        """Validate what ``run`` returned for one config; return its metrics (whole-number
        types stay ``int``, so counts are written as integers; the rest become ``float``)."""
        where = f"bench {self.name!r}, config {config_id!r}"
        if not isinstance(result, Result):
            raise ResultError(
                f"{where}: run returned {type(result).__name__}, expected pytest_npubench.Result"
            )
        if not isinstance(result.metrics, Mapping):
            raise ResultError(f"{where}: Result.metrics must be a dict of metric name to number")
        missing = [m for m in self.metrics if m not in result.metrics]
        if missing:
            raise ResultError(
                f"{where}: metric {missing[0]!r} is declared in metrics= but missing from the "
                f"Result (returned: {', '.join(map(str, result.metrics)) or 'none'})"
            )
        extra = [m for m in result.metrics if m not in self.metrics]
        if extra:
            raise ResultError(
                f"{where}: metric {extra[0]!r} is in the Result but not declared in metrics= "
                f"(declared: {', '.join(self.metrics)}); declare it with a Metric(...)"
            )
        values: dict[str, float] = {}
        for name in self.metrics:
            value = result.metrics[name]
            if not is_real_number(value):
                raise ResultError(
                    f"{where}: metric {name!r} is {value!r} ({type(value).__name__}); metric "
                    "values must be finite real numbers (int or float; not bool, NaN or inf)"
                )
            values[name] = int(value) if isinstance(value, numbers.Integral) else float(value)
        return values

    def _check_name(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ValueError(
                f"Bench name {self.name!r} is invalid; use letters, digits, '_', '-' and '.' "
                "(it names the baseline file and the test items)"
            )
        if self.name in RESERVED_NAMES:
            raise ValueError(f"Bench name {self.name!r} is reserved (--npubench all)")

    def _check_callables(self) -> None:
        for arg in ("run", "fingerprint"):
            if not callable(getattr(self, arg)):
                raise TypeError(f"bench {self.name!r}: {arg}= must be callable")
        for arg in (
            "config_id",
            "exclude",
            "regen_only",
            "figures",
            "meta",
            "explain",
            "trace",
            "topology",
            "cost",
        ):
            value = getattr(self, arg)
            if value is not None and not callable(value):
                raise TypeError(f"bench {self.name!r}: {arg}= must be callable or None")

    def _check_metrics(self) -> None:
        if not isinstance(self.metrics, Mapping) or not self.metrics:
            raise ValueError(f"bench {self.name!r}: metrics= must declare at least one Metric")
        for name, metric in self.metrics.items():
            if not isinstance(name, str) or not isinstance(metric, Metric):
                raise TypeError(
                    f"bench {self.name!r}: metrics= must map names to Metric(...), "
                    f"got {name!r}: {metric!r}"
                )
        if self.headline is not None and self.headline not in self.metrics:
            raise ValueError(
                f"bench {self.name!r}: headline metric {self.headline!r} is not declared in "
                f"metrics= (declared: {', '.join(self.metrics)})"
            )
        for name in self.summary_metrics or ():
            if name not in self.metrics:
                raise ValueError(
                    f"bench {self.name!r}: summary metric {name!r} is not declared in metrics="
                )

    def _sweep_groups(self) -> tuple[Sweep, ...]:
        sweep = self.sweep
        if isinstance(sweep, (Mapping, Sweep)):
            groups = [self._group(sweep, "the sweep")]
        elif isinstance(sweep, Sequence) and not isinstance(sweep, (str, bytes)):
            if not sweep:
                raise ValueError(
                    f"bench {self.name!r}: the sweep is empty; give at least one group of "
                    "parameter lists, e.g. sweep=[{'size': [1024, 4096]}]"
                )
            groups = [self._group(g, f"sweep group {i}") for i, g in enumerate(sweep, 1)]
        else:
            raise TypeError(
                f"bench {self.name!r}: sweep= must be a dict of parameter lists, a Sweep, or a "
                f"list of them, got {sweep!r}"
            )
        if self.regen_only is not None and any(g.gated is not None for g in groups):
            raise ValueError(
                f"bench {self.name!r}: give the gate rule once: regen_only= on the Bench or "
                "gated= on its Sweep groups, not both"
            )
        return tuple(groups)

    def _group(self, group: object, where: str) -> Sweep:
        if isinstance(group, Mapping):
            group = Sweep(group)
        if not isinstance(group, Sweep):
            raise TypeError(
                f"bench {self.name!r}: {where} must be a dict of parameter lists or a "
                f"Sweep(...), got {group!r}"
            )
        if not (group.gated is None or isinstance(group.gated, bool) or callable(group.gated)):
            raise TypeError(
                f"bench {self.name!r}: {where}: gated= must be True, False or a predicate "
                f"on the params, got {group.gated!r}"
            )
        if group.config_id is not None and not callable(group.config_id):
            raise TypeError(f"bench {self.name!r}: {where}: config_id= must be callable or None")
        self._check_axes(group.axes, where)
        return group

    def _check_axes(self, axes: object, where: str) -> None:
        prefix = "" if where == "the sweep" else f"{where}: "
        if not isinstance(axes, Mapping) or not axes:
            raise ValueError(
                f"bench {self.name!r}: {where} is empty; give at least one parameter "
                "with a list of values, e.g. sweep={'size': [1024, 4096]}"
            )
        for param, values in axes.items():
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
                raise TypeError(
                    f"bench {self.name!r}: {prefix}sweep parameter {param!r} must be a list of "
                    f"values, got {values!r}"
                )
            if len(values) == 0:
                raise ValueError(
                    f"bench {self.name!r}: {prefix}sweep parameter {param!r} has no values"
                )

    def _expand(self) -> tuple[BenchConfig, ...]:
        configs: list[BenchConfig] = []
        seen: dict[str, tuple[Params, int]] = {}
        for number, group in enumerate(self._groups, 1):
            make_id = group.config_id or self.config_id or _default_config_id
            names = list(group.axes)
            for point in itertools.product(*group.axes.values()):
                params = dict(zip(names, point, strict=True))
                if self.exclude is not None and self.exclude(dict(params)):
                    continue
                cid = make_id(dict(params))
                self._check_config_id(cid, params, number, seen)
                seen[cid] = (params, number)
                configs.append(BenchConfig(cid, params, self._regen_only(group, params)))
        if not configs:
            raise ValueError(f"bench {self.name!r}: exclude= removes every config of the sweep")
        return tuple(configs)

    def _regen_only(self, group: Sweep, params: Params) -> bool:
        gated = group.is_gated(params)
        if gated is not None:
            return not gated
        return bool(self.regen_only(dict(params))) if self.regen_only else False

    def _check_config_id(
        self, cid: object, params: Params, group: int, seen: dict[str, tuple[Params, int]]
    ) -> None:
        if not isinstance(cid, str) or not cid or "\n" in cid or "::" in cid:
            raise ValueError(
                f"bench {self.name!r}: config_id returned {cid!r} for {params!r}; "
                "a config id is a non-empty one-line string without '::'"
            )
        if cid in seen:
            other, other_group = seen[cid]
            where = f" (sweep groups {other_group} and {group})" if other_group != group else ""
            raise ValueError(
                f"bench {self.name!r}: config ids must be unique, but {cid!r} is the id of both "
                f"{other!r} and {params!r}{where}; pass config_id= to tell them apart"
            )
