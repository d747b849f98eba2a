"""The pytest nodes of a bench: one collector per bench, one item per config."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Any

import pluggy
import pytest

from pytest_npubench.bench import Bench, BenchConfig, Result, ResultError
from pytest_npubench.compare import Comparison, ConfigResult, config_verdict, counted
from pytest_npubench.context import BenchContext
from pytest_npubench.report import (
    failure_message,
    item_name,
    missing_baseline_message,
    regen_command,
)

#: Frames from these folders are machinery, not the bench: failure tracebacks hide them.
_MACHINERY = tuple(
    str(Path(path).parent) + os.sep
    for path in (__file__, inspect.getfile(pytest.Item), inspect.getfile(pluggy.HookimplMarker))
)


def is_bench_code(entry: Any) -> bool:
    """True for a traceback entry of the bench (or its libraries), not of pytest or the plugin."""
    return not str(entry.path).startswith(_MACHINERY)


def bench_traceback(exc: BaseException) -> str:
    """A short traceback of an exception raised by bench code, without pytest and plugin frames."""
    info = pytest.ExceptionInfo.from_exception(exc)
    info.traceback = info.traceback.filter(is_bench_code) or info.traceback
    return str(info.getrepr(style="short", chain=False))


#: user_properties key of a problem a worker found that is not the config's verdict (e.g. a
#: trace it could not write); the controller lists it among the run's errors.
PROBLEM_KEY = "npubench-problem"


class ReplayedError(Exception):
    """A config whose run raised in its shard; the message is the shard's ``repr`` of it."""

    def __repr__(self) -> str:
        return str(self.args[0])


class BenchFailure(Exception):
    """An item failed its functional check or its gate; the message says why, without traceback."""


class BenchCollector(pytest.Collector):
    """All configs of one bench. Collecting it loads and checks the bench's baseline file."""

    def __init__(self, *, bench: Bench, npubench: BenchContext, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bench = bench
        self.npubench = npubench

    @property
    def ihook(self) -> Any:
        """Every loaded conftest's hooks apply to a bench (its module may lie outside the
        folders this run walked, e.g. ``pytest --npubench gemm tests``)."""
        return self.config.hook

    def collect(self) -> list[pytest.Item]:
        problem = self.npubench.baseline_problem(self.bench)
        if problem:
            raise self.CollectError(problem)
        name = self.bench.name
        return [
            BenchItem.from_parent(self, name=item_name(name, c.config_id), bench_config=c)
            for c in self.bench.configs
        ]


class BenchItem(pytest.Item):
    """One config of a bench: runs it, checks it, compares it with its baseline entry."""

    def __init__(self, *, bench_config: BenchConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bench_config = bench_config
        self.add_marker("npubench")
        if bench_config.regen_only:
            self.add_marker("regen")
            if not self.npubench.measure_regen_only:
                self._skip_reusing_baseline()

    #: "reused-baseline" for a regen-only config that reuses its baseline entry in this run
    reuse: str = ""

    def _skip_reusing_baseline(self) -> None:
        baseline = self.npubench.baseline_metrics(self.bench, self.bench_config.config_id)
        if baseline is None:
            verdict = "missing-baseline"
            reason = "regen-only: no baseline entry to reuse; create it with: " + regen_command(
                self.bench.name, self.bench_config.config_id
            )
        else:
            verdict, reason = "reused-baseline", "regen-only: reusing baseline"
        # only the payload: per-metric junit properties are this run's measurements, and a
        # reused config was not measured (its ~40 properties rode on every report of ~1400
        # skipped items through xdist; ADR 0013)
        result = self._result(metrics=baseline or {}, verdict=verdict, source="baseline")
        self.user_properties.append(("npubench", result.to_payload()))
        self.add_marker(pytest.mark.skip(reason=reason))
        self.reuse = verdict

    @property
    def ihook(self) -> Any:
        """As :attr:`BenchCollector.ihook`."""
        return self.config.hook

    @property
    def bench(self) -> Bench:
        """The bench this config belongs to."""
        assert isinstance(self.parent, BenchCollector)
        return self.parent.bench

    @property
    def npubench(self) -> BenchContext:
        """The session state of the plugin (options, baselines)."""
        assert isinstance(self.parent, BenchCollector)
        return self.parent.npubench

    def runtest(self) -> None:
        """Run the config, record its result (for the controller), then judge it."""
        result = self._evaluate()
        self._record(result)
        self._trace()
        self._judge(result)

    def _trace(self) -> None:
        """Under --npubench-trace, have the bench write this config's trace (one file per
        config, written atomically by the process that ran it)."""
        state, bench = self.npubench, self.bench
        if not state.trace or bench.trace is None:
            return
        path = state.trace_path(bench, self.bench_config.config_id)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            bench.trace(dict(self.bench_config.params), path, state.trace_limit)
            if path.is_file():
                os.chmod(path, 0o644)  # like every other artifact, readable by the CI uploader
        except OSError as exc:
            # The measurement stands (and a regen keeps it); the missing trace is a run error.
            where = state.relpath(path)
            self.user_properties.append(
                (PROBLEM_KEY, f"{self.name}: could not write its trace {where} ({exc})")
            )

    def _result(self, **fields: Any) -> ConfigResult:
        cfg = self.bench_config
        fields.setdefault("baseline", self.npubench.baseline_metrics(self.bench, cfg.config_id))
        return ConfigResult(
            bench=self.bench.name, config_id=cfg.config_id, params=cfg.params, **fields
        )

    def _evaluate(self) -> ConfigResult:
        bench, cfg = self.bench, self.bench_config
        baseline = self.npubench.baseline_metrics(bench, cfg.config_id)
        try:
            raw = (
                self._replayed()
                if self.npubench.replay is not None
                else bench.run(dict(cfg.params))
            )
        except Exception as exc:
            self._record(self._result(metrics={}, verdict="error", source="run", message=repr(exc)))
            raise
        try:
            metrics = bench.check_result(cfg.config_id, raw)
        except ResultError as exc:
            self._record(self._result(metrics={}, verdict="error", source="run", message=str(exc)))
            raise BenchFailure(str(exc)) from None
        comparisons = self._compare(baseline or {}, metrics)
        verdict = config_verdict(bench, baseline, comparisons)
        if not raw.ok:
            verdict = "failed-check"
        return self._result(
            metrics=metrics,
            verdict=verdict,
            source="run",
            message=str(raw.message),
            comparisons=comparisons,
        )

    def _replayed(self) -> Result:
        """Under --npubench-replay: this config's measurement as a shard recorded it."""
        payload = self.npubench.replayed(self.bench, self.bench_config.config_id)
        if payload is None:
            raise BenchFailure(
                f"{self.name}: no shard measured this config; merge every shard of one run"
            )
        data = json.loads(payload)
        if data["verdict"] == "error":
            raise ReplayedError(data["message"])
        ok = data["verdict"] != "failed-check"
        return Result(metrics=data["metrics"], ok=ok, message=data["message"])

    def _compare(
        self, baseline: dict[str, float], metrics: dict[str, float]
    ) -> dict[str, Comparison]:
        comparisons: dict[str, Comparison] = {}
        for name, current in metrics.items():
            if name not in baseline:
                continue
            comparison = self.ihook.pytest_npubench_compare(
                config=self.config,
                bench=self.bench,
                config_id=self.bench_config.config_id,
                name=name,
                metric=self.bench.metrics[name],
                baseline=baseline[name],
                current=current,
            )
            if not isinstance(comparison, Comparison):
                raise BenchFailure(
                    f"pytest_npubench_compare returned {comparison!r} for metric {name!r}; "
                    "an implementation must return a Comparison or None"
                )
            comparisons[name] = comparison
        return counted(comparisons)

    def _record(self, result: ConfigResult) -> None:
        self.user_properties.append(("npubench", result.to_payload()))
        self.user_properties.extend((f"npubench.{k}", v) for k, v in result.metrics.items())

    def _judge(self, result: ConfigResult) -> None:
        bench, state = self.bench, self.npubench
        where = state.relpath(state.baseline_path(bench))
        if result.verdict == "failed-check":
            raise BenchFailure(f"{self.name}: functional check failed: {result.message}")
        if state.regen or state.sweep_variant is not None:
            return  # a regen accepts; a sweep's variant measures other hardware: no gate
        if result.verdict == "new":
            raise BenchFailure(missing_baseline_message(bench, result, where))
        failing = ("regression", "changed", "improved")[: 3 if state.fail_improvements else 2]
        if result.verdict in failing:
            raise BenchFailure(failure_message(bench, result, where, state.fail_improvements))

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> Any:
        """Our own failures are their message; a bench's exception keeps its traceback."""
        if isinstance(excinfo.value, BenchFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def _traceback_filter(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:
        traceback = excinfo.traceback.filter(excinfo)
        return traceback.filter(is_bench_code) or traceback

    def reportinfo(self) -> tuple[Path, int, str]:
        """Where the bench is defined, for the terminal and junitxml."""
        return self.path, 0, self.name


class ReusedConfigs(pytest.Item):
    """The regen-only configs of one bench that a run reuses from the baseline, as one
    skipped item (ADR 0013): it carries every one's result payload, so the controller gets
    them in one report instead of one skipped item per config (each a round trip through
    xdist's channel; ~1,400 of them cost several CPU seconds). Made after selection, from
    the items that ``-k``, ``-m`` and sharding left, so it holds exactly those configs."""

    def __init__(self, *, folded: list[BenchItem], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for item in folded:
            self.user_properties.extend(item.user_properties)
        self.add_marker("npubench")
        self.add_marker("regen")
        reason = (
            f"regen-only: {len(folded)} configs reuse their baseline entries "
            f"(not re-run; {regen_command(folded[0].bench.name)} -m regen measures them)"
        )
        self.add_marker(pytest.mark.skip(reason=reason))

    @classmethod
    def fold(cls, items: list[pytest.Item]) -> list[pytest.Item]:
        """``items`` with each bench's reused configs (two or more) replaced by one
        :class:`ReusedConfigs` at the place of the first of them."""
        groups: dict[str, list[BenchItem]] = {}
        for item in items:
            if isinstance(item, BenchItem) and item.reuse == "reused-baseline":
                groups.setdefault(item.bench.name, []).append(item)
        folded = {id(i) for group in groups.values() if len(group) > 1 for i in group}
        out: list[pytest.Item] = []
        for item in items:
            if id(item) not in folded:
                out.append(item)
                continue
            assert isinstance(item, BenchItem)
            group = groups[item.bench.name]
            if item is group[0]:
                name = f"{item.bench.name}[{len(group)} reused]"
                assert item.parent is not None
                out.append(cls.from_parent(item.parent, name=name, folded=group))
        return out

    @property
    def ihook(self) -> Any:
        """As :attr:`BenchCollector.ihook`."""
        return self.config.hook

    def runtest(self) -> None:
        """Never called: the item is skipped at setup."""

    def reportinfo(self) -> tuple[Path, int, str]:
        """Where the bench is defined."""
        return self.path, 0, self.name
