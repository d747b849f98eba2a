"""The benches' energy metrics (docs/adr/0027): absent (not zero) on a topology without an
``energy:`` section, gated like the counters they come from, and a failure says which
component moved."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from benches._energy import energy_explain, energy_meta, energy_spec
from pytest_npubench import Metric
from sim import load_topology
from sim.topology import TOPOLOGY_DIR


def _without_energy(tmp_path: Path) -> Path:
    data = yaml.safe_load((TOPOLOGY_DIR / "npu-1h.yaml").read_text())
    data = copy.deepcopy(data)
    del data["energy"]
    path = tmp_path / "no-energy.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_without_the_section_the_metrics_are_absent_and_the_meta_says_so(tmp_path: Path) -> None:
    path = _without_energy(tmp_path)
    topo = load_topology(path)
    assert energy_spec(topo, 0.001, {"x": Metric("1", "lower")}) == {}
    assert energy_meta(topo) == {"energy": f"absent (no energy: section in {path})"}


def test_dynamic_components_are_counters_static_and_total_follow_time() -> None:
    spec = energy_spec(load_topology("npu-1h"), 0.001, {})
    assert spec["energy_sram_read_uj"].is_counter(1.5, 3.0)  # any change is "changed"
    assert spec["energy_link_uj"].tolerance == 0.0
    assert not spec["energy_static_uj"].is_counter(1.0, 2.0)
    assert spec["energy_static_uj"].tolerance == spec["energy_uj"].tolerance == 0.001
    assert not spec["power_w"].gate


def test_the_explanation_names_the_component_that_moved_largest_first() -> None:
    base = {"energy_sram_read_uj": 0.0064, "energy_hbm_read_uj": 1.0, "energy_mac_uj": 2.0}
    now = {"energy_sram_read_uj": 0.0128, "energy_hbm_read_uj": 1.1, "energy_mac_uj": 2.0}
    assert energy_explain(now, base) == [
        "energy: SRAM read +100.00% (0.0064 -> 0.0128 µJ)",
        "energy: HBM read +10.00% (1 -> 1.1 µJ)",
    ]
    assert energy_explain(base, base) == []
