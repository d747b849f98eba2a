"""Phases of the gated run, `pytest --npubench all -n auto`: start-up, items, and the serial tail
after the last result (figures of the last bench, results.json, summary.md, index.html, the
terminal summary).

    python benchmarks/gated_tail.py                 # this tree, 3 runs, the best of each phase
    python benchmarks/gated_tail.py 3 REV [REV...]  # also each git revision (exported with
                                                    # `git archive`), runs interleaved

Each run loads this file as a pytest plugin (``-p gated_tail``) in the controller; it writes
the time of each hook it sees to a file, and the table says, in seconds from the start of the
pytest process: when the workers were up (``2 workers [448 items]``), the first and the last
result, the end of pytest_sessionfinish (artifacts written) and the exit; the tail is exit minus
last result. Also the CPU seconds of the run and every process it started, and the peak RSS of
the largest of them (``ru_maxrss`` of the children: the largest one process reached).
On a shared machine wall times are noisy: take the best of several runs, compare within one
table.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STAMPS = "GATED_TAIL_STAMPS"

# -- the plugin (loaded in the pytest process with -p gated_tail) ---------------------------

_T0 = float(os.environ.get("GATED_TAIL_T0", "0") or 0)
_stamps: dict[str, float] = {}


def _stamp(name: str, last: bool = False) -> None:
    now = time.time() - _T0
    if last or name not in _stamps:
        _stamps[name] = now


def pytest_configure(config: Any) -> None:
    if not hasattr(config, "workerinput"):
        _stamp("configure")


def pytest_xdist_node_collection_finished(node: Any, ids: Any) -> None:
    _stamp("workers_collected", last=True)


def pytest_runtest_logreport(report: Any) -> None:
    if report.when == "call" or report.skipped:
        _stamp("first_result")
        _stamp("last_result", last=True)


def pytest_sessionfinish(session: Any) -> None:
    if not hasattr(session.config, "workerinput"):
        _stamp("sessionfinish_start")


def pytest_unconfigure(config: Any) -> None:
    if hasattr(config, "workerinput"):
        return
    _stamp("unconfigure")
    path = os.environ.get(STAMPS)
    if path:
        Path(path).write_text(json.dumps(_stamps), encoding="utf-8")


try:
    import pytest

    class _AfterFinish:
        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(self, session: Any) -> None:
            if not hasattr(session.config, "workerinput"):
                _stamp("sessionfinish_end", last=True)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(session: Any) -> None:
        session.config.pluginmanager.register(_AfterFinish(), "gated-tail-after")

except ImportError:  # the driver below does not need pytest
    pass


# -- the driver ---------------------------------------------------------------------------


def _measured(cmd: list[str], cwd: Path, env: dict[str, str]) -> None:
    """Run ``cmd`` as this process's only child; print its CPU seconds and peak RSS as JSON
    (so that each run's peak is its own: ``ru_maxrss`` of the children is the largest one
    process of the tree reached)."""
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "rc": done.returncode,
                "stdout": done.stdout[-3000:],
                "cpu": usage.ru_utime + usage.ru_stime,
                "rss_kib": usage.ru_maxrss,
            }
        )
    )


def once(tree: Path, artifacts: Path) -> dict[str, float]:
    """One gated run in ``tree``: its phases (seconds), CPU seconds and the peak RSS (MiB)."""
    stamps = artifacts.with_suffix(".stamps.json")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(Path(__file__).resolve().parent)])
    env[STAMPS] = str(stamps)
    cmd = [sys.executable, "-m", "pytest", "-p", "gated_tail", "-p", "no:cacheprovider"]
    cmd += ["-q", "--npubench", "all", "-n", "auto", f"--npubench-artifacts={artifacts}"]
    start = time.time()
    env["GATED_TAIL_T0"] = repr(start)
    wrapper = [sys.executable, __file__, "--measure", str(tree), *cmd]
    out = subprocess.run(wrapper, env=env, capture_output=True, text=True, check=True).stdout
    wall = time.time() - start
    done = json.loads(out)
    if done["rc"] != 0:
        sys.exit(f"{' '.join(cmd)} in {tree} failed ({done['rc']}):\n{done['stdout']}")
    got = json.loads(stamps.read_text(encoding="utf-8"))
    return {
        "workers up": got["workers_collected"],
        "first result": got["first_result"],
        "last result": got["last_result"],
        "finish done": got.get("sessionfinish_end", got["unconfigure"]),
        "exit": wall,
        "tail": wall - got["last_result"],
        "CPU s": done["cpu"],
        "peak RSS MiB": done["rss_kib"] / 1024,
    }


def export(rev: str, into: Path) -> Path:
    """A clean copy of the repository at ``rev`` (``git archive``; no checkout is touched)."""
    tree = into / rev.replace("/", "_")
    tree.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", rev], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def main(repeats: int, revs: list[str]) -> None:
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    with tempfile.TemporaryDirectory(prefix="npubench-tail-") as tmp:
        trees = {rev: export(rev, Path(tmp) / "trees") for rev in revs}
        trees["this tree"] = ROOT
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for r in range(repeats):
            for name, tree in trees.items():
                got = once(tree, Path(tmp) / f"art-{len(runs[name])}-{name.replace('/', '_')}")
                runs[name].append(got)
                print(
                    f"run {r + 1} {name:>12}: last result {got['last result']:6.2f} s, "
                    f"exit {got['exit']:6.2f} s, tail {got['tail']:5.2f} s, "
                    f"CPU {got['CPU s']:6.2f} s",
                    flush=True,
                )
    columns = list(next(iter(runs.values()))[0])
    width = max(len(c) for c in columns)
    print(f"\nbest of {repeats} (seconds from the start of pytest; peak RSS: the largest seen)")
    print(f"{'':{width}}  " + "  ".join(f"{name:>12}" for name in runs))
    for col in columns:
        pick = max if col == "peak RSS MiB" else min  # the worst peak, the best time
        cells = [f"{pick(r[col] for r in got):12.2f}" for got in runs.values()]
        print(f"{col:{width}}  " + "  ".join(cells))
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--measure"]:
        _measured(args[2:], Path(args[1]), dict(os.environ))
        sys.exit(0)
    main(int(args[0]) if args else 3, args[1:])
