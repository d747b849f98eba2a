"""The plugin's state for one pytest session: benches, baselines, gathered results, outputs.

One instance lives in every process (controller and xdist workers). Workers collect and run
items; only the controller gathers results (from ``report.user_properties``) and writes files.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_npubench import artifacts
from pytest_npubench.artifacts import artifact_name
from pytest_npubench.baseline import (
    BaselineError,
    BaselineFile,
    OutsideLinkError,
    RegenReport,
    load,
    locked,
    merge,
    topology_diff,
)
from pytest_npubench.baseline import write_atomic as write_baseline
from pytest_npubench.bench import Bench, Metric, flat_content
from pytest_npubench.compare import Comparison, ConfigResult, compare_metric
from pytest_npubench.discover import BenchImportError, discover
from pytest_npubench.drawing import DrawingThread, FigureError, FigureJob
from pytest_npubench.drawing import start as start_figures
from pytest_npubench.item import (
    PROBLEM_KEY,
    BenchCollector,
    BenchItem,
    ReusedConfigs,
    bench_traceback,
)
from pytest_npubench.replay import load_replay
from pytest_npubench.report import (
    bench_line,
    bench_table,
    item_name,
    mixed_topology_message,
    percent,
    regen_command,
    regen_lines,
    unreadable_message,
)
from pytest_npubench.shard import SHARD_FILE, Shard, shard_document
from pytest_npubench.timeline import draw_timeline

STATE_KEY = pytest.StashKey["NpubenchSession"]()


class NpubenchSession:
    """Selected benches, their baselines and results; the plugin's default hook implementations."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        option = config.option
        self.names: tuple[str, ...] | None = option.npubench
        self.regen: bool = option.npubench_regen
        allow = option.npubench_allow_improvements or bool(
            config.getini("npubench_allow_improvements")
        )
        #: An improvement beyond tolerance fails unless allowed (ADR 0007): left unaccepted,
        #: it would hide a later regression of the same size.
        self.fail_improvements: bool = option.npubench_strict or not allow
        self.prune: bool = option.npubench_prune
        self.is_worker = hasattr(config, "workerinput")
        self.bench_paths = _bench_paths(config)
        self.baselines_dir = _ini_dir(config, str(config.getini("npubench_baselines")))
        self.artifacts_dir: Path = option.npubench_artifacts or (
            config.rootpath / "npubench-artifacts"
        )
        self.shard: Shard | None = option.npubench_shard
        self.replay = load_replay(config)
        self.trace: bool = option.npubench_trace
        self.trace_limit: int = option.npubench_trace_limit
        self.benches: list[Bench] = []
        self.sources: dict[Bench, Path] = {}
        self.results: dict[str, dict[str, ConfigResult]] = {}
        self.regen_reports: list[RegenReport] = []
        self.problems: list[tuple[str, str]] = []
        self.artifact_files: list[Path] = []
        self._baselines: dict[str, BaselineFile | None] = {}
        self._baseline_errors: dict[str, BaselineError] = {}
        self._whatif: dict[str, list[str]] = {}
        self.not_accepted: set[str] = set()  # benches whose regen could not write
        self._figure_jobs: dict[str, FigureJob] = {}  # benches drawn by a child process
        self._warmed = False  # the drawing thread considered (xdist controller)
        self._here: DrawingThread | None = None  # draws this process's benches early

    # -- paths ------------------------------------------------------------------------------

    def baseline_path(self, bench: Bench) -> Path:
        """``<npubench_baselines>/<bench>.json``."""
        return self.baselines_dir / f"{bench.name}.json"

    def trace_path(self, bench: Bench, config_id: str) -> Path:
        """``<artifacts>/<bench>/traces/<id>-<hash>.json``: the id with unsafe characters as
        ``_``, cut to 80 characters, then a hash of the full id (so ``a/b`` and ``a_b`` differ
        and no name is too long for the file system)."""
        return self.artifacts_dir / bench.name / "traces" / artifact_name(config_id, ".json")

    def relpath(self, path: Path) -> str:
        """A path relative to the rootdir when it is inside it (for messages and node ids)."""
        try:
            return path.resolve().relative_to(self.config.rootpath.resolve()).as_posix()
        except ValueError:
            return str(path)

    # -- finding and selecting benches -------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Find every bench, select those of --npubench; bad names and modules are usage errors."""
        found: list[Bench] = []
        for group in self.config.hook.pytest_npubench_add_benches(config=self.config):
            for bench in group:
                if not isinstance(bench, Bench):
                    raise pytest.UsageError(
                        f"pytest_npubench_add_benches returned {bench!r}; it must return a "
                        "list of pytest_npubench.Bench"
                    )
                if all(bench is not b for b in found):
                    found.append(bench)
        self._check_unique(found)
        self.benches = self._select(found)
        self._start_figure_jobs()

    @pytest.hookimpl(trylast=True)
    def pytest_npubench_add_benches(self, config: pytest.Config) -> list[Bench]:
        """The default: every module-level Bench of the modules in ``npubench_paths``."""
        try:
            found = discover(self.bench_paths, config.rootpath)
        except BenchImportError as exc:
            raise pytest.UsageError(str(exc)) from None
        for bench, path in found:
            self.sources[bench] = path
        return [bench for bench, _ in found]

    def _check_unique(self, benches: Sequence[Bench]) -> None:
        seen: dict[str, Bench] = {}
        for bench in benches:
            if bench.name in seen:
                where = [self._source_text(b) for b in (seen[bench.name], bench)]
                raise pytest.UsageError(
                    f"two benches are named {bench.name!r} ({where[0]} and {where[1]}); "
                    "bench names must be unique"
                )
            seen[bench.name] = bench

    def _source_text(self, bench: Bench) -> str:
        source = self.source(bench)
        return self.relpath(source) if source else "a pytest_npubench_add_benches hook"

    def source(self, bench: Bench) -> Path | None:
        """The file that defines a bench: its bench module, else the module of its run function."""
        if bench in self.sources:
            return self.sources[bench]
        try:
            name = inspect.getsourcefile(bench.run)
        except TypeError:
            return None
        return Path(name) if name else None

    def _select(self, benches: Sequence[Bench]) -> list[Bench]:
        if (self.names is None or "all" in self.names) and not benches:
            raise pytest.UsageError(self._none_found())
        known = {b.name: b for b in benches}
        for name in self.names or ():
            if name != "all" and name not in known:
                listed = ", ".join(sorted(known)) or "none"
                raise pytest.UsageError(
                    f"--npubench: unknown bench {name!r}; known benches: {listed} "
                    f"(found in {self._paths_text()} and pytest_npubench_add_benches hooks)"
                )
        if self.names is None or "all" in self.names:
            return list(benches)
        return [b for b in benches if b.name in self.names]

    def _paths_text(self) -> str:
        return ", ".join(self.relpath(p) for p in self.bench_paths) or "no paths"

    def _none_found(self) -> str:
        return (
            f"no benches found: no module-level pytest_npubench.Bench in {self._paths_text()} "
            "(ini npubench_paths) and none added by a pytest_npubench_add_benches hook"
        )

    # -- collection ---------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(self, collection_path: Path, config: pytest.Config) -> bool | None:
        """A bench run collects no ordinary test file, nor walks a folder off the way to the
        bench paths (so it imports no conftest there): its items come from the bench modules
        (below), so a broken file under tests/ cannot stop a bench run or a regen. Folders that
        hold a bench path are walked, so their conftests load as in a plain run."""
        if collection_path.is_dir():
            on_the_way = any(
                p == collection_path or collection_path in p.parents for p in self.bench_paths
            )
            return None if on_the_way else True
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> pytest.CollectReport | None:
        """Files named on the command line are not imported either (they would be deselected)."""
        if isinstance(collector, pytest.File):
            return pytest.CollectReport(collector.nodeid, "passed", None, [])
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """Replace the collected tests by the configs of the selected benches."""
        bench_items: list[pytest.Item] = []
        for bench in self.benches:
            collector = self._collector(session, bench)
            report = collector.ihook.pytest_make_collect_report(collector=collector)
            # The report carries its CallInfo, which cannot travel to the xdist controller;
            # pytest's own collect_one_node drops it the same way.
            report.__dict__.pop("call", None)
            collector.ihook.pytest_collectreport(report=report)
            if report.passed:
                bench_items.extend(i for i in report.result if isinstance(i, BenchItem))
        others = [item for item in items if not isinstance(item, BenchItem)]
        if others:
            config.hook.pytest_deselected(items=others)
        items[:] = bench_items

    @pytest.hookimpl(wrapper=True, specname="pytest_collection_modifyitems")
    def pytest_collection_modifyitems_fold(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> Any:
        """After every selection (-k, -m, shards): each bench's reused configs become one
        skipped item (:class:`~pytest_npubench.item.ReusedConfigs`)."""
        outcome = yield
        items[:] = ReusedConfigs.fold(items)
        return outcome

    def _collector(self, session: pytest.Session, bench: Bench) -> BenchCollector:
        source = self.source(bench)
        relative = self.relpath(source) if source else ""
        inside = source is not None and not Path(relative).is_absolute()
        return BenchCollector.from_parent(
            session,
            name=bench.name,
            path=source if inside else self.config.rootpath,
            nodeid=relative if inside else bench.name,
            bench=bench,
            npubench=self,
        )

    # -- baselines ----------------------------------------------------------------------------

    def baseline_file(self, bench: Bench) -> BaselineFile | None:
        """The bench's baseline file (loaded once); None if missing or, under regen, unusable."""
        if bench.name not in self._baselines:
            try:
                self._baselines[bench.name] = load(self.baseline_path(bench), bench.name)
            except BaselineError as exc:
                self._baselines[bench.name] = None
                self._baseline_errors[bench.name] = exc
        return self._baselines[bench.name]

    def baseline_metrics(self, bench: Bench, config_id: str) -> dict[str, float] | None:
        """The baseline values of one config, or None."""
        baseline = self.baseline_file(bench)
        return None if baseline is None else baseline.metrics(config_id)

    def baseline_problem(self, bench: Bench) -> str:
        """Why the bench cannot be gated against its baseline file ('' if it can)."""
        self.baseline_file(bench)  # loads it, recording any error
        error = self._baseline_errors.get(bench.name)
        if error is None:
            return ""
        where = self.relpath(self.baseline_path(bench))
        return f"bench {bench.name!r}: {unreadable_message(bench.name, where, error)}"

    def topology_content(self, bench: Bench) -> dict[str, Any] | None:
        """The bench's normalised topology as flat dotted keys, or None if it gives none."""
        if bench.topology is None:
            return None
        return flat_content(bench.topology())

    def whatif_lines(self, bench: Bench) -> list[str]:
        """Lines naming how this run's hardware differs from the baseline's ([] if it does not).

        A what-if is not an error: every config is compared as usual, and the run fails until
        the new numbers are accepted with --regen-baselines (DESIGN, Baselines; ADR 0007).
        """
        if bench.name in self._whatif:
            return self._whatif[bench.name]
        lines: list[str] = []
        baseline = None if self.regen else self.baseline_file(bench)
        current = self._fingerprint(bench) if baseline is not None else None
        if baseline is not None and current is not None and baseline.fingerprint != current:
            where = self.relpath(self.baseline_path(bench))
            changes = topology_diff(baseline.topology, self.topology_content(bench))
            lines.append(
                f"what-if: {where} was measured on {baseline.fingerprint}; this run uses "
                f"{current}; every config is compared against it"
            )
            if changes:
                lines.append("  changed: " + ", ".join(changes))
            else:
                lines.append("  (the baseline does not record the topology's content)")
            lines.append(f"  to accept the new numbers: {regen_command(bench.name)}")
        self._whatif[bench.name] = lines
        return lines

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
        self._warm_up_drawing()
        for key, payload in report.user_properties:
            if key == PROBLEM_KEY and isinstance(payload, str):
                self._problem(payload)
            if key == "npubench" and isinstance(payload, str):
                benches = {b.name: b for b in self.benches}
                bench = benches[json.loads(payload)["bench"]]
                result = ConfigResult.from_payload(payload, bench)
                self.config.hook.pytest_npubench_result(
                    config=self.config, bench=bench, result=result
                )
                self._send_when_complete(bench)

    def ordered_results(self, bench: Bench) -> dict[str, ConfigResult]:
        """A bench's results in sweep order (xdist delivers them in completion order)."""
        results = self.results.get(bench.name, {})
        return {c.config_id: results[c.config_id] for c in bench.configs if c.config_id in results}

    # -- writing files (controller) ----------------------------------------------------------

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write baselines (regen only), then figures, results.json and summary.md."""
        if self.is_worker:
            return
        if self.shard is not None:  # a part of a sweep: baselines and figures wait for merge
            self._write_shard()
            if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
                session.exitstatus = pytest.ExitCode.OK  # more shards than configs: fine
        if not self.results:
            self._cancel_figure_jobs()
            return
        self._send_figure_jobs()
        if self.shard is None and self.regen and exitstatus != pytest.ExitCode.INTERRUPTED:
            for bench in self.benches:
                self._regen(bench)
        self._write_artifacts()
        if self.problems and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _regen(self, bench: Bench) -> None:
        results = self.ordered_results(bench)
        report = RegenReport(self.baseline_path(bench))
        if not results:
            return
        self.not_accepted.add(bench.name)  # until the write (or an identical file) proves it
        where = self.relpath(report.path)
        try:
            with locked(report.path, inside=(self.config.rootpath, self.baselines_dir)):
                self._regen_locked(bench, results, report)
        except OutsideLinkError as exc:  # names the link and its target; no traceback to show
            self._problem(f"bench {bench.name!r}: {exc}")
        except (OSError, TimeoutError) as exc:
            self._problem(f"{where}: could not lock or write it ({exc}); not written", exc)

    def _regen_locked(
        self, bench: Bench, results: Mapping[str, ConfigResult], report: RegenReport
    ) -> None:
        """Read, merge and write under the file's lock, so concurrent regens all land."""
        if not self._load_for_regen(bench, report):
            return
        text = self._merged_text(bench, results, report)
        if text is not None and report.not_remeasured:
            self._problem(mixed_topology_message(bench, report, self.relpath(report.path)))
            text = None
        if text is not None and self._write_if_changed(report, text):
            self.regen_reports.append(report)
            self.not_accepted.discard(bench.name)

    def _load_for_regen(self, bench: Bench, report: RegenReport) -> bool:
        """Re-read the file (another run may have written it); one it cannot read is never
        replaced or shrunk: the regen stops for this bench and says how to fix it."""
        try:
            self._baselines[bench.name] = load(report.path, bench.name)
        except BaselineError as exc:
            self._problem(
                f"{unreadable_message(bench.name, self.relpath(report.path), exc)}; not written"
            )
            return False
        return True

    def _merged_text(
        self, bench: Bench, results: Mapping[str, ConfigResult], report: RegenReport
    ) -> str | None:
        try:
            merged = merge(
                bench,
                self._baselines[bench.name],
                results.values(),
                fingerprint=bench.fingerprint(),
                meta=bench.meta() if bench.meta else {},
                prune=self.prune,
                report=report,
                topology=self.topology_content(bench),
            )
            return merged.render()
        except Exception as exc:
            where = self.relpath(report.path)
            self._problem(f"bench {bench.name!r}: cannot make {where}: {exc!r}; not written", exc)
            return None

    def _write_if_changed(self, report: RegenReport, text: str) -> bool:
        """Write the baseline unless it already holds exactly this text; False on failure."""
        path = report.path
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            return True
        try:
            write_baseline(path, text, inside=(self.config.rootpath, self.baselines_dir))
        except Exception as exc:
            where = self.relpath(path)
            self._problem(
                f"could not write {where} ({exc!r}); the previous file is left as it was", exc
            )
            return False
        report.written = True
        return True

    def _draw_timelines(self, bench: Bench, results: Mapping[str, ConfigResult]) -> None:
        """A Gantt PNG beside each trace written in this run (index.html shows it)."""
        if not self.trace or bench.trace is None:
            return
        if self._here is not None:
            self._here.join()  # matplotlib is the drawing thread's until then
        for result in results.values():
            trace = self.trace_path(bench, result.config_id)
            if result.source != "run" or not trace.is_file():
                continue
            try:
                with artifacts.reproducible_matplotlib():
                    draw_timeline(
                        trace, trace.with_suffix(".png"), f"{bench.name}[{result.config_id}]"
                    )
            except Exception as exc:
                self._problem(f"timeline of {self.relpath(trace)} failed: {exc!r}", exc)

    def _write_artifacts(self) -> None:
        root = self.artifacts_dir
        entries = []
        # this process draws its own benches first, then takes what the children drew
        order = sorted(self.benches, key=lambda b: b.name in self._figure_jobs)
        drawn = {b.name: self._draw(b, self.ordered_results(b)) for b in order}
        for bench in self.benches:
            results = self.ordered_results(bench)
            if results:
                self._draw_timelines(bench, results)
                entries.append(
                    artifacts.BenchArtifacts(
                        bench,
                        results,
                        self._fingerprint(bench),
                        self.relpath(self.baseline_path(bench)),
                        drawn[bench.name],
                        self.whatif_lines(bench),
                        self.topology_content(bench),
                    )
                )
        try:
            problems = [p for p, _ in self.problems]
            self.artifact_files = artifacts.write(
                root,
                entries,
                problems,
                self.regen,
                self.trace_path,
                self.fail_improvements,
                self.not_accepted,
                artifacts.run_metadata(self.config.invocation_params.args, self.config.rootpath),
            )
        except OSError as exc:
            self._problem(f"could not write the artifacts to {self.relpath(root)}: {exc!r}")

    def _fingerprint(self, bench: Bench) -> str | None:
        try:
            return bench.fingerprint()
        except Exception as exc:
            self._problem(f"bench {bench.name!r}: fingerprint() raised {exc!r}", exc)
            return None

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
            {bench.name: self._fingerprint(bench) for bench in self.benches},
            payloads,
        )
        try:
            roots = (self.config.rootpath, self.artifacts_dir)
            write_baseline(self.artifacts_dir / SHARD_FILE, text, inside=roots)
        except OSError as exc:
            self._problem(f"could not write {self.relpath(self.artifacts_dir)}/{SHARD_FILE}: {exc}")

    def replayed(self, bench: Bench, config_id: str) -> str | None:
        """The payload a shard recorded for this config (under --npubench-replay)."""
        return None if self.replay is None else self.replay.get(bench.name, {}).get(config_id)

    def _parallel_figures(self) -> int:
        """How many processes may draw figures at once: the xdist worker count (1 without)."""
        if not self.config.pluginmanager.has_plugin("dsession"):
            return 1
        return max(1, len(getattr(self.config.option, "tx", None) or ()))

    def _start_figure_jobs(self) -> None:
        """Under ``-n N``, start up to ``N - 1`` child processes that draw the figures of all
        but the last bench beside the run (pytest_npubench.drawing; ADR 0013), the benches
        dealt round-robin. Started now, they import while the workers run; each bench is
        sent to its child as soon as its last result arrives, so it is drawn while the
        workers still run the later benches (a child draws its benches one after another),
        and the last bench is drawn here at the end. Only benches whose figures are their
        own ``figures=`` function, found by discovery: a plugin's ``pytest_npubench_figures``
        hook runs here, in this process."""
        if self.is_worker or self.shard is not None or self._parallel_figures() < 2:
            return
        if len(self.config.hook.pytest_npubench_figures.get_hookimpls()) > 1:
            return
        drawable = [b for b in self.benches if b.figures is not None and b in self.sources][:-1]
        children = min(len(drawable), self._parallel_figures() - 1)
        for k in range(children):
            mine = drawable[k::children]
            try:
                job = start_figures([(self.sources[b], b.name) for b in mine], self.config.rootpath)
            except OSError:
                continue  # drawn here instead
            for bench in mine:
                self._figure_jobs[bench.name] = job

    def _warm_up_drawing(self) -> None:
        """Under xdist, at the first report, start the thread that draws this process's
        benches (those not given to a child) as each completes: it imports matplotlib
        (about 0.8 s) while the workers run, and draws the last bench while xdist shuts
        the workers down, instead of after."""
        if self._warmed or self._parallel_figures() < 2 or self.shard is not None:
            return
        self._warmed = True
        if len(self.config.hook.pytest_npubench_figures.get_hookimpls()) > 1:
            return  # a plugin's figures hook runs in the main thread
        if any(b.figures is not None and b.name not in self._figure_jobs for b in self.benches):
            self._here = DrawingThread()

    def _send_when_complete(self, bench: Bench) -> None:
        """Send a bench's results to its child, or to the drawing thread, once every config
        of the bench has reported (under ``-k`` or a node-id selection that never happens:
        then it is drawn at the end)."""
        if len(self.results.get(bench.name, ())) != len(bench.configs):
            return
        job = self._figure_jobs.get(bench.name)
        if job is not None:
            if bench.name not in job.sent:
                self._send_figures(bench, job)
            return
        here = self._here
        if here is not None and bench.figures is not None and bench.name not in here.sent:
            inputs = artifacts.figure_inputs(self.ordered_results(bench))
            if inputs:
                here.send(bench.name, inputs, lambda: self._draw_figures(bench, inputs))

    def _send_figures(self, bench: Bench, job: FigureJob) -> None:
        inputs = artifacts.figure_inputs(self.ordered_results(bench))
        if inputs:
            job.send(bench.name, inputs, self.artifacts_dir / bench.name, self.artifacts_dir)
        else:
            del self._figure_jobs[bench.name]  # nothing to draw

    def _send_figure_jobs(self) -> None:
        """Send the benches not sent yet; a bench whose results changed after it was sent (a
        re-reported config) is drawn here from the final ones, once its child is done."""
        for name, job in list(self._figure_jobs.items()):
            bench = next(b for b in self.benches if b.name == name)
            if name not in job.sent:
                self._send_figures(bench, job)
            elif job.sent[name] != artifacts.figure_inputs(self.ordered_results(bench)):
                job.finish()  # it may be writing this bench's files: let it end first
                del self._figure_jobs[name]
        for job in self._children():
            if not job.sent:
                job.cancel()  # none of its benches has anything to draw
        self._figure_jobs = {n: j for n, j in self._figure_jobs.items() if j.sent}

    def _children(self) -> list[FigureJob]:
        jobs: list[FigureJob] = []
        for job in self._figure_jobs.values():
            if all(job is not j for j in jobs):
                jobs.append(job)
        return jobs

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """No child is left behind, whatever ended the session."""
        self._cancel_figure_jobs()

    def _cancel_figure_jobs(self) -> None:
        for job in self._children():
            job.cancel()
        self._figure_jobs.clear()

    def _draw(self, bench: Bench, results: Mapping[str, ConfigResult]) -> list[Path]:
        if self.shard is not None:
            return []
        job = self._figure_jobs.pop(bench.name, None)
        if job is not None:
            try:
                return job.result(bench.name)
            except FigureError as exc:
                self.problems.append((f"figures of bench {bench.name!r} failed: {exc}", exc.detail))
            except Exception as exc:
                self._problem(f"figures of bench {bench.name!r} failed: {exc}")
            return []
        inputs = artifacts.figure_inputs(results)
        here = self._here
        if here is not None:
            here.join()  # matplotlib is the thread's until then
        hook = self.config.hook.pytest_npubench_figures
        if not inputs or (bench.figures is None and len(hook.get_hookimpls()) == 1):
            return []
        try:
            if here is not None and here.sent.get(bench.name) == inputs:
                return here.result(bench.name)
            return self._draw_figures(bench, inputs)
        except Exception as exc:
            self._problem(f"figures of bench {bench.name!r} failed: {exc!r}", exc)
            return []

    def _draw_figures(self, bench: Bench, inputs: Mapping[str, ConfigResult]) -> list[Path]:
        """Draw a bench's figures in this process (the figures hook); raises what it raises."""
        hook = self.config.hook.pytest_npubench_figures
        root = self.artifacts_dir
        outdir = root / bench.name
        return artifacts.draw(
            lambda: hook(config=self.config, bench=bench, results=inputs, outdir=outdir),
            outdir,
            root,
            use_mpl=True,
        )

    def _problem(self, line: str, exc: BaseException | None = None) -> None:
        self.problems.append((line, bench_traceback(exc) if exc is not None else ""))

    # -- terminal ---------------------------------------------------------------------------

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """Per bench a table (regressions first), then what regen wrote, artifacts and errors."""
        if self.is_worker:
            return
        tr = terminalreporter
        verbosity = self.config.option.verbose
        for bench in self.benches:
            results = self.ordered_results(bench)
            if not results:
                continue
            if verbosity >= 0:
                tr.write_sep("-", f"npubench: {bench.name}")
            tr.write_line(bench_line(bench, results))
            for line in self.whatif_lines(bench):  # even under -q: it explains every delta
                tr.write_line(line, yellow=True)
            if verbosity < 0:
                continue
            for line in bench_table(bench, results, everything=verbosity > 0):
                tr.write_line(line)
            self._improved_lines(tr, bench, results)
        verbose = verbosity > 0
        for report in self.regen_reports:
            tr.write_sep("-", "npubench: baselines")
            of = next((b for b in self.benches if self.baseline_path(b) == report.path), None)
            for line in regen_lines(report, self.relpath(report.path), verbose, of):
                tr.write_line(line)
        if self.artifact_files:
            tr.write_line(f"npubench: artifacts in {self.relpath(self.artifacts_dir)}/")
        if self.trace:
            self._trace_lines(tr)
        for line, detail in self.problems:
            tr.write_sep("-", "npubench: error", red=True)
            tr.write_line(f"ERROR {line}", red=True)
            if detail:
                tr.write_line(detail)

    def _trace_lines(self, tr: pytest.TerminalReporter) -> None:
        for bench in self.benches:
            ran = [r for r in self.ordered_results(bench).values() if r.source == "run"]
            if bench.trace is None:
                tr.write_line(
                    f"npubench: bench {bench.name!r} writes no traces (no trace= in its Bench)"
                )
                continue
            traces = [self.trace_path(bench, r.config_id) for r in ran]
            found = [t for t in traces if t.is_file()]
            where = self.relpath(self.artifacts_dir / bench.name / "traces")
            tr.write_line(f"npubench: {len(found)} trace(s) of {bench.name} in {where}/")

    def _improved_lines(
        self, tr: pytest.TerminalReporter, bench: Bench, results: Mapping[str, ConfigResult]
    ) -> None:
        if self.regen or self.fail_improvements:
            return
        for r in results.values():
            if r.verdict == "improved":
                better = [n for n, c in r.comparisons.items() if c.verdict == "improved"]
                changes = ", ".join(f"{n} {percent(r.comparisons[n].change)}" for n in better)
                tr.write_line(
                    f"improved: run --regen-baselines to accept: "
                    f"{item_name(bench.name, r.config_id)} ({changes})"
                )


def _bench_paths(config: pytest.Config) -> list[Path]:
    paths = config.getini("npubench_paths")
    if not paths:
        return [config.rootpath / "benches"]
    return [Path(p) for p in paths]


def _ini_dir(config: pytest.Config, value: str) -> Path:
    base = config.inipath.parent if config.inipath else config.rootpath
    return base / value
