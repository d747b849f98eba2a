"""The plugin's hook wiring for one pytest session: :class:`NpubenchSession` is the session's
state (:class:`~pytest_npubench.state.RunState`) plus one hook implementation per pytest and
npubench hook, each handing the work to the module whose job it is.

One instance lives in every process (controller and xdist workers). Workers collect and run
items; only the controller gathers results (from ``report.user_properties``) and writes files.

=================  ==========================================================================
module             job
=================  ==========================================================================
``state``          options, paths, benches, results, problems
``collection``     finding and selecting benches; their items instead of the tests'
``run_baselines``  the baseline files the run compares against; the hardware what-if
``regen``          --regen-baselines: merge and write the baseline files
``figure_jobs``    who draws each bench's figures, and when (children, a thread, here)
``writer``         the artifact folder: figures, timelines, results.json, summary.md, index
``terminal``       the terminal summary
=================  ==========================================================================
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_npubench import artifacts
from pytest_npubench.baseline import write_atomic as write_baseline
from pytest_npubench.bench import Bench, Metric
from pytest_npubench.collection import Collection
from pytest_npubench.compare import Comparison, ConfigResult, compare_metric
from pytest_npubench.figure_jobs import FigureJobs
from pytest_npubench.item import PROBLEM_KEY
from pytest_npubench.regen import Regen
from pytest_npubench.replay import load_replay
from pytest_npubench.run_baselines import RunBaselines
from pytest_npubench.shard import SHARD_FILE, shard_document
from pytest_npubench.state import RunState
from pytest_npubench.terminal import TerminalSummary
from pytest_npubench.writer import ArtifactWriter

STATE_KEY = pytest.StashKey["NpubenchSession"]()


class NpubenchSession(RunState):
    """The session's state and the plugin's default hook implementations."""

    def __init__(self, config: pytest.Config) -> None:
        super().__init__(config)
        self.replay = load_replay(config)
        self.collection = Collection(self, self)
        self.baselines = RunBaselines(self)
        self.figures = FigureJobs(self, self.baselines)
        self.regenerate = Regen(self, self.baselines)
        self.writer = ArtifactWriter(self, self.baselines, self.figures)
        self.terminal = TerminalSummary(self, self.baselines)

    # -- what the items read (pytest_npubench.context.BenchContext) --------------------------

    def baseline_metrics(self, bench: Bench, config_id: str) -> dict[str, float] | None:
        """The baseline values of one config, or None."""
        return self.baselines.metrics(bench, config_id)

    def baseline_problem(self, bench: Bench) -> str:
        """Why the bench cannot be gated against its baseline file ('' if it can)."""
        return self.baselines.problem(bench)

    # -- finding, selecting and collecting benches (pytest_npubench.collection) --------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Find every bench, select those of --npubench; start the figure processes."""
        self.benches = self.collection.find()
        self.figures.start()

    @pytest.hookimpl(trylast=True)
    def pytest_npubench_add_benches(self, config: pytest.Config) -> list[Bench]:
        """The default: every module-level Bench of the modules in ``npubench_paths``."""
        return self.collection.discovered(config)

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(self, collection_path: Path, config: pytest.Config) -> bool | None:
        """No ordinary test file, and no folder off the way to the bench paths."""
        return self.collection.ignore(collection_path)

    @pytest.hookimpl(tryfirst=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> pytest.CollectReport | None:
        """Files named on the command line are not imported either (they would be deselected)."""
        return self.collection.empty_report(collector)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """Replace the collected tests by the configs of the selected benches."""
        self.collection.replace_items(session, config, items)

    @pytest.hookimpl(wrapper=True, specname="pytest_collection_modifyitems")
    def pytest_collection_modifyitems_fold(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> Any:
        """After every selection (-k, -m, shards): each bench's reused configs become one
        skipped item (:class:`~pytest_npubench.item.ReusedConfigs`)."""
        outcome = yield
        self.collection.fold(items)
        return outcome

    # -- default hook implementations ------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_npubench_compare(
        self, metric: Metric, baseline: float, current: float
    ) -> Comparison:
        """The default comparison: relative tolerance in the metric's direction."""
        return compare_metric(metric, baseline, current)

    @pytest.hookimpl(trylast=True)
    def pytest_npubench_figures(
        self, bench: Bench, results: Mapping[str, ConfigResult], outdir: Path
    ) -> list[Path]:
        """The default: the bench's own figures function."""
        if bench.figures is None:
            return []
        return list(bench.figures(dict(results), outdir))

    @pytest.hookimpl(trylast=True)
    def pytest_npubench_result(self, bench: Bench, result: ConfigResult) -> None:
        """The default: keep the result for the summaries and the files written at the end."""
        self.results.setdefault(bench.name, {})[result.config_id] = result

    # -- gathering results (controller) ------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Rebuild each config's result from its report and hand it to the observers."""
        if self.is_worker or not (report.when == "call" or report.skipped):
            return
        self.figures.warm_up()
        for key, payload in report.user_properties:
            if key == PROBLEM_KEY and isinstance(payload, str):
                self.problem(payload)
            if key == "npubench" and isinstance(payload, str):
                benches = {b.name: b for b in self.benches}
                bench = benches[json.loads(payload)["bench"]]
                result = ConfigResult.from_payload(payload, bench)
                self.config.hook.pytest_npubench_result(
                    config=self.config, bench=bench, result=result
                )
                self.figures.send_when_complete(bench)

    # -- writing files (controller) ----------------------------------------------------------

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write baselines (regen only), then figures, results.json and summary.md. An
        interrupted run rewrites no baseline and marks the files it writes as partial."""
        if self.is_worker:
            return
        if self.shard is not None:  # a part of a sweep: baselines and figures wait for merge
            self._write_shard()
            if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
                session.exitstatus = pytest.ExitCode.OK  # more shards than configs: fine
        if not self.results:
            self.figures.cancel()
            return
        self.interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        if self.interrupted and self.regen:
            self.not_accepted.update(self.results)  # nothing is accepted: nothing is written
        if not self.interrupted:  # else a child would draw from partial results
            self.figures.send_the_rest()
        if self.shard is None and self.regen and not self.interrupted:
            for bench in self.benches:
                self.regenerate.rewrite(bench)
        self.writer.write()
        if self.problems and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _write_shard(self) -> None:
        assert self.shard is not None
        payloads = {
            bench.name: {cid: r.to_payload() for cid, r in self.ordered_results(bench).items()}
            for bench in self.benches
        }
        text = shard_document(
            self.shard,
            self.config.invocation_params.args,
            artifacts.run_metadata((), self.config.rootpath)["commit"],
            self.regen,
            {bench.name: self.fingerprint(bench) for bench in self.benches},
            payloads,
        )
        try:
            roots = (self.config.rootpath, self.artifacts_dir)
            write_baseline(self.artifacts_dir / SHARD_FILE, text, inside=roots)
        except OSError as exc:
            self.problem(f"could not write {self.relpath(self.artifacts_dir)}/{SHARD_FILE}: {exc}")

    def replayed(self, bench: Bench, config_id: str) -> str | None:
        """The payload a shard recorded for this config (under --npubench-replay)."""
        return None if self.replay is None else self.replay.get(bench.name, {}).get(config_id)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """No child is left behind, whatever ended the session."""
        self.figures.cancel()

    # -- terminal ---------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True, tryfirst=True, specname="pytest_terminal_summary")
    def pytest_terminal_summary_first(self, terminalreporter: pytest.TerminalReporter) -> Any:
        """Before pytest's failure sections: the what-if once, and many metric failures as
        one line each (:meth:`~pytest_npubench.terminal.TerminalSummary.before`)."""
        taken = None if self.is_worker else self.terminal.before(terminalreporter)
        try:
            return (yield)
        finally:
            self.terminal.restore(terminalreporter, taken)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """Per bench a table (regressions first), then what regen wrote, artifacts and errors."""
        if not self.is_worker:
            self.terminal.write(terminalreporter)
