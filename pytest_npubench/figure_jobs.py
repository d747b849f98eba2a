"""Who draws each bench's figures, and when: child processes beside an xdist run, a thread of
the controller, or the controller itself at the end (the processes themselves:
:mod:`~pytest_npubench.drawing`; ADR 0013)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_npubench import artifacts
from pytest_npubench.bench import Bench
from pytest_npubench.compare import ConfigResult
from pytest_npubench.drawing import DrawingThread, FigureError, FigureJob
from pytest_npubench.drawing import start as start_figures
from pytest_npubench.figure_context import FigureContext, for_bench, using
from pytest_npubench.run_baselines import RunBaselines
from pytest_npubench.stale import remove_stale
from pytest_npubench.state import RunState


class FigureJobs:
    """The figure drawing of one session (the controller's; workers draw nothing)."""

    def __init__(self, state: RunState, baselines: RunBaselines | None = None) -> None:
        self.state = state
        self.baselines = baselines  # tells a what-if (None: never one)
        self._jobs: dict[str, FigureJob] = {}  # benches drawn by a child process
        self._warmed = False  # the drawing thread considered (xdist controller)
        self._here: DrawingThread | None = None  # draws this process's benches early

    def _parallel(self) -> int:
        """How many processes may draw figures at once: the xdist worker count (1 without)."""
        config = self.state.config
        if not config.pluginmanager.has_plugin("dsession"):
            return 1
        return max(1, len(getattr(config.option, "tx", None) or ()))

    def _hooked(self) -> bool:
        """A plugin implements ``pytest_npubench_figures``: it runs in this process."""
        return len(self.state.config.hook.pytest_npubench_figures.get_hookimpls()) > 1

    def start(self) -> None:
        """Under ``-n N``, start up to ``N - 1`` child processes that draw the figures of all
        but the last bench beside the run (pytest_npubench.drawing; ADR 0013), the benches
        dealt round-robin. Started now, they import while the workers run; each bench is
        sent to its child as soon as its last result arrives, so it is drawn while the
        workers still run the later benches (a child draws its benches one after another),
        and the last bench is drawn here at the end. Only benches whose figures are their
        own ``figures=`` function, found by discovery: a plugin's ``pytest_npubench_figures``
        hook runs here, in this process."""
        state = self.state
        if state.is_worker or state.shard is not None or self._parallel() < 2 or self._hooked():
            return
        drawable = [b for b in state.benches if b.figures is not None and b in state.sources]
        drawable = drawable[:-1]
        children = min(len(drawable), self._parallel() - 1)
        for k in range(children):
            mine = drawable[k::children]
            try:
                job = start_figures(
                    [(state.sources[b], b.name) for b in mine], state.config.rootpath
                )
            except OSError:
                continue  # drawn here instead
            for bench in mine:
                self._jobs[bench.name] = job

    def warm_up(self) -> None:
        """Under xdist, at the first report, start the thread that draws this process's
        benches (those not given to a child) as each completes: it imports matplotlib
        (about 0.8 s) while the workers run, and draws the last bench while xdist shuts
        the workers down, instead of after."""
        if self._warmed or self._parallel() < 2 or self.state.shard is not None:
            return
        self._warmed = True
        if self._hooked():
            return  # a plugin's figures hook runs in the main thread
        if any(b.figures is not None and b.name not in self._jobs for b in self.state.benches):
            self._here = DrawingThread()

    def by_child(self, bench: Bench) -> bool:
        """A child process draws this bench."""
        return bench.name in self._jobs

    def send_when_complete(self, bench: Bench) -> None:
        """Send a bench's results to its child, or to the drawing thread, once every config
        of the bench has reported (under ``-k`` or a node-id selection that never happens:
        then it is drawn at the end)."""
        if len(self.state.results.get(bench.name, ())) != len(bench.configs):
            return
        job = self._jobs.get(bench.name)
        if job is not None:
            if bench.name not in job.sent:
                self._send(bench, job)
            return
        here = self._here
        if here is not None and bench.figures is not None and bench.name not in here.sent:
            context, inputs = self.inputs(bench, self.state.ordered_results(bench))
            if inputs:
                here.send(bench.name, inputs, lambda: self._draw_here(bench, inputs, context))

    def inputs(
        self, bench: Bench, results: Mapping[str, ConfigResult]
    ) -> tuple[FigureContext, dict[str, ConfigResult]]:
        """What a bench's figures draw (every config with values; under a what-if only those
        measured on this run's topology) and what they must say about the run (issue 27)."""
        state = self.state
        whatif = ""
        if self.baselines is not None and self.baselines.whatif_lines(bench):
            file = self.baselines.file(bench)
            before = file.fingerprint if file is not None else "?"
            whatif = f"this run {state.fingerprint(bench)}, baseline {before}"
        return for_bench(
            bench.name,
            len(bench.configs),
            results,
            regen=state.regen,
            fail_improvements=state.fail_improvements,
            whatif=whatif,
        )

    def _send(self, bench: Bench, job: FigureJob) -> None:
        context, inputs = self.inputs(bench, self.state.ordered_results(bench))
        if inputs:
            root = self.state.artifacts_dir
            job.send(bench.name, inputs, root / bench.name, root, context)
        else:
            del self._jobs[bench.name]  # nothing to draw

    def send_the_rest(self) -> None:
        """Send the benches not sent yet; a bench whose results changed after it was sent (a
        re-reported config) is drawn here from the final ones, once its child is done."""
        for name, job in list(self._jobs.items()):
            bench = next(b for b in self.state.benches if b.name == name)
            if name not in job.sent:
                self._send(bench, job)
            elif job.sent[name] != self.inputs(bench, self.state.ordered_results(bench))[1]:
                job.finish()  # it may be writing this bench's files: let it end first
                del self._jobs[name]
        for job in self._children():
            if not job.sent:
                job.cancel()  # none of its benches has anything to draw
        self._jobs = {n: j for n, j in self._jobs.items() if j.sent}

    def _children(self) -> list[FigureJob]:
        jobs: list[FigureJob] = []
        for job in self._jobs.values():
            if all(job is not j for j in jobs):
                jobs.append(job)
        return jobs

    def cancel(self) -> None:
        """No child is left behind: each ends after the bench it is drawing, if any."""
        for job in self._children():
            job.cancel()
        self._jobs.clear()

    def join_thread(self) -> None:
        """Wait for the drawing thread (matplotlib is the thread's until then)."""
        if self._here is not None:
            self._here.join()

    def draw(self, bench: Bench, results: Mapping[str, ConfigResult]) -> list[Path]:
        """The bench's figure files (relative to the artifact root), drawn by whoever draws
        them; a figures function that raises is a problem of the run, and no figures."""
        state = self.state
        if state.shard is not None:
            return []
        job = self._jobs.pop(bench.name, None)
        if job is not None:
            try:
                return job.result(bench.name)
            except FigureError as exc:
                state.problems.append(
                    (f"figures of bench {bench.name!r} failed: {exc}", exc.detail)
                )
            except Exception as exc:
                state.problem(f"figures of bench {bench.name!r} failed: {exc}")
            return []
        context, inputs = self.inputs(bench, results)
        here = self._here
        self.join_thread()
        if not inputs or (bench.figures is None and not self._hooked()):
            return []
        try:
            if here is not None and here.sent.get(bench.name) == inputs:
                return here.result(bench.name)
            return self._draw_here(bench, inputs, context)
        except Exception as exc:
            state.problem(f"figures of bench {bench.name!r} failed: {exc!r}", exc)
            return []

    def _draw_here(
        self, bench: Bench, inputs: Mapping[str, ConfigResult], context: FigureContext
    ) -> list[Path]:
        """Draw a bench's figures in this process (the figures hook); raises what it raises."""
        config = self.state.config
        hook = config.hook.pytest_npubench_figures
        root = self.state.artifacts_dir
        outdir = root / bench.name

        def draw() -> list[Any]:
            with using(context):
                return list(hook(config=config, bench=bench, results=inputs, outdir=outdir))

        return artifacts.draw(draw, outdir, root, use_mpl=True)

    def remove_stale(self, drawn: Mapping[str, Sequence[Path]]) -> list[Path]:
        """After drawing: remove figures this run did not draw from its benches' folders and
        the folders of benches this run did not select (:mod:`pytest_npubench.stale`)."""
        state = self.state
        if state.shard is not None or state.interrupted:
            return []
        known = {b.name for b in state.sources} | {b.name for b in state.benches}
        try:
            return remove_stale(state.artifacts_dir, known, drawn)
        except OSError as exc:
            state.problem(
                f"could not remove stale figures in {state.relpath(state.artifacts_dir)}: {exc!r}"
            )
            return []
