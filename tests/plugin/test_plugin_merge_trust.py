"""The merge trusts no shard (issue 22): a shard's args never choose code or paths, a killed
merge leaves no process, no temp folder and no half-merge, and shard counts cannot blow up."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from shardproject import (
    PYTEST,
    baselines,
    copy_of,
    env,
    make_sharded,
    merge,
    shard_data,
    write_shard,
)

from pytest_npubench.shard import MAX_SHARDS, parse_shard, partition

MARKER_CODE = "from pathlib import Path\nPath({marker!r}).write_text('ran')\n"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sharded(tmp_path_factory.mktemp("sharded"))


def with_args(project: Path, *extra: str) -> None:
    """Both shards record ``extra`` too, digests recomputed: only the allow-list stands."""
    for k in (1, 2):
        data = shard_data(project, k)
        data["args"] = [*data["args"], *extra]
        write_shard(project, k, data)


def planted(project: Path, marker: Path) -> None:
    """A plugin module and a folder with a conftest.py that each write ``marker`` if imported."""
    (project / "evilplugin.py").write_text(MARKER_CODE.format(marker=str(marker)))
    (project / "evil").mkdir()
    (project / "evil" / "conftest.py").write_text(MARKER_CODE.format(marker=str(marker)))


@pytest.mark.parametrize(
    ("extra", "refused"),
    [
        (["-p", "evilplugin"], "'-p' 'evilplugin': imports the plugin module it names"),
        (["evil"], "'evil' is a path or a test name"),
        (["--rootdir=evil", "evil"], "'--rootdir': chooses the project root"),
        (["-o", "npubench_baselines={out}"], "'-o': overrides an ini value"),
        (["--junitxml={out}/junit.xml"], "'--junitxml': writes a file where it says"),
        (["--npubench-artifacts={out}"], "'--npubench-artifacts': writes where it says"),
        (["-W", "error::evilplugin.Warning"], "'-W': imports the module"),
    ],
    ids=["plugin", "conftest-folder", "rootdir", "ini-override", "junitxml", "artifacts", "W"],
)
def test_a_shard_command_that_would_run_code_or_write_elsewhere_is_refused(
    made: Path,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    extra: list[str],
    refused: str,
) -> None:
    """Each of these args, given to pytest, imports evilplugin.py or evil/conftest.py (which
    write a marker file) or writes outside the project. In a shard they are refused by name:
    the marker never appears, nothing is written outside, the baselines stay as they were."""
    project = copy_of(made, tmp_path / "p")
    marker = tmp_path / "MARKER"
    out = tmp_path_factory.mktemp("outside")
    planted(project, marker)
    with_args(project, *(a.format(out=out) for a in extra))
    before = baselines(project)
    done = merge(project, "--recheck", "0")
    text = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, text
    assert "s1/shard.json: 'args': " in text and refused in text, text
    assert not marker.exists()
    assert list(out.iterdir()) == []
    assert baselines(project) == before
    assert not (project / "npubench-artifacts").exists()


@pytest.mark.parametrize("extra", [["-p", "evilplugin"], ["evil"]], ids=["plugin", "folder"])
def test_the_planted_files_do_run_when_pytest_is_given_those_args(
    made: Path, tmp_path: Path, extra: list[str]
) -> None:
    """The control of the test above: the marker mechanism works, so its absence means
    something."""
    project = copy_of(made, tmp_path / "p")
    marker = tmp_path / "MARKER"
    planted(project, marker)
    subprocess.run(
        [*PYTEST, "--npubench", "toy", "-q", *extra],
        cwd=project,
        capture_output=True,
        timeout=120,
        env=env(),
        check=False,
    )
    assert marker.read_text() == "ran"


def test_allowed_args_merge_and_the_log_says_what_was_checked(made: Path, tmp_path: Path) -> None:
    """Output options and plugin blocks are replayed: -q, -rA, --tb=short, -p no:NAME."""
    project = copy_of(made, tmp_path / "p")
    with_args(project, "-q", "-rA", "--tb=short", "-p", "no:randomly")
    done = merge(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "npubench merge: 2 shard(s) accepted (digest, command, parts, payloads); " in done.stdout
    assert "4 config(s) re-simulated, each as its shard says" in done.stdout
    assert "--npubench-replay" not in (project / "npubench-artifacts/results.json").read_text()


# -- kill -9 ------------------------------------------------------------------------------------


def _session_processes(sid: int) -> list[int]:
    """Live processes of a session (the merge was started as its leader)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:  # state, ppid, pgrp, session
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_kill_9_of_the_merge_leaves_no_process_no_temp_folder_and_no_half_merge(
    made: Path, tmp_path: Path
) -> None:
    """A full merge first (its time T and its baselines), then 5 merges killed with SIGKILL at
    10 % .. 90 % of T: after each, no process of its session is alive (the old merge's child
    pytest went on writing), the temp folder holds no npubench-merge-* (it did), and every
    baseline is its old bytes or the complete merge's."""
    project = copy_of(made, tmp_path / "p")
    before = baselines(project)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    run_env = {**env(), "TMPDIR": str(tmp)}
    cmd = [sys.executable, "-m", "pytest_npubench", "merge", "s1", "s2", "--regen-baselines"]
    start = time.monotonic()
    subprocess.run(cmd, cwd=project, env=run_env, capture_output=True, timeout=120, check=True)
    whole = time.monotonic() - start
    merged = baselines(project)
    assert merged != before
    outcomes = []
    for fraction in (0.1, 0.3, 0.5, 0.7, 0.9):
        for name, data in before.items():
            (project / name).write_bytes(data)
        proc = subprocess.Popen(
            cmd,
            cwd=project,
            env=run_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        time.sleep(whole * fraction)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        time.sleep(0.2)  # a surviving child would still be running now
        left = _session_processes(proc.pid)
        for pid in left:  # clean up before failing
            os.kill(pid, signal.SIGKILL)
        assert left == [], f"killed at {fraction:.0%} of {whole:.1f} s: {left} still alive"
        assert sorted(p.name for p in tmp.iterdir()) == []
        now = baselines(project)
        for name in now:
            assert now[name] in (before[name], merged[name]), f"{name} half-merged"
        outcomes.append("merged" if now == merged else "unchanged" if now == before else "mixed")
    assert len(outcomes) == 5
    print(f"merge of {whole:.2f} s killed at 10..90 %: {outcomes}")


# -- shard counts -------------------------------------------------------------------------------


def _old_partition(costs: list[tuple[str, float]], count: int) -> list[int]:
    """The former O(items x N) partition(), kept here as the reference."""
    order = sorted(range(len(costs)), key=lambda i: (-costs[i][1], costs[i][0]))
    load = [0.0] * count
    shard_of = [0] * len(costs)
    for i in order:
        target = min(range(count), key=lambda s: (load[s], s))
        shard_of[i] = target
        load[target] += costs[i][1]
    return shard_of


def test_partition_gives_the_former_parts_exactly() -> None:
    """Shards made before and after the change split alike: 2,000 random cases, with ties,
    zero costs and more parts than items."""
    rng = random.Random(22)
    for _ in range(2000):
        n = rng.randint(0, 30)
        costs = [(f"b::{i}", float(rng.choice([0, 1, 1, 2, 3, rng.random()]))) for i in range(n)]
        count = rng.randint(1, 40)
        assert partition(costs, count) == _old_partition(costs, count)


def test_partition_cost_does_not_grow_with_the_shard_count() -> None:
    """2,000 items in 10^20 parts: the old code allocated a list of 10^20 loads
    (OverflowError) and 99999999 parts cost > 60 s and 816 MB."""
    costs = [(f"b::{i}", float(i % 7 + 1)) for i in range(2000)]
    start = time.monotonic()
    for count in (99_999_999, 10**20):
        owner = partition(costs, count)
        assert sorted(owner) == sorted(set(owner))  # one item per part: more parts than items
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("count", ["99999999", "100000000000000000000"])
def test_a_huge_shard_count_is_a_usage_error(count: str) -> None:
    with pytest.raises(pytest.UsageError, match=f"at most {MAX_SHARDS} parts"):
        parse_shard(f"1/{count}")


def test_a_huge_shard_count_on_the_command_line_is_a_usage_error_not_internalerror(
    made: Path, tmp_path: Path
) -> None:
    project = copy_of(made, tmp_path / "p")
    for count in ("99999999", "100000000000000000000"):
        start = time.monotonic()
        done = subprocess.run(
            [*PYTEST, "--npubench", "toy", f"--npubench-shard=1/{count}"],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=60,
            env=env(),
        )
        assert done.returncode == pytest.ExitCode.USAGE_ERROR
        assert f"at most {MAX_SHARDS} parts" in done.stderr
        assert "INTERNALERROR" not in done.stdout + done.stderr
        assert time.monotonic() - start < 30


def test_a_shard_json_is_written_with_its_digest(made: Path) -> None:
    """schema 2: the digest covers the measurements with the commit and the split."""
    data = json.loads((made / "s1" / "shard.json").read_text())
    assert data["schema"] == 2 and data["digest"].startswith("sha256:")
    assert data["shard"] == [1, 2]
