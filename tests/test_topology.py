"""Topology loading: the shipped file, derived values, fingerprints, and every rejection rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.topology import TOPOLOGY_DIR, TopologyError, load_topology, ps_for_bytes


def _write(tmp_path: Path, mutate: Any) -> Path:
    data = yaml.safe_load((TOPOLOGY_DIR / "npu-1h.yaml").read_text())
    mutate(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


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
    path = _write(tmp_path, mutate)
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    msg = str(info.value)
    assert str(path) in msg
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
    with pytest.raises(TopologyError, match="Known topologies: npu-1h"):
        load_topology("npu-9z")


def test_replace_chips_revalidates() -> None:
    """Sweeps override chip fields through a revalidating copy, which changes the fingerprint."""
    topo = load_topology()
    t16 = topo.replace_chips(count=16, topology="torus2d", torus_dims=(4, 4))
    assert t16.chips.count == 16 and t16.fingerprint != topo.fingerprint
    with pytest.raises(TopologyError, match="torus_dims"):
        topo.replace_chips(count=16, topology="torus2d", torus_dims=(2, 4))
