"""sim.systolic: SCALE-Sim's own numbers, in closed form, from SCALE-Sim's own files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.__main__ import main
from sim.scalesim_files import read_scalesim_config, read_scalesim_topology
from sim.systolic import (
    COMPUTE_REPORT_HEADER,
    DATAFLOWS,
    ArrayConfig,
    ScaleSimInputError,
    SramSizes,
    SystolicLayer,
    dram_accesses,
    simulate_layer,
)

DATA = Path(__file__).parents[1] / "data" / "scalesim"
REFERENCE = json.loads((DATA.parent / "scalesim_reference.json").read_text())["layers"]


def _ours(row: dict[str, Any]) -> Any:
    cfg = read_scalesim_config(DATA / row["cfg"])
    layers = {layer.name: layer for layer in read_scalesim_topology(DATA / row["topology"])}
    array = ArrayConfig(cfg.array.rows, cfg.array.cols, row["dataflow"])
    return simulate_layer(layers[row["layer"]], array)


def _id(row: dict[str, Any]) -> str:
    return f"{row['cfg']}-{row['topology']}-{row['dataflow']}-{row['layer']}"


def test_reference_covers_every_dataflow_and_both_shared_files() -> None:
    """The committed SCALE-Sim table has gpt2 and ResNet-18 layers in os, ws and is."""
    seen = {(r["topology"], r["dataflow"]) for r in REFERENCE}
    for topo in ("gpt2.csv", "Resnet18.csv", "edge_gemm.csv", "edge_conv.csv"):
        assert {df for t, df in seen if t == topo} == set(DATAFLOWS), topo


@pytest.mark.parametrize("row", REFERENCE, ids=_id)
def test_matches_scalesim_compute_report(row: dict[str, Any]) -> None:
    """Cycles and stalls equal SCALE-Sim's; the three utilisations print as SCALE-Sim's do."""
    r = _ours(row)
    _, _, total, stall, util, mapping, compute = row["compute_report"]
    assert (r.total_cycles, r.stall_cycles) == (int(total), int(stall))
    for ours, theirs in (
        (r.overall_util_pct, util),
        (r.mapping_efficiency_pct, mapping),
        (r.compute_util_pct, compute),
    ):
        assert f"{ours:.2f}" == f"{float(theirs):.2f}"  # SCALE-Sim's printed precision
        assert ours == pytest.approx(float(theirs), rel=1e-12, abs=1e-12)


def _dram(row: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
    cfg = read_scalesim_config(DATA / row["cfg"])
    layers = {layer.name: layer for layer in read_scalesim_topology(DATA / row["topology"])}
    array = ArrayConfig(cfg.array.rows, cfg.array.cols, row["dataflow"])
    assert cfg.sram is not None
    return dram_accesses(layers[row["layer"]], array, cfg.sram)


@pytest.mark.parametrize("row", REFERENCE, ids=_id)
def test_derived_dram_accesses_match_scalesim(row: dict[str, Any]) -> None:
    """Each DRAM count we derive (IFMAP reads, filter reads, OFMAP writes) is SCALE-Sim's."""
    d = row["detailed_access_report"]
    theirs = (int(float(d[12])), int(float(d[15])), int(float(d[18])))
    for ours, their in zip(_dram(row), theirs, strict=True):
        assert ours is None or ours == their


def test_dram_accesses_are_derived_for_every_small_layer_and_refused_past_eviction() -> None:
    """All edge layers (nothing evicted) get all three counts; a layer whose IFMAP outgrows
    the read buffer's active half gets None, not a guess (ResNet-18 Conv1: 150 k pixels)."""
    edge = [r for r in REFERENCE if r["topology"].startswith("edge_")]
    assert len(edge) == 48 and all(None not in _dram(r) for r in edge)
    derived = sum(x is not None for r in REFERENCE for x in _dram(r))
    assert derived == 168  # of 270: the rest depend on SCALE-Sim's eviction order
    conv1 = next(r for r in REFERENCE if r["layer"] == "Conv1" and r["dataflow"] == "ws")
    assert _dram(conv1)[0] is None
    # the windows of a stride-3, 3x2 filter touch 10 of 10 rows and 8 of 12 columns
    layer = SystolicLayer.conv("c", 10, 12, 3, 2, 3, 5, 3)
    assert layer.distinct_ifmap == 10 * 8 * 3
    assert dram_accesses(layer, ArrayConfig(8, 16, "os"), SramSizes(64, 64, 64)) == (240, 90, 100)


@pytest.mark.parametrize("row", REFERENCE, ids=_id)
def test_matches_scalesim_sram_accesses(row: dict[str, Any]) -> None:
    """SRAM IFMAP/Filter reads and OFMAP writes equal SCALE-Sim's DETAILED_ACCESS_REPORT."""
    r = _ours(row)
    d = row["detailed_access_report"]
    assert (r.ifmap_sram_reads, r.filter_sram_reads, r.ofmap_sram_writes) == (
        int(d[3]),
        int(d[6]),
        int(d[9]),
    )


# --- properties ------------------------------------------------------------------------

dims = st.integers(1, 300)
# rows + cols >= 3: on a 1 x 1 array in os SCALE-Sim counts K - 1 cycles for K MACs (its
# cycle count starts at 0), so utilisation would exceed 100 % (see test_one_by_one_os_quirk).
arrays = st.builds(ArrayConfig, st.integers(1, 40), st.integers(2, 40), st.sampled_from(DATAFLOWS))


@settings(derandomize=True, max_examples=150, deadline=None)
@given(arrays, dims, dims, dims, st.sampled_from(["m", "n", "k"]), st.integers(1, 100))
def test_cycles_monotone_in_each_dimension(
    array: ArrayConfig, m: int, n: int, k: int, dim: str, grow: int
) -> None:
    """Growing M, N or K never makes a layer faster, in any dataflow, on any array."""
    small = SystolicLayer("a", m, n, k)
    big = SystolicLayer(
        "b", *(v + grow if d == dim else v for d, v in zip("mnk", (m, n, k), strict=True))
    )
    assert simulate_layer(big, array).total_cycles >= simulate_layer(small, array).total_cycles


@settings(derandomize=True, max_examples=150, deadline=None)
@given(arrays, dims, dims, dims)
def test_utilisations_in_zero_one(array: ArrayConfig, m: int, n: int, k: int) -> None:
    """Overall, mapping and compute utilisation are in (0, 100] percent."""
    r = simulate_layer(SystolicLayer("x", m, n, k), array)
    for pct in (r.overall_util_pct, r.mapping_efficiency_pct, r.compute_util_pct):
        assert 0 < pct <= 100


@settings(derandomize=True, max_examples=150, deadline=None)
@given(st.integers(1, 40), st.integers(2, 40), st.data())
def test_one_fold_matches_the_hand_formula(rows: int, cols: int, data: st.DataObject) -> None:
    """A layer whose Sr x Sc fits the array runs one fold: T + R + C - 2 (os) or
    2R + C + T - 2 (ws, is) cycles, SCALE-Sim counting from 0; mapping efficiency Sr Sc / RC."""
    sr = data.draw(st.integers(1, rows))
    sc = data.draw(st.integers(1, cols))
    t = data.draw(st.integers(1, 500))
    for df, (m, n, k) in (("os", (sr, sc, t)), ("ws", (t, sc, sr)), ("is", (sc, t, sr))):
        r = simulate_layer(SystolicLayer("x", m, n, k), ArrayConfig(rows, cols, df))
        fold = t + rows + cols - 2 if df == "os" else 2 * rows + cols + t - 2
        assert (r.folds, r.total_cycles) == (1, fold - 1)
        assert r.mapping_efficiency_pct == pytest.approx(100 * sr * sc / (rows * cols))
        assert r.overall_util_pct == pytest.approx(100 * m * n * k / ((fold - 1) * rows * cols))


def test_one_by_one_os_quirk() -> None:
    """SCALE-Sim's last-cycle-index count: 1x1 os with K=1 is 0 cycles, which we refuse."""
    array = ArrayConfig(1, 1, "os")
    assert simulate_layer(SystolicLayer("x", 1, 1, 5), array).total_cycles == 4
    with pytest.raises(ScaleSimInputError, match="0 cycles"):
        simulate_layer(SystolicLayer("x", 1, 1, 1), array)


def test_conv_lowering_is_scalesims() -> None:
    """ofmap = ceil((H - R + s) / s) per side (so 11 - 4 at stride 2 gives 5), K = R S C."""
    layer = SystolicLayer.conv("c", 11, 7, 4, 3, 5, 33, 2)
    assert (layer.m, layer.n, layer.k) == (5 * 3, 33, 4 * 3 * 5)


def test_depthwise_layer_is_one_layer_per_channel(tmp_path: Path) -> None:
    """A name with 'DP' becomes one single-channel layer per channel, named as SCALE-Sim does."""
    topo = tmp_path / "dw.csv"
    topo.write_text(
        "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
        "Num Filter, Strides,\nDP1,8,8,3,3,3,1,1,\n"
    )
    layers = read_scalesim_topology(topo)
    assert [(x.name, x.k) for x in layers] == [(f"DP1Channel_{c}", 9) for c in range(3)]


# --- files and the CLI -----------------------------------------------------------------


def _conv_file(tmp_path: Path, row: str) -> Path:
    topo = tmp_path / "net.csv"
    topo.write_text(
        "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
        f"Num Filter, Strides,\nok,8,8,3,3,3,4,1,\n{row}\n"
    )
    return topo


@pytest.mark.parametrize(
    ("row", "where", "says"),
    [
        ("bad,8,8,3,x3,3,4,1,", ":3: column 5 (Filter Width): 'x3'", "integer >= 1"),
        ("bad,8,8,3,3,3,0,1,", ":3: column 7 (Num Filter): '0'", "integer >= 1"),
        ("bad,8,8,9,3,3,4,1,", ":3: column 4 (Filter Height): 9", "fit the input"),
        ("bad,8,8,3,3,3,4,", ":3: 7 fields, expected 8", "complete the row"),
        ("bad,8,8,3,3,3,4,1,2:4,", ":3: column 9: '2:4'", "dense"),
    ],
)
def test_bad_row_names_file_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], row: str, where: str, says: str
) -> None:
    """A bad topology row is a usage error naming file, line, column, the value and the fix."""
    topo = _conv_file(tmp_path, row)
    with pytest.raises(SystemExit) as info:
        main(["scalesim", "-c", str(DATA / "scale.cfg"), "-t", str(topo), "-o", str(tmp_path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"{topo}{where}" in err and says in err


def test_bad_cfg_value_names_the_key(tmp_path: Path) -> None:
    """A cfg with a dataflow SCALE-Sim does not know is rejected with the key and the value."""
    cfg = tmp_path / "bad.cfg"
    cfg.write_text((DATA / "scale.cfg").read_text().replace("Dataflow : ws", "Dataflow : rs"))
    with pytest.raises(ScaleSimInputError, match=r"Dataflow = 'rs' is not one of os, ws, is"):
        read_scalesim_config(cfg)


def test_cli_writes_scalesims_compute_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """COMPUTE_REPORT.csv has SCALE-Sim's header and one row per layer with its cycles."""
    topo = DATA / "gpt2.csv"
    assert (
        main(["scalesim", "-c", str(DATA / "scale.cfg"), "-t", str(topo), "-o", str(tmp_path)]) == 0
    )
    lines = (tmp_path / "COMPUTE_REPORT.csv").read_text().splitlines()
    assert lines[0] == COMPUTE_REPORT_HEADER
    rows = [[x.strip() for x in line.split(",")] for line in lines[1:]]
    assert [r[0] for r in rows] == [str(i) for i in range(6)]
    qkt = next(
        r
        for r in REFERENCE
        if (r["topology"], r["dataflow"], r["layer"]) == ("gpt2.csv", "ws", "QKT")
    )
    assert rows[0][2:7] == qkt["compute_report"][2:7]  # scale.cfg is ws; same text as SCALE-Sim
    assert "QKT" in capsys.readouterr().out


def test_user_bandwidth_mode_is_accepted_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """InterfaceBandwidth: USER runs, and says that stalls are not modelled."""
    cfg = tmp_path / "user.cfg"
    cfg.write_text(
        (DATA / "scale.cfg")
        .read_text()
        .replace("InterfaceBandwidth: CALC", "InterfaceBandwidth: USER")
    )
    code = main(["scalesim", "-c", str(cfg), "-t", str(DATA / "gpt2.csv"), "-o", str(tmp_path)])
    assert code == 0
    assert "USER: memory stalls at the given bandwidth are NOT modelled" in capsys.readouterr().out


def _touched_by_window(size: int, window: int, stride: int, outputs: int) -> int:
    """Rows some window covers, window by window (what SCALE-Sim's loop adds up)."""
    return sum(min(window, size - i * stride) for i in range(outputs) if i * stride < size)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    size=st.integers(1, 60), window=st.integers(1, 12), stride=st.integers(1, 15), data=st.data()
)
def test_covered_rows_in_closed_form_are_the_window_by_window_sum(
    size: int, window: int, stride: int, data: st.DataObject
) -> None:
    """Non-overlapping windows (stride >= window): the closed form equals the sum it replaces,
    for every count of windows up to past the edge (a 10**9-row input costs no loop)."""
    from sim.systolic import _touched

    stride = max(stride, window)
    outputs = data.draw(st.integers(1, size // stride + 3))
    assert _touched(size, window, stride, outputs) == _touched_by_window(
        size, window, stride, outputs
    )


def test_the_fold_mean_past_its_exact_folds_is_the_exact_mean() -> None:
    """Beyond EXACT_FOLDS the mean is closed form; just below, the fold-by-fold float sum
    agrees with it to 1e-12 (same quantity, different rounding)."""
    from sim.systolic import EXACT_FOLDS, _fold_mean

    array = ArrayConfig(32, 32, "os")
    for sr, sc in ((32 * 256 - 5, 32 * 256 - 7), (32 * 257 - 5, 32 * 256 - 7)):
        folds = -(-sr // 32) * -(-sc // 32)
        mean = _fold_mean(sr, sc, array, 1, 1024)
        assert mean == pytest.approx(sr * sc / (1024 * folds), rel=1e-12)
        assert (folds > EXACT_FOLDS) == (sr == 32 * 257 - 5)
