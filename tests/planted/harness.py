"""Run the real gate (``pytest --npubench ...``) in a subprocess with one bug planted.

    result = run_gate("gemm-ws-fold-off-by-one", "gemm", "-k", "ws", tmp_path=tmp_path)
    assert result.returncode == 1 and "pe_util" in result.stdout

The run never writes ``baselines/`` (no ``--regen-baselines``) and puts its artifacts in
``tmp_path``. ``run_gate(None, ...)`` runs the same command with nothing planted, so a test can
show that the selection passes before the bug is planted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def run_gate(
    bug: str | None, bench: str, *args: str, tmp_path: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
    env.pop("NPUBENCH_PLANTED", None)
    if bug is not None:
        env["NPUBENCH_PLANTED"] = bug
    env.pop("NPUBENCH_TOPOLOGY", None)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "planted_plugin",
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "-q",
        "--npubench",
        bench,
        f"--npubench-artifacts={tmp_path / 'artifacts'}",
        *args,
    ]
    return subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
