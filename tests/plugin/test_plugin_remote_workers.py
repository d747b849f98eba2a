"""Remote xdist workers (--tx socket=...) in another folder, with no shared file system: the
artifacts equal those of a -n 0 run byte for byte, and only the controller writes files."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from toyproject import Project, output, same_run

COMPARED = (
    "npubench-artifacts/results.json",
    "npubench-artifacts/summary.md",
    "npubench-artifacts/index.html",
    "npubench-artifacts/toy/latency.png",
    "baselines/toy.json",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(port: int, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"execnet socket server did not listen on port {port}")


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_loopback_socket_workers_equal_n0(
    project: Project, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A regen through an execnet socket server on the loopback, whose worker runs in a copy of
    the project elsewhere, writes the same baseline and artifacts as -n 0, and the worker's
    folder gains no artifact or baseline file."""
    project.bench(regen_only=True, figures=True)
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=2.0)
    measured = project.read("baselines/toy.json")
    remote = tmp_path_factory.mktemp("remote") / "checkout"
    shutil.copytree(project.path, remote)
    before = files(remote)

    project.run("--regen-baselines").assert_outcomes(passed=4)
    serial = {f: same_run(f, (project.path / f).read_bytes()) for f in COMPARED}
    (project.path / "baselines/toy.json").write_text(measured)
    shutil.rmtree(project.path / "npubench-artifacts")

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "execnet.script.socketserver", f"127.0.0.1:{port}"],
        cwd=remote.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(port)
        result = project.pytester.runpytest_subprocess(
            "-p",
            "no:hypothesispytest",
            "--regen-baselines",
            "--dist",
            "load",
            "--tx",
            f"socket=127.0.0.1:{port}//chdir={remote}",
            timeout=120,
        )
    finally:
        server.kill()
        server.wait(timeout=10)
    result.assert_outcomes(passed=4)
    remote_run = {f: same_run(f, (project.path / f).read_bytes()) for f in COMPARED}
    assert remote_run == serial, output(result)
    gained = {f for f in files(remote) - before if not f.startswith(("pytest/", "_pytest/"))}
    assert not gained, gained  # (xdist copies pytest itself to a socket worker; nothing else)
