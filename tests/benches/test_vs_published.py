"""benchmarks/vs_published.py: preset vs published table, per size and per band; a pair not
there yet is a note, not an error. Run on test data standing in for the preset."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import ModuleType

import pytest

from sim.calibrate import read_table

ROOT = Path(__file__).resolve().parents[2]
SKETCH = ROOT / "tests" / "data" / "mi300x-8-sketch.yaml"
PUBLISHED = ROOT / "tests" / "data" / "published" / "mi300x-rccl-all_reduce_perf.txt"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "vs_published", ROOT / "benchmarks" / "vs_published.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_prints_each_size_and_the_band_errors(capsys: pytest.CaptureFixture[str]) -> None:
    """Up to 64 KiB with ring: one row per published size, the published times as the table
    has them, the ratio is published / simulated time (= simulated / published busbw), and
    the overall error is the geomean of the rows' ratios."""
    args = ["--pair", str(SKETCH), str(PUBLISHED), "--algorithm", "ring", "--max-bytes", "65536"]
    assert _script().main(args) == 0
    out = capsys.readouterr().out.splitlines()
    start = out.index("-- ring") + 2
    end = next(i for i, line in enumerate(out) if line.startswith("geomean error:"))
    rows = [line.split() for line in out[start:end]]
    table = [r for r in read_table(PUBLISHED).rows if r.size <= 65536]
    assert len(rows) == len(table) == 14
    logs = []
    for printed, row in zip(rows, table, strict=True):
        pub_us, sim_us, ratio = float(printed[2]), float(printed[3]), float(printed[6])
        assert row.out_of_place is not None and pub_us == row.out_of_place.time_us
        assert ratio == pytest.approx(pub_us / sim_us, abs=0.002)
        logs.append(abs(math.log(ratio)))
    overall = float(out[end].split("overall ")[1].split(" %")[0])
    assert overall == pytest.approx(100 * (math.exp(sum(logs) / len(logs)) - 1), abs=0.2)
    assert "< 1 MiB" in out[end] and out[-1].startswith("1 of 1 pairs compared in")


def test_a_pair_not_there_yet_is_skipped_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "h100-sxm-8.yaml"
    assert _script().main(["--pair", str(missing), str(PUBLISHED)]) == 0
    out = capsys.readouterr().out
    assert f"skip h100-sxm-8.yaml vs {PUBLISHED.name}: {missing} not there yet" in out
    assert "0 of 1 pairs compared" in out
