"""The baseline lock leaves nothing in a user's tree (issue 27): a regen removes its lock file,
and removing it does not weaken the lock: writers that overlap still take turns."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from toyproject import Project

import pytest_npubench.baseline as baseline
from pytest_npubench.baseline import locked

#: each process adds 1 to a counter file, TIMES times, under the lock of ``counter``; a lost
#: update (two holders at once, e.g. on a lock file another process had already removed)
#: leaves the counter short.
COUNTER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pytest_npubench.baseline import locked

    path, times = Path(sys.argv[1]), int(sys.argv[2])
    for _ in range(times):
        with locked(path):
            value = int(path.read_text()) if path.exists() else 0
            time.sleep(0.001)
            path.write_text(str(value + 1))
    """
)


def test_a_regen_leaves_no_lock_file(project: Project) -> None:
    """After a regen the baselines folder holds the baseline and nothing else."""
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=2.0)
    project.run("--regen-baselines", xdist=True).assert_outcomes(passed=4)
    names = sorted(p.name for p in (project.path / "baselines").iterdir())
    assert names == ["toy.json"]


def test_the_lock_file_goes_when_the_lock_is_released(tmp_path: Path) -> None:
    """Held: the lock file exists; released (also by an exception): it is gone."""
    target = tmp_path / "b.json"
    lock = tmp_path / ".b.json.lock"
    with locked(target):
        assert lock.exists()
    assert not lock.exists()
    try:
        with locked(target):
            raise KeyError("boom")
    except KeyError:
        pass
    assert not lock.exists()
    assert list(tmp_path.iterdir()) == []


def test_writers_that_overlap_take_turns_although_the_lock_file_is_removed(
    tmp_path: Path,
) -> None:
    """Three processes add 1 to a counter 30 times each under the lock: the counter ends at
    90 (every holder alone), and no lock file is left."""
    script = tmp_path / "count.py"
    script.write_text(COUNTER)
    counter = tmp_path / "counter.txt"
    procs = [subprocess.Popen([sys.executable, str(script), str(counter), "30"]) for _ in range(3)]
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    assert counter.read_text() == "90"
    assert not (tmp_path / ".counter.txt.lock").exists()


def test_a_waiter_that_locked_a_removed_lock_file_does_not_hold_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race that removing the lock file opens, made to happen: a waiter opens the lock
    file, the holder removes it and unlocks, and only then does the waiter lock it. That
    waiter locked a file nobody else will open, so it must try again on the file now at the
    path; otherwise a third writer, which makes and locks a new file, would run beside it."""
    target = tmp_path / "b.json"
    held, released, waiter_in, done = (threading.Event() for _ in range(4))
    real_try_lock = baseline._try_lock
    delayed = []

    def try_lock_late(handle):  # type: ignore[no-untyped-def]
        if threading.current_thread().name == "waiter" and not delayed:
            delayed.append(True)
            released.wait(5)  # preempted between open() and the lock, until the holder left
        return real_try_lock(handle)

    monkeypatch.setattr(baseline, "_try_lock", try_lock_late)

    def holder() -> None:
        with locked(target):
            held.set()
            waiter_thread.start()
            while not delayed:  # the waiter has opened the file and is about to lock it
                threading.Event().wait(0.01)
        released.set()

    def waiter() -> None:
        with locked(target):
            waiter_in.set()
            done.wait(5)

    waiter_thread = threading.Thread(target=waiter, name="waiter")
    holder_thread = threading.Thread(target=holder)
    holder_thread.start()
    assert waiter_in.wait(5)
    try:
        with pytest.raises(TimeoutError), locked(target, timeout_s=0.3):
            pass  # the waiter holds the lock: a third writer must wait
    finally:
        done.set()
        waiter_thread.join(5)
        holder_thread.join(5)
    assert not (tmp_path / ".b.json.lock").exists()
