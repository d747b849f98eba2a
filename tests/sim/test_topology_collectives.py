"""The ``collectives:`` section (docs/adr/0021 decision 2): what a collective call costs beside
the wires. Its defaults are neutral and left out of the fingerprint; every rule is one error."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.topology import (
    NEUTRAL_PROTOCOLS,
    TOPOLOGY_DIR,
    CollectivesConfig,
    ProtocolConfig,
    Topology,
    TopologyError,
    load_topology,
)
from sim.topology.schema import build

NPU_1H = (
    "npu-1h:2414fd217697"  # the shipped file's fingerprint (with its energy: section, ADR 0027)
)
RAW = yaml.safe_load((TOPOLOGY_DIR / "npu-1h.yaml").read_text())
FIX = "Fix the value in the topology file"


def _with(section: object) -> dict[str, Any]:
    data = copy.deepcopy(RAW)
    data["collectives"] = section
    return data


def _load(tmp_path: Path, data: dict[str, Any], name: str = "c.yaml") -> Topology:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return load_topology(path)


NEUTRAL = {
    "launch_ns": 0,
    "step_sync_ns": 0.0,
    "protocol": "simple",
    "protocols": {
        "simple": {"efficiency": 1, "step_ns": 0},
        "ll128": {"efficiency": 0.92, "step_ns": 0},
        "ll": {"efficiency": 0.5},
    },
}


@pytest.mark.parametrize("section", [None, {}, NEUTRAL, {"protocols": {"ll": {}}}])
def test_a_neutral_section_keeps_todays_fingerprint(tmp_path: Path, section: object) -> None:
    """Left out, empty, or every key at its neutral value: npu-1h's fingerprint, the neutral
    config, and no collectives key in the content."""
    data = copy.deepcopy(RAW) if section is None else _with(section)
    topo = _load(tmp_path, data)
    assert topo.fingerprint == NPU_1H
    assert topo.collectives == CollectivesConfig() and topo.collectives.neutral
    assert "collectives" not in topo.to_dict()


@pytest.mark.parametrize(
    "section",
    [
        {"launch_ns": 5},
        {"step_sync_ns": 0.5},
        {"channels": 1},
        {"channels": 2},
        {"channels": "auto"},
        {"protocol": "ll"},
        {"protocol": "auto"},
        {"protocols": {"ll": {"efficiency": 0.6}}},
        {"protocols": {"simple": {"step_ns": 2}}},
        {"protocols": {"ll128": {"efficiency": 0.9, "step_ns": 0.001}}},
    ],
)
def test_each_non_neutral_value_moves_the_fingerprint_and_round_trips(
    tmp_path: Path, section: dict[str, Any]
) -> None:
    topo = _load(tmp_path, _with(section))
    assert topo.fingerprint != NPU_1H
    assert topo.to_dict()["collectives"] == section  # only what differs from neutral
    assert build(topo.to_dict(), "again").fingerprint == topo.fingerprint
    assert build(topo.to_dict(), "again").collectives == topo.collectives


def test_non_neutral_values_are_distinct_contents(tmp_path: Path) -> None:
    prints = {
        _load(tmp_path, _with(s)).fingerprint
        for s in (
            {"launch_ns": 5},
            {"launch_ns": 6},
            {"channels": 2},
            {"channels": "auto"},
            {"protocols": {"ll": {"efficiency": 0.6}}},
            {"protocols": {"ll128": {"efficiency": 0.6}}},
        )
    }
    assert len(prints) == 6


def test_values_are_read_and_partial_protocols_take_neutral_defaults(tmp_path: Path) -> None:
    section = {
        "launch_ns": 4000,
        "step_sync_ns": 700.5,
        "channels": "auto",
        "protocol": "ll128",
        "protocols": {"ll": {"step_ns": 3}, "simple": {"efficiency": 0.85}},
    }
    c = _load(tmp_path, _with(section)).collectives
    assert (c.launch_ps, c.step_sync_ps, c.channels, c.protocol) == (
        4_000_000,
        700_500,
        -1,
        "ll128",
    )
    assert c.protocols("ll") == ProtocolConfig(0.5, 3)
    assert c.protocols("simple") == ProtocolConfig(0.85, 0)
    assert c.protocols("ll128") == NEUTRAL_PROTOCOLS["ll128"]
    assert c.step_ps("ll") == 700_500 + 3000
    assert _load(tmp_path, _with({"channels": 7})).collectives.channels == 7


@pytest.mark.parametrize(
    ("section", "needles"),
    [
        ([1, 2], ["'collectives'", "mapping", FIX]),
        (
            {"lanch_ns": 5},
            ["unknown key 'collectives.lanch_ns'", "Allowed here: channels, launch_ns, ", "Remove"],
        ),
        ({"launch_ns": -1}, ["'collectives.launch_ns'", ">= 0", FIX]),
        ({"launch_ns": 0.0001}, ["'collectives.launch_ns'", "whole number of picoseconds", FIX]),
        ({"launch_ns": 2**41}, ["'collectives.launch_ns'", "MAX_OP_PS", FIX]),
        ({"launch_ns": "1:30"}, ["'collectives.launch_ns'", "sexagesimal", FIX]),
        ({"step_sync_ns": float("nan")}, ["'collectives.step_sync_ns'", "finite", FIX]),
        ({"step_sync_ns": True}, ["'collectives.step_sync_ns'", "must be a number", FIX]),
        ({"channels": 0}, ["'collectives.channels'", "positive integer or auto", FIX]),
        ({"channels": -1}, ["'collectives.channels'", "positive integer or auto", FIX]),
        ({"channels": 2.5}, ["'collectives.channels'", "positive integer or auto", FIX]),
        ({"channels": "many"}, ["'collectives.channels'", "positive integer or auto", FIX]),
        ({"channels": True}, ["'collectives.channels'", "positive integer or auto", FIX]),
        ({"channels": 40000}, ["'collectives.channels'", "at most 32767", FIX]),
        ({"protocol": "ll64"}, ["'collectives.protocol'", "one of simple, ll128, ll, auto", FIX]),
        ({"protocol": 1}, ["'collectives.protocol'", "one of simple", FIX]),
        ({"protocols": [1]}, ["'collectives.protocols'", "mapping", FIX]),
        (
            {"protocols": {"auto": {"step_ns": 1}}},
            ["unknown key 'collectives.protocols.auto'", "Allowed here: ll, ll128, simple"],
        ),
        ({"protocols": {"ll": 0.5}}, ["'collectives.protocols.ll'", "mapping", FIX]),
        (
            {"protocols": {"ll": {"speed": 1}}},
            ["unknown key 'collectives.protocols.ll.speed'", "Allowed here: efficiency, step_ns"],
        ),
        (
            {"protocols": {"ll": {"efficiency": 0}}},
            ["'collectives.protocols.ll.efficiency'", "positive", FIX],
        ),
        (
            {"protocols": {"simple": {"efficiency": 1.5}}},
            ["'collectives.protocols.simple.efficiency'", "at most 1", FIX],
        ),
        (
            {"protocols": {"ll128": {"step_ns": -3}}},
            ["'collectives.protocols.ll128.step_ns'", ">= 0", FIX],
        ),
        (
            {"protocols": {"ll128": {"step_ns": 1e-4}}},
            ["'collectives.protocols.ll128.step_ns'", "whole number of picoseconds", FIX],
        ),
        (
            {"protocols": {"ll": {"efficiency": 1e-12}}},
            ["'collectives.protocols.ll.efficiency'", "sending one 1024 KiB chunk", "at least"],
        ),
    ],
)
def test_a_bad_collectives_section_is_one_clear_error(
    tmp_path: Path, section: object, needles: list[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_with(section)))
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    message = str(info.value)
    assert str(path) in message
    for needle in needles:
        assert needle in message, (needle, message)


def test_replace_collectives_revalidates_and_merges_protocols() -> None:
    topo = load_topology()
    ll = topo.replace_collectives(protocol="ll", channels=7)
    assert (ll.collectives.protocol, ll.collectives.channels) == ("ll", 7)
    assert ll.fingerprint != topo.fingerprint and ll.chips == topo.chips
    assert ll.replace_collectives(channels="auto").collectives.channels == -1
    tuned = ll.replace_collectives(protocols={"ll": {"step_ns": 2}})
    again = tuned.replace_collectives(protocols={"ll": {"efficiency": 0.4}})
    assert again.collectives.protocols("ll") == ProtocolConfig(0.4, 2)
    assert again.collectives.protocol == "ll"
    back = again.replace_collectives(
        protocol="simple", channels=None, protocols={"ll": {"efficiency": 0.5, "step_ns": 0}}
    )
    assert back.fingerprint == NPU_1H
    with pytest.raises(TopologyError) as info:
        topo.replace_collectives(protocol="fast")
    assert "'collectives.protocol'" in str(info.value)
    assert "collectives overridden" in str(info.value)


def test_a_dimensions_and_collectives_file_round_trips() -> None:
    topo = (
        load_topology()
        .replace_dimensions(
            [
                {
                    "shape": "fully_connected",
                    "size": 8,
                    "links": 1,
                    "link_bw_gbs": 64,
                    "link_latency_ns": 700,
                },
                {
                    "shape": "switch",
                    "size": 2,
                    "ports": 4,
                    "link_bw_gbs": 50,
                    "link_latency_ns": 1000,
                    "nic_latency_ns": 2000,
                },
            ]
        )
        .replace_collectives(launch_ns=4000, channels="auto", protocol="auto")
    )
    again = build(topo.to_dict(), "again")
    assert (again.fingerprint, again.chips, again.collectives) == (
        topo.fingerprint,
        topo.chips,
        topo.collectives,
    )
