"""Shared fixtures: the default topology and small variants of it written to tmp files."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.topology import TOPOLOGY_DIR, Topology, load_topology


@pytest.fixture(scope="session")
def topo() -> Topology:
    return load_topology("npu-1h")


@pytest.fixture
def routes_a_hop_short(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted bug: every route of two or more hops stops one hop short (the routes
    ``sim.fabric.network`` builds), so a transfer's data never crosses its last link."""
    import dataclasses

    import sim.fabric.network

    real = sim.fabric.network.build_dimensions

    def short(*args: Any) -> Any:
        built = real(*args)
        routes = tuple(tuple(r[:-1] if len(r) > 1 else r for r in row) for row in built.routes)
        return dataclasses.replace(built, routes=routes)

    monkeypatch.setattr(sim.fabric.network, "build_dimensions", short)


@pytest.fixture(scope="session")
def make_topo(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Topology]:
    """Build a topology from npu-1h with some ``section__key`` (or top-level) values changed."""

    def make(**changes: Any) -> Topology:
        data = yaml.safe_load((TOPOLOGY_DIR / "npu-1h.yaml").read_text())
        for dotted, value in changes.items():
            if "__" not in dotted:
                data[dotted] = value
                continue
            section, key = dotted.split("__")
            data[section][key] = value
        path: Path = tmp_path_factory.mktemp("topo") / "variant.yaml"
        path.write_text(yaml.safe_dump(data))
        return load_topology(path)

    return make


#: Breadth the default run (``pytest -n auto``) leaves to ``.ci/run``'s ``pytest -m heavy`` step
#: (issue 27: the default run within 5 minutes on 2 loaded cores). Each entry is a node-id
#: pattern; what stays in the default run covers the same code with one representative:
#: - hostile-input fuzzing (tests/fuzz): every mutant family;
#: - the ``-n2`` twin of a flow whose ``-n0`` run stays (test_plugin_xdist and the byte-for-byte
#:   n0/n2 comparisons stay too);
#: - property sweeps over every topology / shard count where one topology / count stays;
#: - subprocess-heavy end-to-end checks of what .ci/run's main job (``pytest --npubench all``)
#:   also checks, and kill -9 at six moments (the two overlapping regens stay).
HEAVY = (
    "tests/fuzz/*",
    "tests/plugin/*[[]-n2[]]",
    "tests/plugin/*[[]n2[]]",
    "tests/sim/test_allreduce.py::test_time_never_decreases_with_size[[]torus2d[]]",
    "tests/sim/test_allreduce.py::test_time_never_decreases_with_size[[]switch[]]",
    "tests/sim/test_allreduce.py::test_time_never_decreases_with_size[[]fully_connected[]]",
    "tests/sim/test_allreduce.py::test_without_contention_time_never_decreases_with_size[[]t*",
    "tests/sim/test_allreduce.py::test_without_contention_time_never_decreases_with_size[[]s*",
    "tests/sim/test_allreduce.py::test_without_contention_time_never_decreases_with_size[[]f*",
    "tests/sim/test_hierarchical.py::test_no_run_beats_the_bounds[[]1[]]",
    "tests/sim/test_hierarchical.py::test_no_run_beats_the_bounds[[]2[]]",
    "tests/sim/test_fabric_fast.py::test_timing_is_the_reference_engines[[]torus2d-*",
    "tests/sim/test_fabric_fast.py::test_timing_is_the_reference_engines[[]switch-*",
    "tests/sim/test_fabric_symmetry.py::test_the_symmetric_path_gives_the_event_engines_log[[]16-*",
    "tests/sim/test_tp_layer.py::test_no_mode_beats_the_bound",
    "tests/sim/test_tp_layer.py::test_coarse_groups_agree_with_the_tile_level_joint_run[[]resident[]]",
    "tests/plugin/test_plugin_option_shard.py::test_merged_shards_equal_the_unsharded_run_byte_for_byte[[]3[]]",
    "tests/plugin/test_plugin_option_shard.py::test_merged_shards_equal_the_unsharded_run_byte_for_byte[[]7[]]",
    "tests/plugin/test_plugin_regen_concurrency.py::test_kill_9_at_staggered_times_never_loses_an_entry",
    "tests/benches/test_bench_ccl_nccltests.py::test_a_gated_run_writes_the_tables_beside_the_figures",
    "tests/benches/test_bench_*.py::test_committed_baselines_cover_every_config_and_*",
    # issue 26's planted-bug catalogue: each bug runs the real gate in a subprocess
    "tests/planted/test_derived.py::*",
    "tests/planted/test_paths.py::*",
    "tests/planted/test_races.py::*",
    "tests/planted/test_sram_energy.py::*",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the HEAVY tests ``heavy`` (deselected by the ini's ``-m "not heavy"``)."""
    heavy = pytest.mark.heavy
    for item in items:
        if any(fnmatch.fnmatchcase(item.nodeid, pattern) for pattern in HEAVY):
            item.add_marker(heavy)
