"""A change that doubles SRAM reads without moving latency fails the gate on energy, and the
failure names SRAM (issue 29)."""

from __future__ import annotations

from pathlib import Path

from harness import run_gate

CONFIG = "256x256x256-double_buffer"


def test_doubled_sram_reads_fail_on_energy_and_name_sram(tmp_path: Path) -> None:
    """The clean selection passes. With the fetches moving twice the bytes and no time moving,
    the gate fails on the SRAM read energy (an exact counter's energy: changed, not improved)
    and the explanation names SRAM. By hand: 256^3 on 32x64x32 tiles is 8 x 4 x 8 = 256
    tile-ops fetching (32*64 + 64*32) * 2 B = 8 KiB each, 2 MiB; the DMA out reads C, 256 *
    256 * 2 B = 128 KiB; doubling the fetches moves SRAM reads from 2.125 to 4.125 MiB,
    +94.12 %, and the operand fetch +100 %. Latency does not move."""
    select = ("-k", CONFIG, "-v")
    clean = run_gate(None, "gemm", *select, tmp_path=tmp_path / "clean")
    assert clean.returncode == 0, clean.stdout[-3000:]
    gate = run_gate("energy-gemm-fetch-bytes-doubled", "gemm", *select, tmp_path=tmp_path / "b")
    out = gate.stdout
    assert gate.returncode == 1, out[-3000:]
    assert "energy_sram_read_uj" in out and "sram_read_bytes" in out, out[-3000:]
    assert "energy: SRAM read +94.12%" in out, out[-4000:]
    assert "energy: PE operand fetch +100.00%" in out, out[-4000:]
    assert _row(out, "latency_ns").split()[-1] == "pass", out[-4000:]  # latency did not move
    assert "improved" not in out


def test_doubled_fetch_records_are_named_by_the_record_check(tmp_path: Path) -> None:
    """The same change in the op log (each fetch record carries twice its bytes in the same
    time) is caught before the metrics: issue 26's per-record check names the fetch engine."""
    gate = run_gate(
        "energy-gemm-fetch-reads-twice", "gemm", "-k", CONFIG, tmp_path=tmp_path / "log"
    )
    assert gate.returncode == 1, gate.stdout[-3000:]
    assert "engine fetch.fetch" in gate.stdout and "not bytes / fetch_gbs" in gate.stdout


def _row(out: str, metric: str) -> str:
    """The failure table's row of ``metric`` (its last word is the verdict)."""
    return next(line for line in out.splitlines() if line.split()[:1] == [metric])
