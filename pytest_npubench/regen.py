"""--regen-baselines at the end of a run: merge each bench's results into its baseline file
under the file's lock, and write it only if it changed (a file it cannot read is never
replaced or shrunk)."""

from __future__ import annotations

from collections.abc import Mapping

from pytest_npubench.baseline import (
    BaselineError,
    OutsideLinkError,
    RegenReport,
    load,
    locked,
    merge,
)
from pytest_npubench.baseline import write_atomic as write_baseline
from pytest_npubench.bench import Bench
from pytest_npubench.compare import ConfigResult
from pytest_npubench.report import mixed_topology_message, unreadable_message
from pytest_npubench.run_baselines import RunBaselines
from pytest_npubench.state import RunState


class Regen:
    """Rewrites the baselines of the selected benches (the controller, at session finish)."""

    def __init__(self, state: RunState, baselines: RunBaselines) -> None:
        self.state = state
        self.baselines = baselines

    def rewrite(self, bench: Bench) -> None:
        """Merge this run's results of ``bench`` into its baseline file; errors are problems."""
        state = self.state
        results = state.ordered_results(bench)
        report = RegenReport(state.baseline_path(bench))
        if not results:
            return
        state.not_accepted.add(bench.name)  # until the write (or an identical file) proves it
        where = state.relpath(report.path)
        try:
            with locked(report.path, inside=(state.config.rootpath, state.baselines_dir)):
                self._locked(bench, results, report)
        except OutsideLinkError as exc:  # names the link and its target; no traceback to show
            state.problem(f"bench {bench.name!r}: {exc}")
        except (OSError, TimeoutError) as exc:
            state.problem(f"{where}: could not lock or write it ({exc}); not written", exc)

    def _locked(
        self, bench: Bench, results: Mapping[str, ConfigResult], report: RegenReport
    ) -> None:
        """Read, merge and write under the file's lock, so concurrent regens all land."""
        if not self._reload(bench, report):
            return
        text = self._merged_text(bench, results, report)
        if text is not None and report.not_remeasured:
            self.state.problem(
                mixed_topology_message(bench, report, self.state.relpath(report.path))
            )
            text = None
        if text is not None and self._write_if_changed(report, text):
            self.state.regen_reports.append(report)
            self.state.not_accepted.discard(bench.name)

    def _reload(self, bench: Bench, report: RegenReport) -> bool:
        """Re-read the file (another run may have written it); one it cannot read is never
        replaced or shrunk: the regen stops for this bench and says how to fix it."""
        try:
            self.baselines.files[bench.name] = load(report.path, bench.name)
        except BaselineError as exc:
            where = self.state.relpath(report.path)
            self.state.problem(f"{unreadable_message(bench.name, where, exc)}; not written")
            return False
        return True

    def _merged_text(
        self, bench: Bench, results: Mapping[str, ConfigResult], report: RegenReport
    ) -> str | None:
        try:
            merged = merge(
                bench,
                self.baselines.files[bench.name],
                results.values(),
                fingerprint=bench.fingerprint(),
                meta=bench.meta() if bench.meta else {},
                prune=self.state.prune,
                report=report,
                topology=self.baselines.topology_content(bench),
            )
            return merged.render()
        except Exception as exc:
            where = self.state.relpath(report.path)
            self.state.problem(
                f"bench {bench.name!r}: cannot make {where}: {exc!r}; not written", exc
            )
            return None

    def _write_if_changed(self, report: RegenReport, text: str) -> bool:
        """Write the baseline unless it already holds exactly this text; False on failure."""
        path = report.path
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            return True
        try:
            state = self.state
            write_baseline(path, text, inside=(state.config.rootpath, state.baselines_dir))
        except Exception as exc:
            where = self.state.relpath(path)
            self.state.problem(
                f"could not write {where} ({exc!r}); the previous file is left as it was", exc
            )
            return False
        report.written = True
        return True
