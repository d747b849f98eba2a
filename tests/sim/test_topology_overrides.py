"""A topology with keys replaced (a sweep's variant, sim.topology.overrides): validated like a
file, a bad key or value named, the file untouched."""

from __future__ import annotations

import json

import pytest

from sim.errors import TopologyError
from sim.topology import load_topology, topology_from_env
from sim.topology.overrides import OVERRIDES_ENV, parse_overrides


def test_a_replaced_key_changes_the_topology_and_its_fingerprint() -> None:
    base = load_topology("npu-1h")
    fast = load_topology("npu-1h", {"hbm.hbm_to_router_bw_gbs": int(2 * base.hbm.bw)})
    assert fast.hbm.bw == 2 * base.hbm.bw
    assert fast.fingerprint != base.fingerprint
    assert "with hbm.hbm_to_router_bw_gbs=" in fast.source
    assert load_topology("npu-1h").fingerprint == base.fingerprint  # nothing cached or written


def test_the_environment_variable_is_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OVERRIDES_ENV, json.dumps({"chips.link_bw_gbs": 100}))
    assert topology_from_env().chips.link_bw_gbs == 100


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ({"hbm.no_such_key": 1}, "hbm has no key 'no_such_key'"),
        ({"nosection.key": 1}, "the top level has no key 'nosection'"),
        ({"hbm.hbm_to_router_bw_gbs": -5}, "must be positive"),
        ({"hbm.hbm_to_router_bw_gbs": "fast"}, "hbm.hbm_to_router_bw_gbs"),
    ],
)
def test_a_bad_override_is_one_message_naming_the_key(overrides: dict, says: str) -> None:
    with pytest.raises(TopologyError, match=says):
        load_topology("npu-1h", overrides)


@pytest.mark.parametrize("text", ["not json", "[1, 2]", "{}", '{"hbm.x": {"a": 1}}'])
def test_a_bad_variable_names_the_variable(text: str) -> None:
    with pytest.raises(TopologyError, match=OVERRIDES_ENV):
        parse_overrides(text)
