"""``python -m sim calibrate``: the fit recovers a parameter it was given (a "measured" table the
simulator made with a known value), writes a calibrated YAML that loads and says what was fitted
to what, and every bad input is one usage error naming what is wrong."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest

from sim import load_topology
from sim.__main__ import main
from sim.calibrate.evaluate import Setup, simulate
from sim.calibrate.fit import FitKey, fit
from sim.calibrate.nccltests import format_table, simulated_row
from sim.calibrate.yamlkeys import edit, find
from sim.collectives import run_collective
from sim.errors import InputError
from sim.topology import TOPOLOGY_DIR

NPU = TOPOLOGY_DIR / "npu-1h.yaml"
SIZES = [1024, 16 << 10, 256 << 10, 4 << 20]  # latency- to bandwidth-bound on 4 chips
RANKS = 4


def measured_table(path: Path, ranks: int = RANKS, **chips: float) -> Path:
    """A table 'measured' on the simulator itself with npu-1h's chips changed by ``chips``."""
    topo = load_topology("npu-1h").replace_chips(count=ranks, **chips)
    rows = [
        simulated_row("allreduce", s, run_collective(topo, s).time_ps / 1e6, ranks, 2)
        for s in SIZES
    ]
    path.write_text(format_table("allreduce", ranks, rows, comments=[f"made with {chips}"]))
    return path


def calibrate(tmp_path: Path, *args: str) -> int:
    return main(["calibrate", "--topology", str(NPU), *args])


def usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> str:
    with pytest.raises(SystemExit) as info:
        calibrate(tmp_path, *args)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_recovers_a_link_bandwidth_and_writes_a_yaml_that_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Made at 37.5 GB/s, started from npu-1h's 50: the fitted value is within 1 %, the output
    loads as a topology, its header names the input and its sha256, the key and the residual
    per band, the value's line carries the calibrated tag, and a PNG lies beside it."""
    table = measured_table(tmp_path / "all_reduce_perf.txt", link_bw_gbs=37.5)
    out = tmp_path / "fitted.yaml"
    assert (
        calibrate(
            tmp_path, "--measured", str(table), "--fit", "chips.link_bw_gbs", "--out", str(out)
        )
        == 0
    )
    fitted = load_topology(out)
    assert fitted.chips.link_bw_gbs == pytest.approx(37.5, rel=0.01)
    assert fitted.chips.count == 8  # the file's own count: the table's 4 is for the simulation
    text = out.read_text()
    head = text[: text.index("name: npu-1h")]
    assert f"#   sha256 {hashlib.sha256(table.read_bytes()).hexdigest()}" in head
    assert f"# measured: {table}" in head
    assert f"#   chips.link_bw_gbs = {fitted.chips.link_bw_gbs:g} (5 .. 500; 50 -> " in head
    assert "< 1 MiB" in head and "1..64 MiB" in head and "> 64 MiB" in head
    (line,) = [x for x in text.splitlines() if x.strip().startswith("link_bw_gbs:")]
    assert "# [calibrated: sim calibrate on all_reduce_perf.txt, residual 0.0 %]" in line
    assert line.endswith("(link_bw_gbs was 50)")
    assert (tmp_path / "fitted.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert NPU.read_text().count("link_bw_gbs: 50 ") == 1  # the input is untouched
    printed = capsys.readouterr().out
    assert "wrote" in printed and str(out) in printed


def test_recovers_a_link_latency(tmp_path: Path) -> None:
    """A latency moves on ln(1 + ns) over 0 .. 1e6 ns: 700 ns is found from 1000 within 1 %."""
    table = measured_table(tmp_path / "all_reduce_perf.txt", link_latency_ns=700)
    out = tmp_path / "fitted.yaml"
    calibrate(
        tmp_path, "--measured", str(table), "--fit", "chips.link_latency_ns", "--out", str(out)
    )
    assert load_topology(out).chips.link_latency_ns == pytest.approx(700, rel=0.01)


def test_two_keys_at_once(tmp_path: Path) -> None:
    """Bandwidth and latency together (coordinate sweeps): both within 1 % of what made the
    table, from the file's 50 GB/s and 1000 ns."""
    text = NPU.read_text()
    setup = Setup(text, str(NPU), RANKS)
    try:
        spots = [find(setup.text, "npu", k) for k in ("chips.link_bw_gbs", "chips.link_latency_ns")]
        truth = load_topology("npu-1h").replace_chips(
            count=RANKS, link_bw_gbs=60, link_latency_ns=400
        )
        measured = [run_collective(truth, s).time_ps for s in SIZES]

        def objective(lits: tuple[str, ...]) -> float:
            topo = setup.load(edit(setup.text, dict(zip(spots, lits, strict=True))))
            sim = simulate(topo, SIZES, "ring", "allreduce").time_ps
            return sum(abs(math.log(a / b)) for a, b in zip(sim, measured, strict=True))

        keys = [FitKey(spots[0], 5, 500), FitKey(spots[1], 0, 1e6)]
        result = fit(keys, objective)
    finally:
        setup.close()
    assert result.values[0] == pytest.approx(60, rel=0.01)
    assert result.values[1] == pytest.approx(400, rel=0.01)
    assert result.evaluations <= 300 and result.objective < result.start_objective


def test_output_is_never_the_input_and_never_replaced_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = measured_table(tmp_path / "all_reduce_perf.txt", link_bw_gbs=40)
    err = usage_error(
        capsys, tmp_path, "--measured", str(table), "--fit", "chips.link_bw_gbs", "--out", str(NPU)
    )
    assert "is the input topology" in err
    out = tmp_path / "x.yaml"
    out.write_text("keep me")
    err = usage_error(
        capsys, tmp_path, "--measured", str(table), "--fit", "chips.link_bw_gbs", "--out", str(out)
    )
    assert f"{out} exists; pass --force" in err
    assert out.read_text() == "keep me"
    args = ["--measured", str(table), "--fit", "chips.link_bw_gbs", "--out", str(out), "--force"]
    assert calibrate(tmp_path, *args, "--max-evaluations", "12") == 0
    assert load_topology(out).chips.count == 8


def test_bad_keys_are_one_clear_error_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = str(measured_table(tmp_path / "all_reduce_perf.txt"))
    out = str(tmp_path / "o.yaml")
    err = usage_error(capsys, tmp_path, "--measured", table, "--out", out, "--fit", "chips.link_bw")
    assert (
        "has no key 'chips.link_bw' (no 'link_bw' in chips); similar keys: chips.link_bw_gbs" in err
    )
    err = usage_error(
        capsys, tmp_path, "--measured", table, "--out", out, "--fit", "collectives.launch_ns"
    )
    assert "(no 'collectives' in the top level); the top level has name, clock_ghz" in err
    four = "chips.link_bw_gbs,chips.link_latency_ns,chips.reduce_gbs,hbm.latency_ns"
    assert "fit 1 to 3 at a time" in usage_error(
        capsys, tmp_path, "--measured", table, "--out", out, "--fit", four
    )
    err = usage_error(
        capsys, tmp_path, "--measured", table, "--out", out, "--fit", "fetch.fetch_gbs"
    )
    assert "fetch.fetch_gbs cannot move the result" in err
    err = usage_error(capsys, tmp_path, "--measured", table, "--out", out, "--fit", "chips.count")
    assert "no default bounds" in err and "--bounds chips.count=LO:HI" in err
    err = usage_error(
        capsys,
        tmp_path,
        "--measured",
        table,
        "--out",
        out,
        "--fit",
        "chips.link_bw_gbs",
        "--bounds",
        "chips.link_bw_gbs=9:1",
    )
    assert "must be KEY=LO:HI with LO < HI" in err
    err = usage_error(
        capsys,
        tmp_path,
        "--measured",
        table,
        "--out",
        out,
        "--fit",
        "chips.link_bw_gbs",
        "--bounds",
        "chips.reduce_gbs=1:9",
    )
    assert "--bounds names chips.reduce_gbs, which --fit does not" in err
    err = usage_error(
        capsys,
        tmp_path,
        "--measured",
        table,
        "--out",
        out,
        "--fit",
        "chips.link_bw_gbs",
        "--max-evaluations",
        "0",
    )
    assert "--max-evaluations 0 must be at least 1" in err
    half = tmp_path / "all_reduce_perf-oop.txt"
    half.write_text(
        "# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
        "1024 512 bfloat16 sum -1 10.0 0.1 0.1 0\n"
    )
    err = usage_error(
        capsys,
        tmp_path,
        "--measured",
        str(half),
        "--out",
        out,
        "--fit",
        "chips.link_bw_gbs",
        "--inplace",
    )
    assert "no row with a positive in-place time" in err
    assert not Path(out).exists()


def test_a_table_the_topology_cannot_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 6-rank table on a 2 x 4 torus: the error names both counts and the fix."""
    torus = tmp_path / "torus.yaml"
    torus.write_text(NPU.read_text().replace("topology: ring ", "topology: torus2d "))
    table = measured_table(tmp_path / "all_reduce_perf.txt", ranks=6)
    with pytest.raises(SystemExit):
        main(
            [
                "calibrate",
                "--topology",
                str(torus),
                "--measured",
                str(table),
                "--fit",
                "chips.link_bw_gbs",
                "--out",
                str(tmp_path / "o.yaml"),
            ]
        )
    err = capsys.readouterr().err
    assert "the measured table has 6 ranks but chips.torus_dims is [2, 4]" in err
    bad = tmp_path / "bad.txt"
    bad.write_text(
        "# size count type redop root time algbw busbw #wrong\n8 x float sum -1 1 0 0 0\n"
    )
    err = usage_error(
        capsys,
        tmp_path,
        "--measured",
        str(bad),
        "--fit",
        "chips.link_bw_gbs",
        "--collective",
        "all_reduce",
    )
    assert f"{bad}: line 2: count 'x' is not a whole number of elements" in err


def test_large_sizes_extend_the_line_of_the_simulated_ones() -> None:
    """Above ``exact_up_to`` a size costs nothing: its time is on the straight line through
    the two largest simulated sizes (checked against the times simulated for real)."""
    topo = load_topology("npu-1h").replace_chips(count=RANKS)
    sizes = [1 << 20, 2 << 20, 4 << 20, 8 << 20]
    fast = simulate(topo, sizes, "ring", "allreduce", exact_up_to=2 << 20)
    t1, t2 = (run_collective(topo, s).time_ps for s in sizes[:2])
    assert fast.exact == (True, True, False, False)
    assert fast.time_ps[3] == t2 + (sizes[3] - sizes[1]) * (t2 - t1) / (sizes[1] - sizes[0])
    full = simulate(topo, sizes, "ring", "allreduce", exact_up_to=2 << 20, exact_all=True)
    assert full.exact == (True,) * 4
    assert full.time_ps[3] == run_collective(topo, sizes[3]).time_ps
    with pytest.raises(InputError, match="fewer than two sizes"):
        simulate(topo, sizes, "ring", "allreduce", exact_up_to=1 << 20)
