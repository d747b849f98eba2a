"""The other nccl-tests collectives (all_gather and reduce_scatter beside the ring, alltoall,
broadcast, reduce, sendrecv): results element by element, the functional check against
planted bugs, the lower bounds, the blocking pairwise steps, bad requests.

Expected values come from the collectives' definitions (numpy on the materialised inputs),
never from the simulator's own output.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from collective_data import inputs, parts

import sim
from sim import load_topology
from sim.collectives import (
    COLLECTIVE_ALGORITHMS,
    CollectiveError,
    CollectiveRun,
    Message,
    build_schedule,
    bus_factor,
    collective_algorithms,
    collective_bounds,
    collective_model,
    run_collective,
    run_schedule,
)
from sim.fabric import build_network
from sim.topology import Topology

BASE = load_topology()
BPE = BASE.bpe
KIB, MIB = 1024, 1024 * 1024
TOPOLOGIES = ["ring", "fully_connected", "switch", "torus2d"]
DIMS = {4: (2, 2), 6: (2, 3), 8: (2, 4), 9: (3, 3), 12: (3, 4), 16: (4, 4)}
MORE = [(c, a) for c, algos in COLLECTIVE_ALGORITHMS.items() if c != "allreduce" for a in algos]
CHIPS = [2, 3, 4, 5, 6, 7, 8, 9, 12, 16]


def _topo(kind: str, p: int) -> Topology:
    return BASE.replace_chips(count=p, topology=kind, torus_dims=DIMS.get(p, (1, p)))


def _owned(algorithm: str, p: int, count: int) -> list[list[tuple[int, int]]]:
    """Per chip, the ranges it owns: the ring's segment of each half (two rings), else its
    block of the vector."""
    if algorithm == "ring":
        halves = parts(0, count, 2)
        return [[parts(*h, p)[c] for h in halves] for c in range(p)]
    return [[r] for r in parts(0, count, p)]


def _want(collective: str, algorithm: str, p: int, count: int, root: int) -> dict[int, np.ndarray]:
    """What each chip must hold, materialised (chips whose result is undefined are left out;
    reduce_scatter: the chip's own ranges, in order)."""
    x = inputs(p, count)
    if collective == "broadcast":
        return {c: x[root] for c in range(p)}
    if collective == "reduce":
        return {root: x.sum(axis=0)}
    if collective == "sendrecv":
        return {c: x[(c - 1) % p] for c in range(p)}
    if collective == "alltoall":
        q = count // p
        return {d: np.concatenate([x[i, d * q : (d + 1) * q] for i in range(p)]) for d in range(p)}
    owned = _owned(algorithm, p, count)
    if collective == "all_gather":
        full = np.zeros(count, dtype=np.int64)
        for c, rs in enumerate(owned):
            for lo, hi in rs:
                full[lo:hi] = x[c, lo:hi]
        return {c: full for c in range(p)}
    total = x.sum(axis=0)
    return {c: np.concatenate([total[lo:hi] for lo, hi in owned[c]]) for c in range(p)}


def _held(run: CollectiveRun, collective: str, algorithm: str, chip: int) -> np.ndarray:
    values = run.values(chip)
    if collective == "reduce_scatter":
        p, count = run.chips, run.schedule.count
        return np.concatenate([values[lo:hi] for lo, hi in _owned(algorithm, p, count)[chip]])
    return values


# --- functional: every collective x algorithm x topology x chip count -----------------------


@pytest.mark.parametrize("kind", TOPOLOGIES)
@pytest.mark.parametrize(("collective", "algorithm"), MORE)
def test_every_collective_is_exact_on_every_chip_count(
    kind: str, collective: str, algorithm: str
) -> None:
    """p = 2..16 (odd, even, not powers of two), a size divisible by none of them cut into
    several chunks per message: #wrong = 0, every chip holds what the collective defines
    (materialised, against numpy), and the time is never below a lower bound."""
    for p in CHIPS:
        topo = _topo(kind, p)
        count = 3 * p + 1 + 16 * p  # not a multiple of p: uneven blocks, a rounded alltoall
        root = p - 1 if collective in ("broadcast", "reduce") else 0
        run = run_collective(
            topo, count * BPE, algorithm, collective, chunk_bytes=8 * BPE, root=root
        )
        assert run.wrong == 0, (p, run.problem)
        if collective == "alltoall":
            assert run.schedule.count == count // p * p  # nccl-tests rounds to whole blocks
        for chip, want in _want(collective, algorithm, p, count, root).items():
            got = _held(run, collective, algorithm, chip)
            np.testing.assert_array_equal(got, want, err_msg=f"p={p} chip {chip}")
        bounds = collective_bounds(topo, count * BPE, collective, root=root)
        for term in ("bandwidth", "latency", "reduce", "hbm"):
            assert run.time_ps >= getattr(bounds, term), (p, term)


@pytest.mark.parametrize(("collective", "algorithm"), MORE)
@pytest.mark.parametrize("kind", TOPOLOGIES)
def test_large_messages_stay_above_the_bounds(kind: str, collective: str, algorithm: str) -> None:
    """At bandwidth-bound sizes with the topology's own chunks (the gated bench's regime) no
    run beats a bound, and the model sits within 25 % of the simulated time."""
    for p in (6, 8):
        topo = _topo(kind, p)
        run = run_collective(topo, 2 * MIB, algorithm, collective)
        assert run.wrong == 0, run.problem
        assert run.time_ps >= collective_bounds(topo, 2 * MIB, collective).time_ps
        modelled = collective_model(topo, algorithm, 2 * MIB, collective).time_ps
        assert 0.8 < run.time_ps / modelled < 1.25, (p, run.time_ps / modelled)


def test_rooted_collectives_take_any_root() -> None:
    """Broadcast and reduce from / to every chip: the root's data everywhere, the sum on the
    root."""
    p, count = 7, 301
    x = inputs(p, count)
    for root in range(p):
        for algorithm in COLLECTIVE_ALGORITHMS["broadcast"]:
            run = sim.broadcast(
                _topo("torus2d", p), count * BPE, algorithm, root=root, chunk_bytes=64
            )
            assert run.wrong == 0 and run.schedule.root == root
            for chip in range(p):
                np.testing.assert_array_equal(run.values(chip), x[root])
            run = sim.reduce(_topo("ring", p), count * BPE, algorithm, root=root, chunk_bytes=64)
            assert run.wrong == 0
            np.testing.assert_array_equal(run.values(root), x.sum(axis=0))


def test_the_convenience_calls_run_their_collective() -> None:
    """sim.alltoall, sim.broadcast, sim.reduce, sim.sendrecv, and all_gather / reduce_scatter
    with an algorithm (ring by default)."""
    topo = _topo("switch", 5)
    calls = {
        "alltoall": sim.alltoall(topo, 4000),
        "broadcast": sim.broadcast(topo, 4000),
        "reduce": sim.reduce(topo, 4000, "direct"),
        "sendrecv": sim.sendrecv(topo, 4000),
        "all_gather": sim.all_gather(topo, 4000, "recursive_doubling"),
        "reduce_scatter": sim.reduce_scatter(topo, 4000),
    }
    for collective, run in calls.items():
        assert run.schedule.collective == collective and run.wrong == 0
    assert calls["reduce_scatter"].schedule.algorithm == "ring"
    assert calls["alltoall"].schedule.algorithm == "direct"


# --- planted bugs ------------------------------------------------------------------------------


def _planted(
    collective: str, algorithm: str, change: object, p: int = 6, count: int = 600
) -> object:
    topo = _topo("fully_connected", p)
    sched = build_schedule(topo, count * BPE, algorithm, collective, chunk_bytes=32 * BPE)
    steps = change(sched.steps)  # type: ignore[operator]
    return run_schedule(dataclasses.replace(sched, steps=steps), build_network(topo))


def _drop(step: int, index: int) -> object:
    def change(steps: tuple[tuple[Message, ...], ...]) -> tuple[tuple[Message, ...], ...]:
        kept = tuple(m for i, m in enumerate(steps[step]) if i != index)
        return (*steps[:step], kept, *steps[step + 1 :])

    return change


def _edit(step: int, index: int, **fields: int) -> object:
    def change(steps: tuple[tuple[Message, ...], ...]) -> tuple[tuple[Message, ...], ...]:
        msgs = list(steps[step])
        msgs[index] = dataclasses.replace(msgs[index], **fields)
        return (*steps[:step], tuple(msgs), *steps[step + 1 :])

    return change


@pytest.mark.parametrize(("collective", "algorithm"), MORE)
def test_a_dropped_message_is_wrong(collective: str, algorithm: str) -> None:
    """Planted bug: the first message of the last step never goes. Data that should have
    travelled is missing, so #wrong > 0 and the problem names a chip."""
    for p in (5, 6, 8):
        topo = _topo("fully_connected", p)
        sched = build_schedule(topo, 600 * BPE, algorithm, collective, chunk_bytes=32 * BPE)
        run = _planted(collective, algorithm, _drop(len(sched.steps) - 1, 0), p=p)
        assert run.wrong > 0, p  # type: ignore[attr-defined]
        assert run.problem.startswith("chip "), run.problem  # type: ignore[attr-defined]


def test_an_alltoall_block_at_the_wrong_offset_is_wrong() -> None:
    """Planted bug: one alltoall block lands two blocks too far: the block it should land in
    keeps what was there (every element wrong). Another: a chip sends the wrong block to its
    peer: it lands where it should, from the right chip, with the wrong data, and the message
    says the data came from the wrong place."""
    p, count = 6, 600
    q = count // p
    sched = build_schedule(_topo("switch", p), count * BPE, "direct", "alltoall", chunk_bytes=64)
    first = sched.steps[0][0]
    assert (first.src, first.dst, first.at) == (0, 1, 0)
    run = _planted("alltoall", "direct", _edit(0, 0, at=2 * q))  # block 0 of chip 1 stays
    assert run.wrong >= q and run.problem.startswith("chip 1, elements [0, ")  # type: ignore[attr-defined]
    moved = _planted("alltoall", "direct", _edit(0, 0, lo=2 * q, hi=3 * q))  # the wrong block sent
    assert moved.wrong == q and "wrong place" in moved.problem  # type: ignore[attr-defined]


def test_a_reduce_that_misses_a_child_names_its_inputs() -> None:
    """Planted bug: a leaf of the reduce tree never sends: the root lacks that input."""
    run = _planted("reduce", "binary_tree", _drop(0, 0))
    assert run.wrong == 600 and "lacks the inputs of chips" in run.problem  # type: ignore[attr-defined]


def test_a_sendrecv_to_the_wrong_peer_is_wrong() -> None:
    """Planted bug: chip 0 sends to chip 2 instead of chip 1: chip 1 keeps its own input
    (chip 2 gets two copies, the last one wins)."""
    run = _planted("sendrecv", "direct", _edit(0, 0, dst=2))
    assert run.wrong >= 600 and run.problem.startswith("chip 1,")  # type: ignore[attr-defined]
    assert "lacks the inputs of chips 0" in run.problem  # type: ignore[attr-defined]


def test_a_reduce_scatter_half_sent_twice_counts_an_input_twice() -> None:
    """Planted bug: a recursive-halving message goes twice: its receiver adds it twice."""

    def twice(steps: tuple[tuple[Message, ...], ...]) -> tuple[tuple[Message, ...], ...]:
        return ((*steps[0], steps[0][0]), *steps[1:])

    run = _planted("reduce_scatter", "recursive_halving", twice, p=8)
    assert run.wrong > 0 and "counts an input twice" in run.problem  # type: ignore[attr-defined]


# --- blocking pairwise steps, layout, bounds --------------------------------------------------


def test_pairwise_steps_block_and_direct_ones_do_not() -> None:
    """On a fully connected network every pair has its own link: direct sends all p-1 blocks
    at once (one block's link time, or its HBM time: every chip reads and writes ``p-1``
    blocks), pairwise one step after another (MPI's blocking sendrecv), each step at least
    all but one chunk of a block's time: ``(p-1) (k-1)/k`` blocks for ``k`` chunks a block."""
    p, nbytes = 8, 8 * MIB
    topo = _topo("fully_connected", p)
    block_ps = nbytes / p * 1000 / topo.chips.link_bw_gbs
    hbm_ps = 2 * (p - 1) * nbytes / p * 1000 / topo.hbm.hbm_to_router_bw_gbs
    k = 4  # 1 MiB blocks of 1 MiB chunks, at least staging_buffers / 2 = 4 chunks a message
    direct = run_collective(topo, nbytes, "direct", "alltoall")
    pairwise = run_collective(topo, nbytes, "pairwise", "alltoall")
    assert direct.wrong == pairwise.wrong == 0
    assert pairwise.schedule.blocking and not direct.schedule.blocking
    assert direct.time_ps < 1.1 * max(block_ps, hbm_ps) + 2 * topo.chips.link_latency_ps
    assert pairwise.time_ps >= (p - 1) * (k - 1) / k * block_ps


def test_recursive_algorithms_take_lg_p_steps_and_fold_other_chip_counts() -> None:
    """Recursive doubling / halving: lg p steps for a power of two; otherwise MPICH's fold
    adds one step before and one after (lg of the largest power of two below p between)."""
    for p, levels in ((8, 3), (16, 4), (6, 2 + 2), (12, 3 + 2), (3, 1 + 2)):
        for collective, algorithm in (
            ("all_gather", "recursive_doubling"),
            ("reduce_scatter", "recursive_halving"),
        ):
            sched = build_schedule(_topo("switch", p), 64 * p * BPE, algorithm, collective)
            assert len(sched.steps) == levels, (p, collective)


def test_alltoall_lands_every_block_where_its_sender_is() -> None:
    """Block d of chip i goes to chip d, at block i: the messages say so (Message.at), and
    every other schedule leaves ``at`` unset (lands where it was read)."""
    p, q = 5, 40
    sched = build_schedule(_topo("ring", p), p * q * BPE, "direct", "alltoall")
    got = {(m.src, m.dst): (m.lo, m.hi, m.at) for m in sched.steps[0]}
    assert got == {
        (i, d): (d * q, (d + 1) * q, i * q) for i in range(p) for d in range(p) if i != d
    }
    for collective, algorithms in COLLECTIVE_ALGORITHMS.items():
        if collective == "alltoall":
            continue
        for algorithm in algorithms:
            if algorithm in ("torus2d",):
                continue
            sched = build_schedule(_topo("ring", p), 4000, algorithm, collective)
            assert all(m.at is None for s in sched.steps for m in s), (collective, algorithm)


def test_bus_factors_are_nccl_tests() -> None:
    """nccl-tests doc/PERFORMANCE.md: 2(p-1)/p, (p-1)/p for the gathers and alltoall, 1 for
    the rooted ones and sendrecv."""
    assert bus_factor("allreduce", 8) == 2 * 7 / 8
    for c in ("all_gather", "reduce_scatter", "alltoall"):
        assert bus_factor(c, 8) == 7 / 8
    for c in ("broadcast", "reduce", "sendrecv"):
        assert bus_factor(c, 8) == 1.0
    assert bus_factor("broadcast", 1) == 0.0


def test_bounds_are_reached_where_the_semantics_say() -> None:
    """The bounds are not slack everywhere: sendrecv through a switch (one port a chip) at a
    large size takes its link time plus two hops' latency and a few bursts (the bound is the
    link time), and a broadcast's latency bound is the root's farthest chip."""
    topo = _topo("switch", 4)
    run = run_collective(topo, 64 * MIB, "direct", "sendrecv")
    bound = collective_bounds(topo, 64 * MIB, "sendrecv")
    assert bound.bandwidth == pytest.approx(64 * MIB * 1000 / topo.chips.link_bw_gbs)
    assert bound.bandwidth <= run.time_ps < 1.001 * bound.bandwidth + 2 * topo.chips.link_latency_ps
    ring = _topo("ring", 9)
    assert collective_bounds(ring, 2, "broadcast").latency == 4 * ring.chips.link_latency_ps


def test_collective_algorithms_lists_what_runs() -> None:
    assert collective_algorithms("allreduce", "ring") == (
        "ring", "direct", "halving_doubling", "double_binary_tree",
    )  # fmt: skip
    assert "torus2d" in collective_algorithms("allreduce", "torus2d")
    assert collective_algorithms("alltoall", "switch") == ("direct", "pairwise")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"collective": "gather"}, "unknown collective 'gather'"),
        ({"collective": "alltoall", "algorithm": "ring"}, "alltoall has no algorithm 'ring'"),
        ({"collective": "reduce_scatter", "algorithm": "recursive_doubling"}, "recursive_halving"),
        ({"collective": "broadcast", "root": 4}, "root = 4 is not a chip"),
        ({"collective": "broadcast", "root": True}, "root = True"),
        ({"collective": "alltoall", "algorithm": "direct", "root": 1}, "alltoall has no root"),
        ({"collective": "sendrecv", "algorithm": "direct", "nbytes": 3}, "whole number"),
    ],
)
def test_bad_requests_are_clear_errors(kwargs: dict[str, object], match: str) -> None:
    """Impossible requests raise CollectiveError naming the value and the fix."""
    args: dict[str, object] = {"nbytes": 4096, "algorithm": "ring", "collective": "broadcast"}
    args.update(kwargs)
    with pytest.raises(CollectiveError, match=match):
        run_collective(_topo("ring", 4), **args)  # type: ignore[arg-type]
