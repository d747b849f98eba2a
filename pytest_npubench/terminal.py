"""The terminal summary of a bench run: per bench a table (regressions first), then what regen
wrote, where the artifacts are, the traces, and the run's errors."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pytest_npubench.bench import Bench
from pytest_npubench.compare import ConfigResult
from pytest_npubench.report import bench_line, bench_table, item_name, percent, regen_lines
from pytest_npubench.run_baselines import RunBaselines
from pytest_npubench.state import RunState


class TerminalSummary:
    """Writes the plugin's part of pytest's terminal summary (the controller)."""

    def __init__(self, state: RunState, baselines: RunBaselines) -> None:
        self.state = state
        self.baselines = baselines

    def write(self, tr: pytest.TerminalReporter) -> None:
        """Per bench a table (regressions first), then what regen wrote, artifacts and errors."""
        state = self.state
        verbosity = state.config.option.verbose
        for bench in state.benches:
            results = state.ordered_results(bench)
            if not results:
                continue
            if verbosity >= 0:
                tr.write_sep("-", f"npubench: {bench.name}")
            tr.write_line(bench_line(bench, results))
            for line in self.baselines.whatif_lines(bench):  # even under -q: explains deltas
                tr.write_line(line, yellow=True)
            if verbosity < 0:
                continue
            for line in bench_table(bench, results, everything=verbosity > 0):
                tr.write_line(line)
            self._improved_lines(tr, bench, results)
        verbose = verbosity > 0
        for report in state.regen_reports:
            tr.write_sep("-", "npubench: baselines")
            of = next((b for b in state.benches if state.baseline_path(b) == report.path), None)
            for line in regen_lines(report, state.relpath(report.path), verbose, of):
                tr.write_line(line)
        if state.artifact_files:
            partial = " (interrupted: partial)" if state.interrupted else ""
            tr.write_line(f"npubench: artifacts in {state.relpath(state.artifacts_dir)}/{partial}")
        if state.trace:
            self._trace_lines(tr)
        for line, detail in state.problems:
            tr.write_sep("-", "npubench: error", red=True)
            tr.write_line(f"ERROR {line}", red=True)
            if detail:
                tr.write_line(detail)

    def _trace_lines(self, tr: pytest.TerminalReporter) -> None:
        state = self.state
        for bench in state.benches:
            ran = [r for r in state.ordered_results(bench).values() if r.source == "run"]
            if bench.trace is None:
                tr.write_line(
                    f"npubench: bench {bench.name!r} writes no traces (no trace= in its Bench)"
                )
                continue
            traces = [state.trace_path(bench, r.config_id) for r in ran]
            found = [t for t in traces if t.is_file()]
            where = state.relpath(state.artifacts_dir / bench.name / "traces")
            tr.write_line(f"npubench: {len(found)} trace(s) of {bench.name} in {where}/")

    def _improved_lines(
        self, tr: pytest.TerminalReporter, bench: Bench, results: Mapping[str, ConfigResult]
    ) -> None:
        if self.state.regen or self.state.fail_improvements:
            return
        for r in results.values():
            if r.verdict == "improved":
                better = [n for n, c in r.comparisons.items() if c.verdict == "improved"]
                changes = ", ".join(f"{n} {percent(r.comparisons[n].change)}" for n in better)
                tr.write_line(
                    f"improved: run --regen-baselines to accept: "
                    f"{item_name(bench.name, r.config_id)} ({changes})"
                )
