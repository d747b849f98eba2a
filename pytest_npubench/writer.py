"""The artifact folder at the end of a run: each bench's figures (from whoever drew them) and
timelines, then results.json, summary.md and index.html (:mod:`~pytest_npubench.artifacts`).

An interrupted run (Ctrl-C) draws nothing from its partial results, and every file it writes
says INTERRUPTED: the step summary of a CI job must not call a run clean that did not end.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_npubench import artifacts, whatif
from pytest_npubench.bench import Bench
from pytest_npubench.compare import ConfigResult
from pytest_npubench.figure_jobs import FigureJobs
from pytest_npubench.run_baselines import RunBaselines
from pytest_npubench.state import RunState
from pytest_npubench.timeline import draw_timeline


class ArtifactWriter:
    """Writes the artifact folder (the controller, at session finish)."""

    def __init__(self, state: RunState, baselines: RunBaselines, figures: FigureJobs) -> None:
        self.state = state
        self.baselines = baselines
        self.figures = figures

    def write(self) -> None:
        """Draw, then write results.json, summary.md and index.html; errors are problems."""
        state = self.state
        root = state.artifacts_dir
        entries = []
        drawn = self._drawn()
        for bench in state.benches:
            results = state.ordered_results(bench)
            if results:
                self._draw_timelines(bench, results)
                entries.append(
                    artifacts.BenchArtifacts(
                        bench,
                        results,
                        state.fingerprint(bench),
                        state.relpath(state.baseline_path(bench)),
                        drawn.get(bench.name, []),
                        self._whatif(bench, results),
                        self.baselines.topology_content(bench),
                    )
                )
        merge = state.config.pluginmanager.get_plugin("npubench-merge")  # replay.PLUGIN_NAME
        run = artifacts.run_metadata(
            state.config.invocation_params.args,
            state.config.rootpath,
            getattr(merge, "invocation", None),
        )
        if state.interrupted:
            run["interrupted"] = True
        try:
            state.artifact_files = artifacts.write(
                root,
                entries,
                [p for p, _ in state.problems],
                state.regen,
                state.trace_path,
                state.fail_improvements,
                state.not_accepted,
                run,
            )
        except OSError as exc:
            state.problem(f"could not write the artifacts to {state.relpath(root)}: {exc!r}")

    def _whatif(self, bench: Bench, results: Mapping[str, ConfigResult]) -> list[str]:
        """The what-if summary of one bench (which constants, how many moved, the headline's
        median and worst change), then which fingerprints were compared."""
        lines = self.baselines.whatif_lines(bench)
        if not lines:
            return []
        changes = whatif.constant_changes(self.baselines, bench)
        return [*whatif.summary_lines([(bench, results, changes)]), lines[0]]

    def _drawn(self) -> dict[str, list[Path]]:
        """Each bench's figures: this process draws its own benches first, then takes what
        the children drew. An interrupted run draws none (its children stop)."""
        if self.state.interrupted:
            self.figures.join_thread()  # it draws only complete benches; let it end its file
            self.figures.cancel()
            return {}
        order = sorted(self.state.benches, key=self.figures.by_child)
        drawn = {b.name: self.figures.draw(b, self.state.ordered_results(b)) for b in order}
        self.figures.remove_stale(drawn)  # no figure of an earlier run left beside them
        return drawn

    def _draw_timelines(self, bench: Bench, results: Mapping[str, ConfigResult]) -> None:
        """A Gantt PNG beside each trace written in this run (index.html shows it)."""
        state = self.state
        if not state.trace or bench.trace is None or state.interrupted:
            return
        self.figures.join_thread()  # matplotlib is the drawing thread's until then
        for result in results.values():
            trace = state.trace_path(bench, result.config_id)
            if result.source != "run" or not trace.is_file():
                continue
            try:
                with artifacts.reproducible_matplotlib():
                    draw_timeline(
                        trace, trace.with_suffix(".png"), f"{bench.name}[{result.config_id}]"
                    )
            except Exception as exc:
                state.problem(f"timeline of {state.relpath(trace)} failed: {exc!r}", exc)
