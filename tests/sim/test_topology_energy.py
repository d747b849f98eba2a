"""The ``energy:`` section (docs/adr/0027): optional (absent: ``Topology.energy is None``, the
file's fingerprint is what it was before the section existed), every key given when present,
values held as whole femtojoules and milliwatts, every bad value one error naming file and key."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.topology import TOPOLOGY_DIR, Topology, TopologyError, load_topology

RAW = yaml.safe_load((TOPOLOGY_DIR / "npu-1h.yaml").read_text())
BEFORE_ENERGY = "npu-1h:11b459ccae0b"  # npu-1h's fingerprint before issue 29 (baselines of then)
FIX = "Fix the value in the topology file"


def _load(tmp_path: Path, data: dict[str, Any], name: str = "e.yaml") -> Topology:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return load_topology(path)


def _energy(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(RAW)
    for key, value in changes.items():
        if value is None:
            del data["energy"][key]
        else:
            data["energy"][key] = value
    return data


def test_a_file_without_the_section_loads_and_keeps_its_old_fingerprint(tmp_path: Path) -> None:
    """No energy section: energy is None (absent, not zero) and the fingerprint is the one
    npu-1h had before the section was added (so the section is the file's only change)."""
    data = copy.deepcopy(RAW)
    del data["energy"]
    topo = _load(tmp_path, data)
    assert topo.energy is None
    assert topo.fingerprint == BEFORE_ENERGY
    assert "energy" not in topo.to_dict()


def test_the_shipped_values_are_whole_femtojoules(tmp_path: Path) -> None:
    """npu-1h's pJ become integer fJ (0.625 pJ/B -> 625 fJ/B), W become mW; the priced MAC is
    mac_dtype's; a change of any constant changes the fingerprint (a change of the machine)."""
    topo = load_topology("npu-1h")
    e = topo.energy
    assert e is not None
    assert (e.mac_dtype, e.mac_fj, e.sram_read_fj, e.fetch_fj) == ("bf16", 500, 625, 208)
    assert (e.hbm_read_fj, e.link_fj, e.reduce_fj, e.static_mw) == (31200, (40000,), 50, 2000)
    changed = _load(tmp_path, _energy(sram_read_pj_per_byte=0.626))
    assert changed.fingerprint != topo.fingerprint
    assert topo.replace_chips(count=4).energy == e  # survives a sweep's chip override


def test_the_priced_mac_follows_the_operand_size(tmp_path: Path) -> None:
    """The MAC priced is mac_pj's type of dtype.bytes_per_element bytes: npu-1h is bf16, the
    same file at 4 bytes per element prices fp32; mac_dtype chooses between two of one size."""
    assert load_topology("npu-1h").energy.mac_dtype == "bf16"  # type: ignore[union-attr]
    data = copy.deepcopy(RAW)
    data["dtype"]["bytes_per_element"] = 4
    e = _load(tmp_path, data).energy
    assert e is not None and (e.mac_dtype, e.mac_fj) == ("fp32", 1150)
    both = _energy(mac_pj={"bf16": 0.5, "fp16": 0.6}, mac_dtype="fp16")
    e = _load(tmp_path, both, "both.yaml").energy
    assert e is not None and (e.mac_dtype, e.mac_fj) == ("fp16", 600)


def test_every_preset_has_an_energy_section() -> None:
    for name in ("npu-1h", "h100-sxm-8", "h100-sxm-8x4", "mi300x-8", "mi350x-8"):
        topo = load_topology(name)
        assert topo.energy is not None, name
        assert topo.energy.mac_dtype in ("bf16", "fp32")


@pytest.mark.parametrize(
    ("changes", "key", "rule"),
    [
        ({"sram_read_pj_per_byte": -1}, "energy.sram_read_pj_per_byte", "zero or positive"),
        ({"hbm_read_pj_per_byte": "fast"}, "energy.hbm_read_pj_per_byte", "must be a number"),
        ({"fetch_pj_per_byte": 0.0001}, "energy.fetch_pj_per_byte", "whole number of femtojoules"),
        ({"static_w": 1.0005}, "energy.static_w", "whole number of milliwatts"),
        ({"mac_dtype": "fp32"}, "energy.mac_dtype", "dtype.bytes_per_element is 2"),
        ({"mac_dtype": "fp64"}, "energy.mac_dtype", "must be one of"),
        ({"mac_pj": {"fp32": 1.0}}, "energy.mac_pj", "no operand type of 2 bytes"),
        ({"mac_pj": {"bf16": 0.5, "fp16": 0.6}}, "energy.mac_pj", "name one in mac_dtype"),
        ({"mac_dtype": "fp16", "mac_pj": {"bf16": 0.5}}, "energy.mac_pj", "energy of fp16"),
        ({"link_pj_per_byte": [40, 60]}, "energy.link_pj_per_byte", "1 dimension(s)"),
        ({"link_pj_per_byte": []}, "energy.link_pj_per_byte", "non-empty list"),
    ],
)
def test_a_bad_value_names_file_key_and_fix(
    tmp_path: Path, changes: dict[str, Any], key: str, rule: str
) -> None:
    with pytest.raises(TopologyError) as err:
        _load(tmp_path, _energy(**changes), name="bad.yaml")
    text = str(err.value)
    assert "bad.yaml" in text and f"'{key}'" in text and rule in text, text
    assert FIX in text, text


def test_a_missing_or_unknown_key_is_named(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match=r"missing key 'energy\.static_w'"):
        _load(tmp_path, _energy(static_w=None))
    with pytest.raises(TopologyError, match=r"unknown key 'energy\.dram_pj'"):
        _load(tmp_path, _energy(dram_pj=3))


def test_link_energy_per_dimension(tmp_path: Path) -> None:
    """On a topology of dimensions, one energy per dimension, innermost first."""
    topo = load_topology("h100-sxm-8x4")
    assert topo.energy is not None and topo.energy.link_fj == (40000, 120000)
    assert [topo.energy.link_fj_of(d) for d in (0, 1)] == [40000, 120000]


def test_an_energy_what_if_through_the_sweep_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    """``$NPUBENCH_TOPOLOGY_SET`` replaces energy keys like any other (a sweep's variant):
    twice the SRAM read energy is another machine (another fingerprint)."""
    from sim.topology import topology_from_env

    monkeypatch.delenv("NPUBENCH_TOPOLOGY", raising=False)
    monkeypatch.setenv("NPUBENCH_TOPOLOGY_SET", '{"energy.sram_read_pj_per_byte": 1.25}')
    topo = topology_from_env()
    assert topo.energy is not None and topo.energy.sram_read_fj == 1250
    assert topo.fingerprint != load_topology("npu-1h").fingerprint
