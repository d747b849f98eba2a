"""Figures drawn beside the controller, in fresh processes, when the run is parallel (xdist).

The controller of an xdist run gathers every result and then draws each bench's figures; drawn
one bench after another they were most of a run's wall time (issue 14). Under ``-n N`` up to
``N`` benches, all but the last, are handed to child processes (``python -m
pytest_npubench.drawing``), started with the session so that their imports overlap the run.
Each child is sent its bench's results as soon as the last of them has reported, so it draws
while the workers still run the later benches; the controller draws the last bench itself at
the end (it finishes last, and is drawn without a hand-over).

A child is a new interpreter (not a fork: the xdist controller runs execnet threads, and a
forked copy of them is unsafe). It imports the bench module from the same file, rebuilds the
results from the same JSON payloads that carried them from the workers, and draws under the
same :func:`~pytest_npubench.artifacts.reproducible_matplotlib` settings, so a figure's bytes do
not depend on which process drew it (``-n 0`` and ``-n 2`` write the same files).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_npubench.compare import ConfigResult
from pytest_npubench.discover import benches_in, import_bench_module


@dataclass
class FigureJob:
    """A child process that draws one bench's figures once it is sent the results.

    Started early (the controller's session start), it imports matplotlib and the bench module
    while the workers run, then waits for its job on stdin.
    """

    bench: str
    process: subprocess.Popen[str]
    job_file: Path | None = None
    #: the results it was sent (None until :meth:`send`)
    sent: dict[str, ConfigResult] | None = None

    def send(self, results: Mapping[str, ConfigResult], outdir: Path, root: Path) -> None:
        """Hand over the results; the child draws into ``outdir`` (paths relative to root).
        The job goes through a file and only its name through the pipe, so this never waits
        for a child that is still importing."""
        job = {
            "outdir": str(outdir),
            "root": str(root),
            "results": [r.to_payload() for r in results.values()],
        }
        with tempfile.NamedTemporaryFile(
            "w", suffix=".json", prefix="npubench-figures-", delete=False, encoding="utf-8"
        ) as handle:
            json.dump(job, handle)
        self.job_file = Path(handle.name)
        self._close_stdin(handle.name)
        self.sent = dict(results)

    def cancel(self) -> None:
        """Not needed after all: the child exits on an empty job (killed if it does not)."""
        self._close_stdin("")
        try:
            self.process.communicate(timeout=30)  # reads and closes its pipes
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
        if self.job_file is not None:
            self.job_file.unlink(missing_ok=True)

    def kill(self) -> None:
        """Stop the child now, whatever it is doing (its results went stale)."""
        self._close_stdin("")
        self.process.kill()
        self.process.communicate()
        if self.job_file is not None:
            self.job_file.unlink(missing_ok=True)

    def _close_stdin(self, text: str) -> None:
        stdin, self.process.stdin = self.process.stdin, None  # communicate() must not touch it
        if stdin is None:
            return
        try:
            stdin.write(text)
            stdin.close()
        except OSError:  # the child died early; result() says why
            pass

    def result(self) -> list[Path]:
        """Wait for the child; the figure files it drew, relative to the artifact root.

        Raises :class:`FigureError` with the child's message and bench traceback if the
        figures function raised, or RuntimeError if the child itself died.
        """
        out, err = self.process.communicate()
        if self.job_file is not None:
            self.job_file.unlink(missing_ok=True)
        try:
            answer = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            tail = "\n".join(err.strip().splitlines()[-20:]) or "no output"
            raise RuntimeError(
                f"the process drawing them exited with {self.process.returncode}:\n{tail}"
            ) from None
        if "error" in answer:
            raise FigureError(answer["error"], answer["traceback"])
        return [Path(p) for p in answer["paths"]]


class FigureError(Exception):
    """A bench's figures function raised in a child; ``str`` is its ``repr`` as the controller
    would have shown it, ``detail`` its traceback (bench frames only)."""

    def __init__(self, error: str, detail: str) -> None:
        super().__init__(error)
        self.detail = detail


def start(source: Path, rootpath: Path, bench: str) -> FigureJob:
    """Start a child for ``bench`` (defined in the module at ``source``); send it work later."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_npubench.drawing", str(source), str(rootpath), bench],
        cwd=rootpath,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return FigureJob(bench, process)


def main(source: str, rootpath_text: str, name: str) -> None:
    """The child: import, wait for the job on stdin, draw, print the paths as JSON."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # while the workers still run

    from pytest_npubench.artifacts import draw
    from pytest_npubench.item import bench_traceback

    rootpath = Path(rootpath_text)
    if str(rootpath) not in sys.path:
        sys.path.insert(0, str(rootpath))  # as pytest's rootdir conftest puts it there
    answer: dict[str, Any]
    try:
        module = import_bench_module(Path(source), rootpath)
        bench = next(b for b in benches_in(module) if b.name == name)
    except Exception as exc:  # the controller imported it fine; say why this one did not
        bench, answer = None, {"error": repr(exc), "traceback": ""}
    job_path = sys.stdin.read().strip()
    if not job_path:
        return  # not needed after all
    if bench is None or bench.figures is None:
        print(json.dumps(answer if bench is None else {"paths": []}))
        return
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    results = {}
    for payload in job["results"]:
        result = ConfigResult.from_payload(payload, bench)
        results[result.config_id] = result
    outdir, root = Path(job["outdir"]), Path(job["root"])
    figures = bench.figures
    try:
        paths = draw(lambda: [figures(results, outdir)], outdir, root, use_mpl=True)
    except Exception as exc:
        answer = {"error": repr(exc), "traceback": bench_traceback(exc)}
    else:
        answer = {"paths": [p.as_posix() for p in paths]}
    print(json.dumps(answer))


if __name__ == "__main__":
    main(*sys.argv[1:4])
