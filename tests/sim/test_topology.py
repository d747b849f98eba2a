"""Topology loading: the shipped file, derived values, fingerprints, and every rejection rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.topology import TOPOLOGY_DIR, TopologyError, load_topology
from sim.units import ps_for_bytes


def _write(tmp_path: Path, mutate: Any) -> Path:
    data = yaml.safe_load((TOPOLOGY_DIR / "npu-1h.yaml").read_text())
    mutate(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _rejection(tmp_path: Path, mutate: Any) -> str:
    """The message a mutated npu-1h is refused with; it names the file."""
    path = _write(tmp_path, mutate)
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    assert str(path) in str(info.value)
    return str(info.value)


def test_default_topology_values_come_from_yaml() -> None:
    """The shipped npu-1h loads and carries the YAML's numbers."""
    raw = yaml.safe_load((TOPOLOGY_DIR / "npu-1h.yaml").read_text())
    topo = load_topology("npu-1h")
    assert topo.pe.tile_m == raw["pe"]["tile_m"]
    assert topo.hbm.num_pcs == raw["hbm"]["num_pcs"]
    assert topo.chips.torus_dims == tuple(raw["chips"]["torus_dims"])


def test_derived_values_are_computed() -> None:
    """Per-PC bandwidth, burst time and peak MAC/ns derive from stored values."""
    topo = load_topology()
    assert topo.hbm.pc_bw_gbs == topo.hbm.hbm_to_router_bw_gbs / topo.hbm.num_pcs
    assert topo.hbm.burst_ps == round(topo.hbm.burst_bytes / topo.hbm.pc_bw_gbs * 1000)
    pe = topo.pe
    assert pe.peak_macs_per_ns == pe.tile_m * pe.tile_k * pe.tile_n / pe.stage_ns


def test_fingerprint_is_stable_and_content_sensitive(tmp_path: Path) -> None:
    """Same content, same fingerprint; any change, a different one; comments don't count."""
    a = load_topology()
    text = (TOPOLOGY_DIR / "npu-1h.yaml").read_text()
    same = tmp_path / "same.yaml"
    same.write_text("# another comment\n" + text)
    assert load_topology(same).fingerprint == a.fingerprint
    changed = _write(tmp_path, lambda d: d["hbm"].__setitem__("latency_ns", 121))
    assert load_topology(changed).fingerprint != a.fingerprint


def test_ps_for_bytes_is_exact_and_rounds_up() -> None:
    """Decimal bandwidths are exact: 1 byte at 0.3 GB/s is 3334 ps, not a float artefact."""
    from fractions import Fraction

    assert ps_for_bytes(256, Fraction(16)) == 16000
    assert ps_for_bytes(1, Fraction("0.3")) == 3334


@pytest.mark.parametrize(
    ("mutate", "key", "rule"),
    [
        (lambda d: d["hbm"].__setitem__("num_pcs", 0), "hbm.num_pcs", "positive"),
        (
            lambda d: d["hbm"].__setitem__("hbm_to_router_bw_gbs", -1.5),
            "hbm.hbm_to_router_bw_gbs",
            "positive",
        ),
        (lambda d: d["pe"].__setitem__("tile_m", 32.5), "pe.tile_m", "integer"),
        (lambda d: d["pe"].__setitem__("tile_k", "64"), "pe.tile_k", "integer"),
        (lambda d: d["fetch"].__setitem__("fetch_gbs", "fast"), "fetch.fetch_gbs", "number"),
        (lambda d: d["dma"].__setitem__("setup_ns", 0.0001), "dma.setup_ns", "picoseconds"),
        (lambda d: d["sram"].__setitem__("capacity_kib", True), "sram.capacity_kib", "integer"),
        (lambda d: d["chips"].__setitem__("topology", "mesh"), "chips.topology", "one of"),
        (lambda d: d["chips"].__setitem__("torus_dims", [2]), "chips.torus_dims", "two positive"),
        (lambda d: d.__setitem__("clock_ghz", 0), "clock_ghz", "positive"),
        (lambda d: d["hbm"].__setitem__("speed", 3), "hbm.speed", "unknown key"),
        (lambda d: d.__setitem__("extra", 1), "extra", "unknown key"),
        (lambda d: d["hbm"].pop("burst_bytes"), "hbm.burst_bytes", "missing key"),
        (lambda d: d.pop("dma"), "dma", "missing key"),
        (lambda d: d.__setitem__("pe", [1, 2]), "pe", "mapping"),
    ],
)
def test_bad_topology_is_rejected_with_file_key_and_rule(
    tmp_path: Path, mutate: Any, key: str, rule: str
) -> None:
    """Each rule gives one message naming the file, the key path and the rule."""
    msg = _rejection(tmp_path, mutate)
    assert f"'{key}'" in msg
    assert rule in msg


def test_torus_dims_must_match_count(tmp_path: Path) -> None:
    """A torus whose rows x cols differs from the chip count is rejected."""

    def mutate(d: dict[str, Any]) -> None:
        d["chips"].update(topology="torus2d", count=8, torus_dims=[3, 3])

    with pytest.raises(TopologyError, match="rows x cols must equal"):
        load_topology(_write(tmp_path, mutate))


def test_malformed_yaml_and_unknown_name(tmp_path: Path) -> None:
    """Broken syntax and unknown names are clear errors, not tracebacks from yaml."""
    bad = tmp_path / "broken.yaml"
    bad.write_text("pe: [unclosed\n")
    with pytest.raises(TopologyError, match="not valid YAML"):
        load_topology(bad)
    with pytest.raises(TopologyError, match=r"Known topologies: .*npu-1h"):
        load_topology("npu-9z")


def test_replace_chips_revalidates() -> None:
    """Sweeps override chip fields through a revalidating copy, which changes the fingerprint."""
    topo = load_topology()
    t16 = topo.replace_chips(count=16, topology="torus2d", torus_dims=(4, 4))
    assert t16.chips.count == 16 and t16.fingerprint != topo.fingerprint
    with pytest.raises(TopologyError, match="torus_dims"):
        topo.replace_chips(count=16, topology="torus2d", torus_dims=(2, 4))


# --- pe.model: systolic (docs/adr/0012) ---------------------------------------------------


def _systolic(data: dict[str, Any], **pe: Any) -> None:
    for key in ("pipeline_stages", "stage_ns"):
        del data["pe"][key]
    data["pe"].update({"model": "systolic", "rows": 32, "cols": 16, "dataflow": "ws", **pe})


def test_a_systolic_pe_loads_with_derived_timing_and_fingerprints_its_keys(tmp_path: Path) -> None:
    """rows, cols and dataflow are read; stage_ns (the tile-op interval) is derived, not
    stored; each of the three keys moves the fingerprint, and a round trip keeps it."""
    topo = load_topology(_write(tmp_path, _systolic))
    pe = topo.pe
    assert (pe.model, pe.rows, pe.cols, pe.dataflow) == ("systolic", 32, 16, "ws")
    # ws, 32 x 64 x 32 tile-op: Sr = K = 64 -> 2 row folds, Sc = N = 32 -> 2 column folds,
    # T = M = 32; a fold is 2 * 32 + 16 + 32 - 2 = 110 cycles of 1 ns at 1 GHz
    assert (pe.stage_ps, pe.pipeline_stages) == (4 * 110 * 1000, 1)
    assert pe.peak_macs_per_ns == 32 * 16  # every PE, one MAC per 1 ns cycle
    content = topo.to_dict()["pe"]
    assert "stage_ns" not in content and "pipeline_stages" not in content
    prints = {topo.fingerprint, load_topology().fingerprint}
    for change in ({"rows": 16}, {"cols": 32}, {"dataflow": "is"}):
        path = tmp_path / f"{next(iter(change))}.yaml"
        path.write_text(_write(tmp_path, lambda d, c=change: _systolic(d, **c)).read_text())
        prints.add(load_topology(path).fingerprint)
    assert len(prints) == 5
    same = load_topology().with_systolic_pe(32, 16, "ws")
    assert same.fingerprint == topo.fingerprint and same.to_dict() == topo.to_dict()


def test_an_explicit_tile_model_is_the_default_and_keeps_the_fingerprint(tmp_path: Path) -> None:
    """`model: tile` written out is the same hardware as no model key: same fingerprint."""
    topo = load_topology(_write(tmp_path, lambda d: d["pe"].update(model="tile")))
    assert topo.pe.model == "tile"
    assert topo.fingerprint == load_topology().fingerprint


@pytest.mark.parametrize(
    ("mutate", "needles"),
    [
        (lambda d: d["pe"].update(model="mesh"), ["'pe.model'", "one of tile, systolic"]),
        (lambda d: d["pe"].update(rows=8), ["'pe.rows'", "only read when pe.model is systolic"]),
        (
            lambda d: (_systolic(d), d["pe"].update(stage_ns=16)),
            ["'pe.stage_ns'", "not used when pe.model is systolic", "Remove pe.stage_ns"],
        ),
        (lambda d: _systolic(d, dataflow="rs"), ["'pe.dataflow'", "one of os, ws, is"]),
        (lambda d: _systolic(d, rows=0), ["'pe.rows'", "must be positive"]),
        (lambda d: _systolic(d, cols=2.5), ["'pe.cols'", "must be an integer"]),
        (lambda d: (_systolic(d), d["pe"].pop("cols")), ["missing key 'pe.cols'"]),
        (lambda d: _systolic(d, banks=2), ["unknown key 'pe.banks'", "dataflow"]),
        (
            lambda d: (_systolic(d), d.update(clock_ghz=1.5)),
            ["'clock_ghz'", "whole number of picoseconds", "666.667 ps"],
        ),
        (
            lambda d: (_systolic(d, rows=1, cols=1), d["pe"].update(tile_m=2**20, tile_n=2**20)),
            ["'pe.rows'", "folds on the 1 x 1 ws array", "larger array"],
        ),
    ],
)
def test_a_bad_systolic_pe_section_is_one_clear_error(
    tmp_path: Path, mutate: Any, needles: list[str]
) -> None:
    """Each mistake names the file, the key and the fix."""
    message = _rejection(tmp_path, mutate)
    for needle in needles:
        assert needle in message
