"""The dependency-graph race check (sim.collectives.depcheck, sim.tp.depcheck)."""

from __future__ import annotations

from sim.collectives.depcheck import Access, first_race
from sim.topology import load_topology
from sim.tp.config import LayerConfig
from sim.tp.depcheck import check_layer_dependencies
from sim.tp.run import run_layer


def _race(deps: list[tuple[int, ...]], acc: list[Access]) -> str:
    return first_race(deps, acc, lambda i: f"op{i}", lambda w, lo, hi: f"{w}[{lo}:{hi}]")


def test_a_reader_must_reach_its_producer_transitively() -> None:
    acc = [Access(0, "y", 0, 8, True), Access(2, "y", 4, 6, False)]
    assert _race([(), (0,), (1,)], acc) == ""  # 0 -> 1 -> 2
    msg = _race([(), (), (1,)], acc)
    assert msg.startswith("race: op2 does not depend on op0") and "y[4:6]" in msg


def test_only_the_last_writer_of_each_element_is_a_producer() -> None:
    acc = [Access(0, "y", 0, 8, True), Access(1, "y", 0, 4, True), Access(2, "y", 0, 4, False)]
    assert _race([(), (0,), (1,)], acc) == ""
    acc.append(Access(3, "y", 4, 8, False))  # elements 4..8 still come from op 0 alone
    assert _race([(), (0,), (1,), (0,)], acc) == ""
    assert "op3 does not depend on op0" in _race([(), (0,), (1,), ()], acc)


def test_writes_into_one_accumulator_commute_but_a_reader_needs_them_all() -> None:
    acc = [
        Access(0, "y", 0, 4, True),
        Access(1, "y", 0, 4, True, group=1),
        Access(2, "y", 0, 4, True, group=1),
        Access(3, "y", 0, 4, False),
    ]
    assert _race([(), (0,), (0,), (1, 2)], acc) == ""
    assert "op3 does not depend on op2" in _race([(), (0,), (0,), (1,)], acc)
    assert "op2 does not depend on op0" in _race([(), (0,), (), (1, 2)], acc)


def test_every_overlap_mode_of_a_layer_is_race_free_as_built() -> None:
    topo = load_topology("npu-1h").replace_chips(count=4, topology="ring", torus_dims=(1, 4))
    for layer in ("mlp", "attn"):
        for mode in ("serial", "gemm_ar", "ag_rs"):
            run = run_layer(LayerConfig(layer, 128, 128, mode), topo)
            assert check_layer_dependencies(run) == "", (layer, mode)
