"""Planted hardware change, end to end on the real GEMM bench (issue 9): DMA setup 0.5 % slower
in a temporary topology is a what-if that names the changed key once, fails configs with their
deltas, and is accepted by a regen that reports every entry changed, never added."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def slower_dma_topology(tmp_path: Path) -> tuple[Path, float, float]:
    data = yaml.safe_load((ROOT / "sim" / "topologies" / "npu-1h.yaml").read_text())
    old = data["dma"]["setup_ns"]
    data["dma"]["setup_ns"] = new = old * 1.005
    path = tmp_path / "npu-1h-slow-dma.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, old, new


def run(args: list[str], cwd: Path, topology: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NPUBENCH_TOPOLOGY": str(topology)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_dma_setup_half_a_percent_slower_fails_the_gate_and_names_the_key(
    tmp_path: Path,
) -> None:
    """The change the old gate diluted below tolerance (0 of 24 configs failed) now fails
    gated configs of the real bench with their deltas, and the what-if line names
    dma.setup_ns once. (The accepting regen is tested on the toy bench in tests/plugin.)"""
    topology, old, new = slower_dma_topology(tmp_path)
    args = ["--npubench", "gemm", "-k", "256x256x256", f"--npubench-artifacts={tmp_path}/a"]
    gated = run(args, ROOT, topology)
    assert gated.returncode == 1, gated.stdout[-3000:]
    text = gated.stdout
    assert text.count(f"dma.setup_ns {old:g} -> {new:g}") == 1, text[-3000:]
    failed = int(re.search(r"(\d+) failed", text).group(1))  # type: ignore[union-attr]
    assert failed >= 1
    assert re.search(rf"gemm: \d+ run: \d+ passed, {failed} failed \({failed} regressions\)", text)
    moved = re.search(  # the what-if's deltas: every failing config moved, all of them slower
        r"gemm: (\d+) of \d+ configs run moved beyond tolerance; "
        r"latency_ns: median \+[0-9.]+ %, worst \+[0-9.]+ %",
        text,
    )
    assert moved is not None and int(moved.group(1)) == failed, text[-3000:]
