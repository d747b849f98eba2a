"""The terminal summary of a bench run: a what-if summarised once (before pytest's failure
sections), then per bench its count line, one line per config that failed on its metrics
(headline first), a table of the rest, what regen wrote, the artifacts, traces and errors.

With more than :data:`FULL_MOST` configs failing on their metrics (and no ``-v``), their full
tables leave pytest's FAILURES and short-summary sections (pytest still counts them): the
lines here say what each did, ``-v`` and index.html show the tables.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_npubench import whatif
from pytest_npubench.headline import GATE_VERDICTS
from pytest_npubench.report import (
    bench_line,
    bench_table,
    headline_lines,
    regen_command,
    regen_lines,
)
from pytest_npubench.run_baselines import RunBaselines
from pytest_npubench.state import RunState

#: up to this many configs that failed on their metrics keep their full message in pytest's
#: FAILURES section without -v (a screen); more are one line each
FULL_MOST = 3


def _gate_failure(report: Any) -> bool:
    """True for the report of a config that failed its gate on metric values."""
    if getattr(report, "when", None) != "call" or not getattr(report, "failed", False):
        return False
    for key, payload in getattr(report, "user_properties", ()):
        if key == "npubench" and isinstance(payload, str):
            return bool(json.loads(payload).get("verdict") in GATE_VERDICTS)
    return False


class TerminalSummary:
    """Writes the plugin's part of pytest's terminal summary (the controller)."""

    def __init__(self, state: RunState, baselines: RunBaselines) -> None:
        self.state = state
        self.baselines = baselines
        self.compact = False

    def whatif_lines(self) -> list[str]:
        """The what-if block of this run ([] if no bench runs on other hardware)."""
        state = self.state
        rows = []
        for bench in state.benches:
            results = state.ordered_results(bench)
            if results:
                rows.append((bench, results, whatif.constant_changes(self.baselines, bench)))
        return whatif.summary_lines(rows)

    def before(self, tr: pytest.TerminalReporter) -> list[Any] | None:
        """Before pytest's failure sections: the what-if block (even under -q), and without -v
        the configs that failed on their metrics taken out of those sections when there are
        more than :data:`FULL_MOST`. Returns the list to give back to :meth:`restore`."""
        lines = self.whatif_lines()
        if lines:
            tr.write_sep("-", "npubench: hardware what-if", yellow=True)
            for line in lines:
                tr.write_line(line, yellow=True)
        failed = tr.stats.get("failed")
        if self.state.config.option.verbose > 0 or not failed:
            return None
        gate = [rep for rep in failed if _gate_failure(rep)]
        if len(gate) <= FULL_MOST:
            return None
        self.compact = True
        tr.stats["failed"] = [rep for rep in failed if not _gate_failure(rep)]
        return list(failed)

    @staticmethod
    def restore(tr: pytest.TerminalReporter, failed: list[Any] | None) -> None:
        """Give pytest its failed reports back (its count line counts every one)."""
        if failed is not None:
            tr.stats["failed"] = failed

    def write(self, tr: pytest.TerminalReporter) -> None:
        """Per bench its counts, one line per config that moved, a table of the rest, then
        what regen wrote, artifacts and errors."""
        state = self.state
        verbosity = state.config.option.verbose
        for bench in state.benches:
            results = state.ordered_results(bench)
            if not results:
                continue
            if verbosity >= 0:
                tr.write_sep("-", f"npubench: {bench.name}")
            tr.write_line(bench_line(bench, results, state.regen, state.fail_improvements))
            if verbosity < 0:
                continue
            moved = headline_lines(bench, results)
            if moved:
                what = "accepted by --regen-baselines" if state.regen else "headline first"
                tr.write_line(f"configs that moved beyond tolerance ({what}):")
                for line in moved:
                    tr.write_line(line)
            for line in bench_table(bench, results, everything=verbosity > 0):
                tr.write_line(line)
            if moved and not state.regen:
                more = "; -v shows each one's full table, index.html all" if self.compact else ""
                tr.write_line(f"if every change is intended: {regen_command(bench.name)}{more}")
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
