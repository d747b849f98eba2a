"""The ccl bench's two-level system (benches/_ccl_two_level.py): switch x switch built from
the topology file's own chips and link, every collective with the hierarchical algorithms
beside the flat ones, gated at 2 nodes, and its committed baselines simulated from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import benches.ccl as ccl
from benches._ccl_two_level import NODES, TWO_LEVEL, algorithms, two_level
from sim.collectives import COLLECTIVE_ALGORITHMS
from sim.topology import dimensions_of

BASELINE = Path(__file__).resolve().parents[2] / "baselines" / "ccl.json"


def _two_level() -> list[object]:
    return [c for c in ccl.BENCH.configs if c.params["topology"] == TWO_LEVEL]


def test_the_system_is_the_files_chips_and_link_on_two_switches() -> None:
    node = ccl.TOPOLOGY.chips.count
    topo = ccl.topology_for({"topology": TWO_LEVEL, "chips": 2 * node})
    dims = dimensions_of(topo.chips)
    assert [(d.shape, d.size) for d in dims] == [("switch", node), ("switch", 2)]
    for d in dims:  # no constant of its own: the file's link on both dimensions
        assert d.link_bw_gbs == ccl.TOPOLOGY.chips.link_bw_gbs
        assert d.link_latency_ns == ccl.TOPOLOGY.chips.link_latency_ns
    with pytest.raises(ValueError, match="not 2 or more nodes"):
        two_level(ccl.TOPOLOGY, node + 1)


def test_every_collective_runs_its_algorithms_and_the_hierarchical_ones() -> None:
    configs = _two_level()
    got = {
        (c.params.get("collective", "allreduce"), c.params["algorithm"])  # type: ignore[attr-defined]
        for c in configs
    }
    for collective, algos in COLLECTIVE_ALGORITHMS.items():
        for a in algos:
            if a in ("torus2d", "nvls"):  # need a torus; one switch
                assert (collective, a) not in got
            else:
                assert (collective, a) in got
    assert {("allreduce", "hierarchical"), ("allreduce", "tree_ring")} <= got
    assert {("all_gather", "hierarchical"), ("reduce_scatter", "hierarchical")} <= got
    assert algorithms("alltoall") == ["direct", "pairwise"]
    node = ccl.TOPOLOGY.chips.count
    assert {c.params["chips"] for c in configs} == {node * n for n in NODES}  # type: ignore[attr-defined]


def test_gated_at_two_nodes_regen_only_beyond() -> None:
    """Gated: allreduce 4 KiB, 1 MiB, 64 MiB and the others 16 KiB, 4 MiB, all at 2 nodes;
    every 4-node config is regen-only (same code paths, about 1 s each for the model)."""
    node = ccl.TOPOLOGY.chips.count
    configs = _two_level()
    gated = [c for c in configs if not c.regen_only]  # type: ignore[attr-defined]
    assert {c.params["chips"] for c in gated} == {2 * node}  # type: ignore[attr-defined]
    ar = [c for c in gated if "collective" not in c.params]  # type: ignore[attr-defined]
    assert {c.params["size"] for c in ar} == {4 << 10, 1 << 20, 64 << 20}  # type: ignore[attr-defined]
    assert len(ar) == 3 * len(algorithms("allreduce"))
    more = [c for c in gated if "collective" in c.params]  # type: ignore[attr-defined]
    assert {c.params["size"] for c in more} == {16 << 10, 4 << 20}  # type: ignore[attr-defined]
    assert ccl.BENCH.config("all_gather-two_level-p16-hierarchical-4MiB").params == {
        "collective": "all_gather",
        "topology": TWO_LEVEL,
        "chips": 16,
        "algorithm": "hierarchical",
        "size": 4 << 20,
    }


def test_a_committed_two_level_baseline_is_the_simulators() -> None:
    """One gated config re-simulated here equals its committed baseline (baselines come from
    the simulator, never by hand), and the hierarchical allreduce there checks clean."""
    committed = json.loads(BASELINE.read_text())["configs"]
    for cid in ("two_level-p16-hierarchical-1MiB", "reduce_scatter-two_level-p16-direct-16KiB"):
        params = ccl.BENCH.config(cid).params
        result = ccl.run(dict(params))
        assert result.ok, result.message
        assert result.metrics["wrong"] == 0
        for key in ("time_ns", "records", "transfers", "link_bytes_max"):
            assert result.metrics[key] == committed[cid]["metrics"][key], (cid, key)
