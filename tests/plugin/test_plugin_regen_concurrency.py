"""Regens that overlap or die (issue 13): two writers at once both land; kill -9 at any moment
leaves a readable baseline with every entry."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from toyproject import Project

from pytest_npubench.baseline import load

#: Widens the read-merge-write window of every regen in the subprocess, so that without a lock
#: two regens would both read the old file before either writes.
SLOW_MERGE = """
import time

import pytest_npubench.baseline as baseline
import pytest_npubench.regen as regen

real_merge, real_replace = regen.merge, baseline.os.replace


def slow_merge(*args, **kwargs):
    time.sleep(0.6)
    return real_merge(*args, **kwargs)


def slow_replace(src, dst):
    time.sleep(0.2)
    return real_replace(src, dst)


regen.merge = slow_merge
baseline.os.replace = slow_replace
"""


def regen(project: Project, *args: str, quiet: bool = False) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--regen-baselines"]
    return subprocess.Popen(
        [*command, "-p", "no:hypothesispytest", *args],
        cwd=project.path,
        stdout=subprocess.DEVNULL if quiet else subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else subprocess.STDOUT,
    )


def latency(project: Project, cid: str) -> float:
    value: float = project.baseline()["configs"][cid]["metrics"]["latency_ns"]
    return value


def test_two_regens_at_once_with_disjoint_k_both_land(project: Project) -> None:
    """Each regen re-reads the file under its lock before merging, so neither loses the
    other's update (without the lock, the later writer dropped the earlier one's)."""
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=2.0)
    project.write("conftest.py", SLOW_MERGE)
    first, second = regen(project, "-k", "16-fast"), regen(project, "-k", "32-slow")
    for proc in (first, second):
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out.decode()
    assert (latency(project, "16-fast"), latency(project, "32-slow")) == (32.0, 128.0)
    assert (latency(project, "16-slow"), latency(project, "32-fast")) == (32.0, 32.0)
    assert not list((project.path / "baselines").glob(".*.tmp"))


def test_kill_9_at_staggered_times_never_loses_an_entry(project: Project) -> None:
    """Six regens are killed with SIGKILL at 0.2 .. 2.2 s (before, during and after the write);
    after each, the file loads and holds all 4 entries; a last regen completes and cleans up."""
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.write("conftest.py", SLOW_MERGE)
    path = project.path / "baselines" / "toy.json"
    for n, delay in enumerate((0.2, 0.6, 1.0, 1.4, 1.8, 2.2)):
        project.knobs(scale=float(n + 2))
        proc = regen(project, quiet=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        loaded = load(path, "toy")
        assert loaded is not None and sorted(loaded.entries) == [
            "16-fast",
            "16-slow",
            "32-fast",
            "32-slow",
        ], f"after a kill at {delay} s"
    project.knobs(scale=9.0)
    proc = regen(project)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out.decode()
    assert json.loads(path.read_text())["configs"]["32-slow"]["metrics"]["latency_ns"] == 576.0
    assert not list((project.path / "baselines").glob(".*.tmp"))
