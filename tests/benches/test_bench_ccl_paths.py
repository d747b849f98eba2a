"""Every code path of the collectives has a gated ccl config (issue 9: gate every path).

A path is (algorithm, topology, chip-count class): ``pow2`` (4, 8 or 16 chips), ``even``
(not a power of two: halving-doubling's MPICH fold, a 2 x 3 torus) and ``odd`` (the double
binary tree's shifted second tree, a 3 x 3 torus whose ring order needs a wrap link). Each
path must be gated at 4, 8 and 16 chips where the class is pow2, and at some chip count of
the other classes.
"""

from __future__ import annotations

import benches.ccl as ccl
from sim.collectives import ALGORITHMS, COLLECTIVE_ALGORITHMS, algorithms_for


def _klass(chips: int) -> str:
    if chips & (chips - 1) == 0:
        return "pow2"
    return "even" if chips % 2 == 0 else "odd"


def _paths() -> set[tuple[str, str, str]]:
    return {
        (algorithm, topology, klass)
        for topology in ccl.TOPOLOGIES
        for algorithm in algorithms_for(topology)
        for klass in ("pow2", "even", "odd")
    }


def test_every_path_has_a_gated_config() -> None:
    """algorithm x topology x {pow2, even, odd}: none lacks a gated config."""
    gated = {
        (c.params["algorithm"], c.params["topology"], _klass(c.params["chips"]))
        for c in ccl.BENCH.configs
        if not c.regen_only
    }
    missing = sorted(_paths() - gated)
    assert not missing, f"paths with no gated ccl config: {missing}"


def test_powers_of_two_are_gated_at_4_8_and_16_chips() -> None:
    """Every algorithm x topology is gated at 4, 8 and 16 chips."""
    gated = {
        (c.params["algorithm"], c.params["topology"], c.params["chips"])
        for c in ccl.BENCH.configs
        if not c.regen_only
    }
    missing = [
        (a, t, p)
        for t in ccl.TOPOLOGIES
        for a in algorithms_for(t)
        for p in (4, 8, 16)
        if (a, t, p) not in gated
    ]
    assert not missing, missing


def test_the_path_list_covers_every_algorithm() -> None:
    """The enumeration is not vacuous: every algorithm appears, torus2d only on the torus."""
    paths = _paths()
    assert {a for a, _t, _k in paths} == set(ALGORITHMS)
    assert {t for a, t, _k in paths if a == "torus2d"} == {"torus2d"}
    assert len(paths) == 3 * (4 * 4 + 1)


def _more_paths() -> set[tuple[str, str, str, str]]:
    return {
        (collective, algorithm, topology, klass)
        for collective in ccl.MORE_COLLECTIVES
        for algorithm in COLLECTIVE_ALGORITHMS[collective]
        for topology in ccl.TOPOLOGIES
        for klass in ("pow2", "even", "odd")
    }


def test_every_other_collective_path_has_a_gated_config() -> None:
    """collective x algorithm x topology x {pow2, even, odd} beside allreduce: none lacks a
    gated config (the recursive algorithms fold for even and odd p, the torus is 2 x 3 and
    3 x 3 there)."""
    gated = {
        (
            c.params["collective"],
            c.params["algorithm"],
            c.params["topology"],
            _klass(c.params["chips"]),
        )
        for c in ccl.BENCH.configs
        if not c.regen_only and "collective" in c.params
    }
    missing = sorted(_more_paths() - gated)
    assert not missing, f"paths with no gated ccl config: {missing}"
    assert (
        len(_more_paths())
        == 3 * 4 * sum(len(COLLECTIVE_ALGORITHMS[c]) for c in ccl.MORE_COLLECTIVES)
        == 180
    )
