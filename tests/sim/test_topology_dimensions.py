"""``chips.dimensions`` (docs/adr/0021 decision 1): the general form of the chip network, its
one-level shorthand, derived values, fingerprints, round trips and every rejection rule."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.topology import (
    CHIP_TOPOLOGY_VALUES,
    TOPOLOGY_DIR,
    DimensionConfig,
    Topology,
    TopologyError,
    dimensions_of,
    load_topology,
)
from sim.topology.schema import build

NPU_1H = (
    "npu-1h:2414fd217697"  # the shipped file's fingerprint (with its energy: section, ADR 0027)
)
RAW = yaml.safe_load((TOPOLOGY_DIR / "npu-1h.yaml").read_text())
SHORTHAND = ("topology", "torus_dims", "link_bw_gbs", "link_latency_ns")


def _ring8() -> dict[str, Any]:
    return {"shape": "ring", "size": 8, "link_bw_gbs": 50, "link_latency_ns": 1000}


def _with_dimensions(dims: list[dict[str, Any]], count: int | None = None) -> dict[str, Any]:
    """npu-1h's content with its chips written as ``dims`` (the shorthand keys removed)."""
    data = copy.deepcopy(RAW)
    for key in SHORTHAND:
        del data["chips"][key]
    data["chips"]["dimensions"] = dims
    data["chips"]["count"] = math.prod(d["size"] for d in dims) if count is None else count
    return data


def _load(tmp_path: Path, data: dict[str, Any], name: str = "dims.yaml") -> Topology:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return load_topology(path)


def _rejection(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    message = str(info.value)
    assert str(path) in message
    return message


# --- the shorthand and the general form describe the same system -------------------------


def test_the_shipped_shorthand_keeps_todays_fingerprint_and_reads_as_one_dimension() -> None:
    topo = load_topology()
    assert topo.fingerprint == NPU_1H
    assert topo.chips.dimensions == ()
    assert "dimensions" not in topo.to_dict()["chips"]
    assert dimensions_of(topo.chips) == (DimensionConfig("ring", 8, 50, 1000),)


@pytest.mark.parametrize(
    ("changes", "dims"),
    [
        ({}, [_ring8()]),
        (
            {"topology": "fully_connected"},
            [{**_ring8(), "shape": "fully_connected"}],
        ),
        ({"topology": "switch"}, [{**_ring8(), "shape": "switch"}]),
        (
            {"topology": "torus2d", "torus_dims": (2, 4)},
            [{**_ring8(), "size": 4}, {**_ring8(), "size": 2}],
        ),
        (
            {"topology": "torus2d", "torus_dims": (1, 8)},
            [_ring8(), {**_ring8(), "size": 1}],
        ),
    ],
)
def test_a_dimensions_file_equals_its_shorthand(
    tmp_path: Path, changes: dict[str, Any], dims: list[dict[str, Any]]
) -> None:
    """Same dimensions_of, same derived topology, torus_dims, link values and count."""
    shorthand = load_topology().replace_chips(**changes)
    general = _load(tmp_path, _with_dimensions(dims))
    assert dimensions_of(general.chips) == dimensions_of(shorthand.chips)
    for key in ("topology", "link_bw_gbs", "link_latency_ns", "count"):
        assert getattr(general.chips, key) == getattr(shorthand.chips, key), key
    if shorthand.chips.topology == "torus2d":  # else the shorthand's torus_dims are unread
        assert general.chips.torus_dims == shorthand.chips.torus_dims
    assert general.chips.link_bw == shorthand.chips.link_bw
    assert general.chips.link_latency_ps == shorthand.chips.link_latency_ps


def test_a_dimensions_file_is_fingerprinted_by_its_dimensions(tmp_path: Path) -> None:
    """Its content holds the dimensions (not the shorthand): a different file from npu-1h
    even when it is the same ring; defaults written out change nothing; a value does."""
    base = _load(tmp_path, _with_dimensions([_ring8()]))
    chips = base.to_dict()["chips"]
    assert chips["dimensions"] == [_ring8()]
    assert not set(SHORTHAND) & set(chips)
    assert base.fingerprint != NPU_1H
    explicit = {**_ring8(), "links": 1, "nic_latency_ns": 0}
    assert _load(tmp_path, _with_dimensions([explicit]), "e.yaml").fingerprint == base.fingerprint
    prints = {base.fingerprint}
    for change in ({"links": 2}, {"link_bw_gbs": 64}, {"nic_latency_ns": 5}, {"size": 4}):
        prints.add(
            _load(tmp_path, _with_dimensions([{**_ring8(), **change}]), "c.yaml").fingerprint
        )
    assert len(prints) == 5


@pytest.mark.parametrize(
    ("shapes", "topology"),
    [
        (["ring"], "ring"),
        (["fully_connected"], "fully_connected"),
        (["switch"], "switch"),
        (["ring", "ring"], "torus2d"),
        (["ring", "switch"], "multi"),
        (["fully_connected", "fully_connected"], "multi"),
        (["ring", "ring", "ring"], "multi"),
    ],
)
def test_the_derived_chip_topology(tmp_path: Path, shapes: list[str], topology: str) -> None:
    """One dimension: its shape; two rings: torus2d (rows = the outer size); else multi.
    link_bw_gbs / link_latency_ns read dimension 0's."""
    dims = [
        {"shape": s, "size": 2 + i, "link_bw_gbs": 10 * (i + 1), "link_latency_ns": 100 + i}
        for i, s in enumerate(shapes)
    ]
    chips = _load(tmp_path, _with_dimensions(dims)).chips
    assert chips.topology == topology and topology in CHIP_TOPOLOGY_VALUES
    assert (chips.link_bw_gbs, chips.link_latency_ns) == (10, 100)
    assert chips.count == math.prod(2 + i for i in range(len(shapes)))
    if topology == "torus2d":
        assert chips.torus_dims == (3, 2)
    assert [d.shape for d in dimensions_of(chips)] == shapes


def test_optional_keys_take_their_defaults_and_are_read(tmp_path: Path) -> None:
    dims = [
        {**_ring8(), "shape": "fully_connected", "links": 3},
        {
            "shape": "switch",
            "size": 2,
            "ports": 4,
            "link_bw_gbs": 12.5,
            "link_latency_ns": 1500.5,
            "nic_latency_ns": 2000,
            "switch_reduce_gbs": 100,
        },
    ]
    fc, sw = _load(tmp_path, _with_dimensions(dims)).chips.dimensions
    assert (fc.links, fc.ports, fc.nic_latency_ns, fc.switch_reduce_gbs, fc.lanes) == (
        3,
        1,
        0,
        0,
        3,
    )
    assert (sw.links, sw.ports, sw.lanes, sw.nic_latency_ps) == (1, 4, 4, 2_000_000)
    assert (sw.link_latency_ps, sw.switch_reduce_gbs) == (1_500_500, 100)


# --- every rule: one message naming the file, the key and the fix ------------------------


def _dims(*changes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**_ring8(), **c} for c in changes]


def _switch(**changes: Any) -> dict[str, Any]:
    return {**_ring8(), "shape": "switch", **changes}


FIX = "Fix the value in the topology file"


def _chips(data: dict[str, Any], **changes: Any) -> dict[str, Any]:
    data["chips"].update(changes)
    return data


@pytest.mark.parametrize(
    ("data", "needles"),
    [
        (
            _chips(_with_dimensions(_dims({})), dimensions={"shape": "ring"}),
            ["'chips.dimensions'", "must be a list", FIX],
        ),
        (
            _chips(_with_dimensions(_dims({})), dimensions=[]),
            ["'chips.dimensions'", "at least one"],
        ),
        (
            _chips(_with_dimensions(_dims({})), dimensions=[_ring8(), 3]),
            ["'chips.dimensions[1]'", "mapping", FIX],
        ),
        (
            _with_dimensions([_ring8(), {**_ring8(), "size": 1, "bandwidth": 3}]),
            [
                "unknown key 'chips.dimensions[1].bandwidth'",
                "Allowed here: link_bw_gbs, ",
                "Remove",
            ],
        ),
        (
            _with_dimensions([{k: v for k, v in _ring8().items() if k != "link_bw_gbs"}]),
            ["missing key 'chips.dimensions[0].link_bw_gbs'", "Add it"],
        ),
        (
            _with_dimensions([{k: v for k, v in _ring8().items() if k != "shape"}]),
            ["missing key 'chips.dimensions[0].shape'", "Add it"],
        ),
        (
            _with_dimensions(_dims({"shape": "mesh"})),
            ["'chips.dimensions[0].shape'", "one of ring, fully_connected, switch", FIX],
        ),
        (
            _with_dimensions(_dims({"size": 0}), count=1),
            ["'chips.dimensions[0].size'", "positive", FIX],
        ),
        (
            _with_dimensions(_dims({"size": 2.5}), count=2),
            ["'chips.dimensions[0].size'", "integer", FIX],
        ),
        (
            _with_dimensions(_dims({"size": 40000}), count=8),
            ["'chips.dimensions[0].size'", "at most 32767", FIX],
        ),
        (_with_dimensions(_dims({"links": 0})), ["'chips.dimensions[0].links'", "positive", FIX]),
        (
            _with_dimensions([_switch(links=2)]),
            ["'chips.dimensions[0].links'", "ring or fully_connected", "is switch", "Remove"],
        ),
        (
            _with_dimensions(_dims({"ports": 2})),
            ["'chips.dimensions[0].ports'", "only read when", "is ring", "Remove"],
        ),
        (
            _with_dimensions(_dims({"shape": "fully_connected", "switch_reduce_gbs": 10})),
            ["'chips.dimensions[0].switch_reduce_gbs'", "is fully_connected", "Remove"],
        ),
        (
            _with_dimensions([_switch(ports=0)]),
            ["'chips.dimensions[0].ports'", "positive", FIX],
        ),
        (
            _with_dimensions(_dims({}, {"size": 1, "link_bw_gbs": -1})),
            ["'chips.dimensions[1].link_bw_gbs'", "positive", FIX],
        ),
        (
            _with_dimensions(_dims({"link_latency_ns": 0.0001})),
            ["'chips.dimensions[0].link_latency_ns'", "whole number of picoseconds", FIX],
        ),
        (
            _with_dimensions(_dims({"link_latency_ns": 0})),
            ["'chips.dimensions[0].link_latency_ns'", "positive", FIX],
        ),
        (
            _with_dimensions(_dims({"nic_latency_ns": -1})),
            ["'chips.dimensions[0].nic_latency_ns'", ">= 0", FIX],
        ),
        (
            _with_dimensions(_dims({"nic_latency_ns": 0.0005})),
            ["'chips.dimensions[0].nic_latency_ns'", "whole number of picoseconds", FIX],
        ),
        (
            _with_dimensions(_dims({"nic_latency_ns": 2**41})),
            ["'chips.dimensions[0].nic_latency_ns'", "MAX_OP_PS", FIX],
        ),
        (
            _with_dimensions([_switch(switch_reduce_gbs=-2)]),
            ["'chips.dimensions[0].switch_reduce_gbs'", ">= 0", FIX],
        ),
        (
            _with_dimensions(_dims({"link_bw_gbs": "fast"})),
            ["'chips.dimensions[0].link_bw_gbs'", "must be a number", FIX],
        ),
        (
            _with_dimensions(_dims({}, {"size": 2}), count=8),
            ["'chips.count'", "chips.dimensions", "8 x 2 = 16", FIX],
        ),
        (
            _chips(_with_dimensions(_dims({})), topology="ring", link_bw_gbs=50),
            ["'chips.dimensions'", "'chips.topology'", "'chips.link_bw_gbs'", "not both", "Remove"],
        ),
        (
            _chips(_with_dimensions(_dims({})), torus_dims=[2, 4]),
            ["'chips.dimensions'", "'chips.torus_dims'", "not both"],
        ),
        (
            {**_with_dimensions(_dims({})), "chips": {"dimensions": [_ring8()], "count": 8}},
            ["missing key 'chips.chunk_kib'", "Add it"],
        ),
        (
            _with_dimensions(_dims({"link_bw_gbs": 1e-9})),
            ["'chips.dimensions[0].link_bw_gbs'", "sending one 1024 KiB chunk", "at least"],
        ),
        (
            _with_dimensions([_switch(switch_reduce_gbs=1e-9)]),
            ["'chips.dimensions[0].switch_reduce_gbs'", "reducing one 1024 KiB chunk", "at least"],
        ),
        (
            _with_dimensions(_dims(*({"size": 1} for _ in range(17)))),
            ["'chips.dimensions'", "at most 16 dimensions", FIX],
        ),
    ],
)
def test_a_bad_dimensions_list_is_one_clear_error(
    tmp_path: Path, data: dict[str, Any], needles: list[str]
) -> None:
    message = _rejection(tmp_path, data)
    for needle in needles:
        assert needle in message, (needle, message)


@pytest.mark.parametrize(
    ("dims", "links"),
    [
        # parallel links count: a ring of 8 has 2 x 8 link directions per parallel link
        ([{**_ring8(), "links": 2047}], 2 * 8 * 2047),
        ([{**_ring8(), "links": 2048}], 2 * 8 * 2048),
        # ports count: each port is one link up and one down
        ([_switch(ports=2047)], 2 * 8 * 2047),
        ([_switch(ports=2048)], 2 * 8 * 2048),
        # every group of every dimension: 16 rings of 8 and 8 fully connected groups of 16
        (
            [_ring8(), {**_ring8(), "shape": "fully_connected", "size": 16, "links": 14}],
            16 * 2 * 8 + 8 * 16 * 15 * 14,
        ),
        (
            [_ring8(), {**_ring8(), "shape": "fully_connected", "size": 16, "links": 17}],
            16 * 2 * 8 + 8 * 16 * 15 * 17,
        ),
    ],
)
def test_a_dimensions_network_is_bounded_by_its_link_count(
    tmp_path: Path, dims: list[dict[str, Any]], links: int
) -> None:
    """Links are int16 engine codes: parallel links and ports count, each group counts."""
    data = _with_dimensions(dims)
    if links + 1 <= 2**15 - 1:
        assert _load(tmp_path, data).chips.count == data["chips"]["count"]
        return
    message = _rejection(tmp_path, data)
    for needle in ("'chips.dimensions'", f"has {links} links", "int16", "fewer"):
        assert needle in message, (needle, message)


# --- round trips and the sweep helpers ---------------------------------------------------

_SHAPES = st.sampled_from(["ring", "fully_connected", "switch"])


@st.composite
def _dimension_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    dims = []
    for _ in range(draw(st.integers(1, 3))):
        shape = draw(_SHAPES)
        dim: dict[str, Any] = {
            "shape": shape,
            "size": draw(st.integers(1, 4)),
            "link_bw_gbs": draw(st.sampled_from([0.5, 12.5, 50, 64, 400.25])),
            "link_latency_ns": draw(st.sampled_from([1, 700, 1000.125])),
        }
        lanes = draw(st.sampled_from([None, 1, 2, 3]))
        if lanes is not None:
            dim["ports" if shape == "switch" else "links"] = lanes
        nic = draw(st.sampled_from([None, 0, 2000, 0.5]))
        if nic is not None:
            dim["nic_latency_ns"] = nic
        if shape == "switch":
            reduce = draw(st.sampled_from([None, 0, 100, 37.5]))
            if reduce is not None:
                dim["switch_reduce_gbs"] = reduce
        dims.append(dim)
    return dims


@settings(max_examples=60, deadline=None)
@given(_dimension_lists())
def test_random_valid_dimension_lists_round_trip(dims: list[dict[str, Any]]) -> None:
    """build -> to_dict -> build keeps the fingerprint and the dimensions, in order, and
    replace_dimensions from the shorthand file makes the same system."""
    topo = build(_with_dimensions(dims), "random.yaml")
    assert [d.shape for d in topo.chips.dimensions] == [d["shape"] for d in dims]
    assert [d.size for d in topo.chips.dimensions] == [d["size"] for d in dims]
    again = build(topo.to_dict(), "again")
    assert again.fingerprint == topo.fingerprint
    assert again.chips == topo.chips
    swept = load_topology().replace_dimensions(dims)
    assert swept.fingerprint == topo.fingerprint
    objects = load_topology().replace_dimensions(list(topo.chips.dimensions))
    assert (objects.fingerprint, objects.chips) == (swept.fingerprint, swept.chips)


def test_replace_dimensions_switches_form_and_revalidates() -> None:
    topo = load_topology()
    one = topo.replace_dimensions([_ring8()])
    assert dimensions_of(one.chips) == dimensions_of(topo.chips)
    assert not set(SHORTHAND) & set(one.to_dict()["chips"])
    pod = topo.replace_dimensions([_ring8(), _switch(size=4, nic_latency_ns=2000)])
    assert (pod.chips.count, pod.chips.topology) == (32, "multi")
    with pytest.raises(TopologyError) as info:
        topo.replace_dimensions([{**_ring8(), "shape": "mesh"}])
    assert "chips.dimensions[0].shape" in str(info.value)
    assert "dimensions overridden" in str(info.value)


def test_replace_chips_keeps_working_and_returns_a_dimensions_file_to_the_shorthand() -> None:
    topo = load_topology()
    assert topo.replace_chips(count=8).fingerprint == NPU_1H
    pod = topo.replace_dimensions([_ring8(), _ring8()])
    back = pod.replace_chips(count=8, topology="ring", torus_dims=(2, 4))
    assert back.fingerprint == NPU_1H
    assert pod.replace_chips(reduce_gbs=128).chips.dimensions == pod.chips.dimensions


def test_the_schema_page_names_every_key() -> None:
    """docs/topology-schema.md documents each key the parsers accept."""
    from sim.topology.collectives_schema import COLLECTIVES_KEYS, PROTOCOL_KEYS
    from sim.topology.dimensions_schema import DIMENSION_KEYS
    from sim.topology.schema import _SCHEMA

    page = (Path(__file__).resolve().parents[2] / "docs" / "topology-schema.md").read_text()
    keys = [f"`{s}.{k}`" for s, fields in _SCHEMA.items() for k in fields if s != "pe"]
    keys += [f"`{k}`" for k in DIMENSION_KEYS] + ["`chips.dimensions`"]
    keys += [f"`{k}`" for k in COLLECTIVES_KEYS] + [f"`protocols.<p>.{k}`" for k in PROTOCOL_KEYS]
    assert [k for k in keys if k not in page] == []


def test_multi_is_derived_never_chosen(tmp_path: Path) -> None:
    """A shorthand file may not write topology: multi; its unknown-key message offers the
    general form."""
    data = copy.deepcopy(RAW)
    data["chips"]["topology"] = "multi"
    message = _rejection(tmp_path, data)
    assert (
        "'chips.topology'" in message and "one of ring, fully_connected, torus2d, switch" in message
    )
    data = copy.deepcopy(RAW)
    data["chips"]["dimension"] = [_ring8()]
    message = _rejection(tmp_path, data)
    assert "unknown key 'chips.dimension'" in message and "dimensions, link_bw_gbs" in message
