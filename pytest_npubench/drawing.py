"""Figures drawn beside the controller, in fresh processes, when the run is parallel (xdist).

The controller of an xdist run gathers every result and then draws each bench's figures; drawn
one bench after another they were most of a run's wall time (issue 14). Under ``-n N`` the
figures of all benches but the last go to up to ``N - 1`` child processes (``python -m
pytest_npubench.drawing``), dealt round-robin and started with the session so that their
imports overlap the run. A bench is sent to its child as soon as its last result has
reported, so it is drawn while the workers still run the later benches (a child draws its
benches one after another); the controller draws the last bench itself at the end.

A child is a new interpreter (not a fork: the xdist controller runs execnet threads, and a
forked copy of them is unsafe). It imports the bench module from the same file, rebuilds the
results from the same JSON payloads that carried them from the workers, and draws under the
same :func:`~pytest_npubench.artifacts.reproducible_matplotlib` settings, so a figure's bytes do
not depend on which process drew it (``-n 0`` and ``-n 2`` write the same files).
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_npubench.compare import ConfigResult
from pytest_npubench.discover import benches_in, import_bench_module
from pytest_npubench.figure_context import FigureContext, using


@dataclass
class FigureJob:
    """A child process that draws the figures of one or more benches, each once it is sent
    that bench's results (one after another, in the order sent).

    Started early (the controller's session start), it imports matplotlib and the bench
    modules while the workers run, then reads jobs from stdin, one line each.
    """

    process: subprocess.Popen[str]
    #: the results each bench was sent (absent until :meth:`send`)
    sent: dict[str, dict[str, ConfigResult]] = field(default_factory=dict)
    job_files: list[Path] = field(default_factory=list)
    answers: dict[str, dict[str, Any]] | None = None
    error: str = ""

    def send(
        self,
        bench: str,
        results: Mapping[str, ConfigResult],
        outdir: Path,
        root: Path,
        context: FigureContext | None = None,
    ) -> None:
        """Hand over one bench's results (and what its figures must say about the run); the
        child draws into ``outdir`` (paths relative to root). The job goes through a file
        and only its name through the pipe."""
        job = {
            "bench": bench,
            "outdir": str(outdir),
            "root": str(root),
            "results": [r.to_payload() for r in results.values()],
            "context": None if context is None else context.to_json(),
        }
        with tempfile.NamedTemporaryFile(
            "w", suffix=".json", prefix="npubench-figures-", delete=False, encoding="utf-8"
        ) as handle:
            json.dump(job, handle)
        self.job_files.append(Path(handle.name))
        self.sent[bench] = dict(results)
        stdin = self.process.stdin
        if stdin is None:
            return
        try:
            stdin.write(handle.name + "\n")
            stdin.flush()
        except OSError:  # the child died early; result() says why
            pass

    def finish(self) -> None:
        """No more jobs: wait until the child has drawn every one it was sent."""
        if self.answers is not None:
            return
        self._close_stdin()
        out, err = self.process.communicate()
        self._remove_job_files()
        self.answers = {}
        for line in out.splitlines():
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            if isinstance(answer, dict) and "bench" in answer:
                self.answers[answer["bench"]] = answer
        tail = "\n".join(err.strip().splitlines()[-20:]) or "no output"
        self.error = f"the process drawing them exited with {self.process.returncode}:\n{tail}"

    def result(self, bench: str) -> list[Path]:
        """Wait for the child; the figure files it drew for ``bench``, relative to the
        artifact root.

        Raises :class:`FigureError` with the child's message and bench traceback if the
        figures function raised, or RuntimeError if the child itself died.
        """
        self.finish()
        assert self.answers is not None
        answer = self.answers.get(bench)
        if answer is None:
            raise RuntimeError(self.error)
        if "error" in answer:
            raise FigureError(answer["error"], answer["traceback"])
        return [Path(p) for p in answer["paths"]]

    def cancel(self) -> None:
        """Not needed any more: the child exits at the end of its input (killed if it does
        not within 30 s)."""
        self._close_stdin()
        try:
            self.process.communicate(timeout=30)  # reads and closes its pipes
        except subprocess.TimeoutExpired:
            self.kill()
        self.answers = self.answers or {}
        self._remove_job_files()

    def kill(self) -> None:
        """Stop the child now, whatever it is doing."""
        self._close_stdin()
        self.process.kill()
        self.process.communicate()
        self.answers = self.answers or {}
        self._remove_job_files()

    def _close_stdin(self) -> None:
        stdin, self.process.stdin = self.process.stdin, None  # communicate() must not touch it
        if stdin is None:
            return
        with contextlib.suppress(OSError):
            stdin.close()

    def _remove_job_files(self) -> None:
        for path in self.job_files:
            path.unlink(missing_ok=True)


class DrawingThread:
    """A thread of the xdist controller that draws the benches the controller draws itself,
    each as soon as its results are complete, while the controller's main thread goes on
    receiving reports (it only waits for events, so the two hardly share the interpreter).
    It imports matplotlib when started. Only this thread uses matplotlib until
    :meth:`join` returns; the benches are drawn one after another, as in ``-n 0``."""

    def __init__(self) -> None:
        self.sent: dict[str, dict[str, ConfigResult]] = {}
        self.done: dict[str, list[Path] | BaseException] = {}
        self._jobs: queue.SimpleQueue[tuple[str, Callable[[], list[Path]]] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._run, name="npubench-figures", daemon=True)
        self._thread.start()

    def send(
        self, bench: str, results: Mapping[str, ConfigResult], draw: Callable[[], list[Path]]
    ) -> None:
        """Draw ``bench`` (``draw()`` returns its files) once the ones sent before are done."""
        self.sent[bench] = dict(results)
        self._jobs.put((bench, draw))

    def join(self) -> None:
        """Wait until every bench sent is drawn; afterwards matplotlib is free to use."""
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join()

    def result(self, bench: str) -> list[Path]:
        """The files drawn for ``bench`` (after :meth:`join`); re-raises what drawing raised."""
        self.join()
        outcome = self.done[bench]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _run(self) -> None:
        from pytest_npubench.artifacts import reproducible_matplotlib

        with reproducible_matplotlib():
            import matplotlib.pyplot  # noqa: F401  (imported while the workers run)
        while (job := self._jobs.get()) is not None:
            bench, draw = job
            try:
                self.done[bench] = draw()
            except Exception as exc:
                self.done[bench] = exc


class FigureError(Exception):
    """A bench's figures function raised in a child; ``str`` is its ``repr`` as the controller
    would have shown it, ``detail`` its traceback (bench frames only)."""

    def __init__(self, error: str, detail: str) -> None:
        super().__init__(error)
        self.detail = detail


def start(benches: list[tuple[Path, str]], rootpath: Path) -> FigureJob:
    """Start a child for ``benches`` (each defined in the module at its path); send work later."""
    args = [str(part) for source, name in benches for part in (source, name)]
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_npubench.drawing", str(rootpath), *args],
        cwd=rootpath,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return FigureJob(process)


def main(rootpath_text: str, *pairs: str) -> None:
    """The child: import, then for each job named on stdin draw and print the paths as JSON."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # imported while the workers still run

    from pytest_npubench import artifacts, item  # noqa: F401  (what a job needs, imported now)

    rootpath = Path(rootpath_text)
    if str(rootpath) not in sys.path:
        sys.path.insert(0, str(rootpath))  # as pytest's rootdir conftest puts it there
    benches: dict[str, Any] = {}
    for source, name in zip(pairs[::2], pairs[1::2], strict=True):
        try:
            module = import_bench_module(Path(source), rootpath)
            benches[name] = next(b for b in benches_in(module) if b.name == name)
        except Exception as exc:  # the controller imported it fine; say why this one did not
            benches[name] = {"error": repr(exc), "traceback": ""}
    for line in sys.stdin:
        job = json.loads(Path(line.strip()).read_text(encoding="utf-8"))
        name = job["bench"]
        bench = benches[name]
        if isinstance(bench, dict):
            answer = bench
        else:
            answer = _draw_job(bench, job) if bench.figures is not None else {"paths": []}
        print(json.dumps({"bench": name, **answer}), flush=True)


def _draw_job(bench: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Draw one job's figures in this child: the paths drawn, or the error and traceback."""
    from pytest_npubench.artifacts import draw
    from pytest_npubench.item import bench_traceback

    results = {}
    for payload in job["results"]:
        result = ConfigResult.from_payload(payload, bench)
        results[result.config_id] = result
    outdir, root = Path(job["outdir"]), Path(job["root"])
    figures = bench.figures
    raw = job.get("context")
    context = None if raw is None else FigureContext.from_json(raw)

    def drawn() -> list[Any]:
        with using(context):
            return [figures(results, outdir)]

    try:
        paths = draw(drawn, outdir, root, use_mpl=True)
    except Exception as exc:
        return {"error": repr(exc), "traceback": bench_traceback(exc)}
    return {"paths": [p.as_posix() for p in paths]}


if __name__ == "__main__":
    main(*sys.argv[1:])
