"""A change that doubles SRAM reads without moving latency fails the gate on energy, and the
failure names SRAM (issue 29)."""

from __future__ import annotations

from pathlib import Path

from harness import run_gate

CONFIG = "256x256x256-double_buffer"


def test_doubled_sram_reads_fail_on_energy_and_name_sram(tmp_path: Path) -> None:
    """The clean selection passes; with every fetch reading twice the bytes (same service
    time) the latency stays within its tolerance, and the gate fails on the SRAM read
    energy (an exact counter's energy: changed), saying 'energy: SRAM read +100.00%'."""
    select = ("-k", CONFIG, "-v")
    clean = run_gate(None, "gemm", *select, tmp_path=tmp_path / "clean")
    assert clean.returncode == 0, clean.stdout[-3000:]
    gate = run_gate("energy-gemm-fetch-reads-twice", "gemm", *select, tmp_path=tmp_path / "bug")
    out = gate.stdout
    assert gate.returncode == 1, out[-3000:]
    assert "energy_sram_read_uj" in out, out[-3000:]
    assert "energy: SRAM read +100.00%" in out, out[-4000:]
    assert "latency_ns" not in _failed_metrics(out), out[-3000:]


def _failed_metrics(out: str) -> str:
    """The gate's lines that name a failing metric (its table rows), joined."""
    return "\n".join(line for line in out.splitlines() if "FAIL" in line or "changed" in line)
