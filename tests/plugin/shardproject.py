"""Real shards of the toy project, made once (by subprocess runs of the plugin) and copied.

``make_sharded(root)`` writes the toy project of :mod:`toyproject` (two benches), measures
its baselines, changes what the benches measure (so a regen has work), and runs the regen as
``--npubench-shard 1/2`` and ``2/2`` into ``s1/`` and ``s2/``. ``copy_of(made, dest)`` gives a
test its own copy; :func:`merge` runs ``python -m pytest_npubench merge`` in it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from toyproject import TOY

from pytest_npubench.shard import digest

PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
BASELINES = ("baselines/toy.json", "baselines/other.json")


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)
    if done.returncode != 0:
        raise AssertionError(f"{cmd} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def env() -> dict[str, str]:
    """The test environment without bytecode caching (modules are rewritten in place)."""
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def make_sharded(root: Path, *, figures: bool = False) -> Path:
    """The toy project in ``root`` with shards s1/ and s2/ of a regen of both benches."""
    (root / "benches").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    extra = "    figures=figures," if figures else ""
    for name in ("toy", "other"):
        (root / "benches" / f"{name}.py").write_text(TOY.format(name=name, extra=extra))
    _run([*PYTEST, "--regen-baselines", "-q"], root, env())
    (root / "benches" / "toy_knobs.json").write_text(json.dumps({"scale": 2.0}))
    (root / "benches" / "other_knobs.json").write_text(json.dumps({"scale": 0.5}))
    for k in (1, 2):
        _run(
            [*PYTEST, "--regen-baselines", f"--npubench-shard={k}/2", f"--npubench-artifacts=s{k}"],
            root,
            env(),
        )
    shutil.rmtree(root / "npubench-artifacts", ignore_errors=True)
    return root


def copy_of(made: Path, dest: Path) -> Path:
    """A test's own copy of a made project."""
    shutil.copytree(made, dest, symlinks=True)
    return dest


def baselines(project: Path) -> dict[str, bytes]:
    """The bytes of every baseline file."""
    return {name: (project / name).read_bytes() for name in BASELINES}


def shard_data(project: Path, k: int) -> dict[str, Any]:
    """The parsed shard.json of shard k."""
    data: dict[str, Any] = json.loads((project / f"s{k}" / "shard.json").read_text())
    return data


def write_shard(project: Path, k: int, data: dict[str, Any], *, resign: bool = True) -> None:
    """Write shard k's shard.json, with its digest recomputed (as a careful forger would)."""
    if resign:
        data["digest"] = digest(data)
    (project / f"s{k}" / "shard.json").write_text(json.dumps(data, indent=1, sort_keys=True))


def merge(project: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m pytest_npubench merge s1 s2 --regen-baselines ARGS`` in the project."""
    cmd = [sys.executable, "-m", "pytest_npubench", "merge", "s1", "s2", "--regen-baselines"]
    return subprocess.run(
        [*cmd, *args], cwd=project, capture_output=True, text=True, timeout=timeout, env=env()
    )
