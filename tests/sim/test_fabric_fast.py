"""The fabric timing, its fast paths and the direct collective's against an independent oracle.

The oracle (``tests/fabric_oracle.py``) is written from the rules, brute force, and shares
no code with the engine. The event loop must give its op log bit for bit (every start,
end, engine, chip, byte count) on many random small programs; every fast path must give
a bit-identical op log, program or replayed result, with and without contention, on every
topology and algorithm.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from fabric_oracle import random_program, reference

import sim.collectives as ar
import sim.collectives.compile as ar_compile
import sim.collectives.verify as ar_replay
from sim import load_topology
from sim.collectives.lockstep import compile_schedule
from sim.fabric import (
    REDUCE,
    REDUCTION,
    TRANSFER,
    FabricProgram,
    Network,
    build_network,
    simulate_fabric,
)
from sim.fabric.one_shot import one_shot as _one_shot
from sim.fabric.rotation import rotation_invariant as _rotation_invariant
from sim.oplog import OpLog
from sim.topology import Topology

BASE = load_topology()
DIMS = {4: (2, 2), 6: (2, 3), 8: (2, 4), 9: (3, 3)}
TOPOLOGIES = ("ring", "fully_connected", "switch", "torus2d")
# sizes: one element, uneven chunks (not a power of two of elements), several full chunks
SIZES = (2, 65_536 + 6, 3 * 1024 * 1024 + 2)


def _topo(kind: str, p: int, **chips: int) -> Topology:
    return BASE.replace_chips(count=p, topology=kind, torus_dims=DIMS.get(p, (1, p)), **chips)


def _configs(kind: str) -> list[tuple[int, str, int, int | None]]:
    chips = (4, 6, 9) if kind == "torus2d" else (2, 3, 5, 8)
    return [
        (p, algorithm, n, chunk)
        for p in chips
        for algorithm in ar.algorithms_for(kind)
        for n in SIZES
        for chunk in ((None, 64 * 1024) if n > 2 else (None,))
    ]


def _program(topo: Topology, algorithm: str, n: int, chunk: int | None) -> FabricProgram:
    net = build_network(topo)
    schedule = ar.build_schedule(topo, n, algorithm, chunk_bytes=chunk, network=net)
    return ar.fabric_program(schedule).program


@pytest.mark.parametrize("contention", [True, False])
@pytest.mark.parametrize("kind", TOPOLOGIES)
def test_timing_is_the_reference_engines(kind: str, contention: bool) -> None:
    """Every algorithm, chip count, size and chunk size: the same log as the oracle."""
    checked = 0
    for p, algorithm, n, chunk in _configs(kind):
        topo = _topo(kind, p)
        net = build_network(topo)
        prog = _program(topo, algorithm, n, chunk)
        got = simulate_fabric(net, prog, contention=contention)
        assert got.equals(reference(net, prog, contention=contention)), (p, algorithm, n, chunk)
        checked += 1
    assert checked >= 40


@pytest.mark.parametrize("buffers", [1, 2, 3])
@pytest.mark.parametrize("kind", TOPOLOGIES)
def test_direct_with_few_staging_buffers_is_the_reference(kind: str, buffers: int) -> None:
    """Few staging buffers: transfers wait for credits, the credit pool of the contention-free
    path decides (its rounds must take the earliest credit back, whichever round returned it)."""
    p = 4 if kind == "torus2d" else 5
    topo = _topo(kind, p, staging_buffers=buffers)
    net = build_network(topo)
    for n, chunk in ((3 * 1024 * 1024 + 2, None), (200_002, 16 * 1024)):
        prog = _program(topo, "direct", n, chunk)
        assert _one_shot(net, prog) is not None  # the fast path is the one under test
        for contention in (True, False):
            got = simulate_fabric(net, prog, contention=contention)
            assert got.equals(reference(net, prog, contention=contention)), (n, contention)


def test_the_one_shot_path_takes_direct_only() -> None:
    """The contention-free fast path recognises direct's programs and nothing else; a direct
    program that no longer has its shape (one dependency more) falls back and still agrees."""
    topo = _topo("ring", 4)
    net = build_network(topo)
    for algorithm in ar.ALGORITHMS[:4]:
        prog = _program(topo, algorithm, 65_536 + 6, None)
        assert (_one_shot(net, prog) is not None) == (algorithm == "direct"), algorithm
    prog = _program(topo, "direct", 65_536 + 6, None)
    half = len(prog) // 2
    prog.deps[half + 5] = (*prog.deps[half + 5], half + 1)  # reduction 5 also waits for 1
    assert _one_shot(net, prog) is None
    got = simulate_fabric(net, prog, contention=False)
    assert got.equals(reference(net, prog, contention=False))


def test_the_rotation_path_takes_direct_on_fully_connected_and_switch_only() -> None:
    """With contention, direct on fully connected and switch networks is timed from one
    chip's share of its events (turning the chips maps the program onto itself); on rings
    and tori (a tie at half the ring goes one way from one chip, the other way from
    another) it is not. The same messages in sender order (not offset order) fall back to
    the event loop and still agree with the oracle."""
    for kind in TOPOLOGIES:
        for p in (4, 6) if kind == "torus2d" else (2, 3, 5, 8):
            topo = _topo(kind, p)
            net = build_network(topo)
            prog = _program(topo, "direct", 3 * 1024 * 1024 + 2, None)
            shape = _one_shot(net, prog)
            assert shape is not None
            want = kind in ("fully_connected", "switch")
            assert _rotation_invariant(net, prog, shape) == want, (kind, p)
    for kind in ("fully_connected", "switch"):
        topo = _topo(kind, 5)
        net = build_network(topo)
        schedule = ar.build_schedule(topo, 200_002, "direct", chunk_bytes=16 * 1024)
        by_sender = (tuple(sorted(schedule.steps[0], key=lambda m: (m.src, m.dst))),)
        prog = ar.fabric_program(dataclasses.replace(schedule, steps=by_sender)).program
        shape = _one_shot(net, prog)
        assert shape is not None and not _rotation_invariant(net, prog, shape)
        assert simulate_fabric(net, prog).equals(reference(net, prog)), kind


@pytest.mark.parametrize("kind", TOPOLOGIES)
def test_direct_program_is_the_general_builders(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The column-built program of direct equals the one the general loop builds."""
    configs = [(p, n, None) for p in (2, 4, 6) for n in (2, 6, 65_536 + 6, 3 << 20)]
    configs += [(p, n, c) for p in (2, 4) for n in (6, 1000) for c in (2, 64)]  # many chunks
    for p, n, chunk in configs:
        topo = _topo(kind, p)
        schedule = ar.build_schedule(topo, n, "direct", chunk_bytes=chunk)
        fast = ar.fabric_program(schedule)
        with monkeypatch.context() as m:
            m.setattr(ar_compile, "_one_shot_program", lambda s: None)
            slow = ar.fabric_program(schedule)
        assert dataclasses.asdict(fast) == dataclasses.asdict(slow), (p, n, chunk)
    assert ar_compile._one_shot_program(ar.build_schedule(_topo(kind, 4), 1000, "ring")) is None


@pytest.mark.parametrize("kind", TOPOLOGIES)
def test_direct_replay_is_the_ordered_replay(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Summing direct's reductions in numpy gives what replaying the log in time order gives,
    and a log with a reduction left out is caught (#wrong > 0) as it was."""
    for p, n in itertools.product((2, 4, 6), (2, 65_536 + 6, 3 << 20)):
        run = ar.allreduce(_topo(kind, p), n, "direct")
        with monkeypatch.context() as m:
            m.setattr(ar_replay, "_replay_sums", lambda *a: None)
            slow = ar.replay(run.schedule, run.network, run.compiled, run.log)
        assert run.wrong == 0
        for got, want in zip(
            (run.final.a, run.final.b, run.final.mask), (slow.a, slow.b, slow.mask), strict=True
        ):
            assert np.array_equal(got, want), (p, n)
    keep = np.ones(len(run.log), dtype=bool)
    keep[np.flatnonzero(run.log.stage == REDUCE)[3]] = False
    cols = {
        c: run.log.column(c)[keep]
        for c in ("chip", "engine", "stage", "op", "start", "end", "nbytes", "tile")
    }
    short = OpLog.from_columns(run.log.engines, run.log.stages, cols)
    final = ar.replay(run.schedule, run.network, run.compiled, short)
    assert ar.check(run.schedule, run.compiled.bounds, final)[0] > 0


#: the programs where a dependent's streaming start fell before its producer started (ADR
#: 0031): MPICH's fold (p not a power of two), torus2d's odd torus, pairwise's blocking steps
FOLDED = (
    ("reduce_scatter", "recursive_halving"),
    ("all_gather", "recursive_doubling"),
    ("alltoall", "pairwise"),
    ("allreduce", "torus2d"),
)


def _one_at_a_time(log: OpLog) -> list[str]:
    """Links whose records overlap in time (a link serves one transfer at a time)."""
    on_link = (log.stage == log.stages.index("send")) | (log.stage == log.stages.index("forward"))
    bad = []
    for eng in np.unique(log.engine[on_link]):
        m = on_link & (log.engine == eng)
        order = np.lexsort((log.end[m], log.start[m]))
        start, end = log.start[m][order], log.end[m][order]
        if (start[1:] < np.maximum.accumulate(end)[:-1]).any():
            bad.append(str(log.engines[eng]))
    return bad


@pytest.mark.parametrize("kind", TOPOLOGIES)
def test_folded_collectives_are_the_oracle_and_serve_one_at_a_time(kind: str) -> None:
    """The recursive collectives with MPICH's fold, pairwise alltoall and torus2d on 6 and 9
    chips (the ccl bench's sizes that broke the hop rule, 4 MiB and 64 KiB): the event loop
    gives the oracle's log, and no link carries two records at once. Before ADR 0031 both
    started a transfer in the loop's past, on a link that had meanwhile served another."""
    checked = 0
    for collective, algorithm in FOLDED:
        if algorithm == "torus2d" and kind != "torus2d":
            continue
        for p in (6, 9):
            topo = _topo(kind, p)
            net = build_network(topo)
            for n in (64 * 1024, 4 * 1024 * 1024):
                schedule = ar.build_schedule(topo, n, algorithm, collective, network=net)
                prog = compile_schedule(schedule).program
                got = simulate_fabric(net, prog)
                assert got.equals(reference(net, prog)), (collective, algorithm, p, n)
                assert not _one_at_a_time(got), (collective, algorithm, p, n, _one_at_a_time(got))
                checked += 1
    assert checked >= 12


def test_the_oracle_never_starts_a_dependent_before_its_producer() -> None:
    """The oracle by hand (the numbers of tests/sim/test_link.py's case): a transfer that
    needs the first half of ``second``'s span streams ahead of it by half its own 20 us, to
    11.045 us, but ``second`` starts only at 20.04 us (behind ``long``): it starts then."""
    net = build_network(_topo("fully_connected", 3))
    prog = FabricProgram()
    first = prog.add(TRANSFER, 1, 0, 2000, 0, (), hbm=0, span=(0, 1000))
    prog.add(TRANSFER, 1, 0, 1_000_000, 0, (), hbm=0)
    second = prog.add(TRANSFER, 1, 0, 4000, 0, (), hbm=0, span=(1000, 3000))
    dep = prog.add(TRANSFER, 0, 2, 1_000_000, 1, (first, second), hbm=0, span=(0, 2000))
    prog.add(TRANSFER, 0, 2, 750_000, 0, (), hbm=0)
    log = reference(net, prog)
    second_starts = net.link_ps(2000) + net.link_ps(1_000_000)  # behind first, then long
    assert second_starts == 20_040_000 and net.link_ps(750_000) < second_starts  # 0 -> 2 free
    assert int(log.start[log.op == dep][0]) == second_starts
    assert int(log.end[log.op == dep][0]) == second_starts + net.link_ps(1_000_000)


# --- the event loop against the oracle on random small programs ---------------------------------


def _random_network(rng: np.random.Generator) -> Network:
    kind = str(rng.choice(TOPOLOGIES))
    p = 4 if kind == "torus2d" else int(rng.integers(2, 6))
    net = build_network(_topo(kind, p))
    lat = int(rng.choice([0, 7, 1000, 250_000]))
    return dataclasses.replace(
        net,
        link_latencies_ps=(lat,) * len(net.links),
        staging_buffers=int(rng.integers(1, 4)),
        burst_bytes=int(rng.choice([64, 256, 4096])),
    )


@pytest.mark.parametrize("seed", range(8))
def test_event_loop_is_the_oracle_on_random_programs(seed: int) -> None:
    """Random small programs on random small networks (latency 0 included, one to three
    staging buffers): the event loop gives the oracle's log, record for record, with and
    without contention; a program that deadlocks on its staging buffers fails in both."""
    rng = np.random.default_rng(seed)
    compared = stuck = 0
    for _ in range(60):
        net = _random_network(rng)
        prog = random_program(rng, net.chips, int(rng.integers(1, 30)))
        for contention in (True, False):
            try:
                want = reference(net, prog, contention=contention)
            except RuntimeError:
                with pytest.raises(RuntimeError, match="did not finish"):
                    simulate_fabric(net, prog, contention=contention)
                stuck += 1
                continue
            got = simulate_fabric(net, prog, contention=contention)
            assert got.equals(want), (seed, contention, got.first_difference(want))
            compared += 1
    assert compared >= 100, compared


def test_the_oracle_times_a_shared_link_by_hand() -> None:
    """The oracle itself, on numbers worked out by hand: two transfers of ``b`` bytes from
    chip 0 to chip 1 of a 2-chip ring share one link; the first holds it ``b / link_bw``
    (HBM is faster), the second starts when it frees; the reduction of the first waits for
    the first burst to arrive (latency + one burst) and ends one burst after the last byte."""
    net = build_network(_topo("ring", 2))
    b = 1 << 20
    prog = FabricProgram()
    prog.add(TRANSFER, 0, 1, b, 0, ())
    prog.add(TRANSFER, 0, 1, b, 0, ())
    prog.add(REDUCTION, 1, 1, b, 0, (0,), 0)
    log = reference(net, prog)
    hold, lat = net.link_ps(b), net.latency_ps
    g = min(b, net.burst_bytes)
    grain = max(net.reduce_ps(g), net.hbm_ps(2 * g))
    assert hold >= net.hbm_ps(b)  # the link, not HBM, sets the transfer's time
    assert log.start.tolist()[:2] == [0, hold]
    assert log.end.tolist()[:2] == [hold, 2 * hold]
    first_burst = lat + max(net.link_ps(g), net.hbm_ps(g))
    assert log.start.tolist()[2] == first_burst
    whole = max(net.reduce_ps(b), net.hbm_ps(2 * b))
    assert log.end.tolist()[2] == max(first_burst + whole, hold + lat + grain)


def test_a_dependent_sees_the_span_seen_span_gives_it() -> None:
    """FabricProgram.seen_span (a quotient's stand-ins, ADR 0032): the streaming rule reads
    the span given for that (producer, dependent) pair instead of the producer's own. A
    dependent that needs the second half of its producer streams from mid-way; moved to
    another range with seen_span naming the old one, every record is the same; moved
    without it, the dependent no longer needs part of its producer and starts otherwise."""
    net = build_network(_topo("fully_connected", 3))

    def program(producer_span: tuple[int, int], seen: bool) -> FabricProgram:
        prog = FabricProgram()
        first = prog.add(TRANSFER, 1, 0, 4_000_000, 0, (), hbm=0, span=producer_span)
        dep = prog.add(TRANSFER, 0, 2, 2_000_000, 1, (first,), hbm=0, span=(1000, 2000))
        if seen:
            prog.seen_span[first, dep] = (0, 2000)
        return prog

    real = simulate_fabric(net, program((0, 2000), False))
    assert simulate_fabric(net, program((5000, 7000), True)).equals(real)
    assert not simulate_fabric(net, program((5000, 7000), False)).equals(real)


def test_a_dependent_that_needs_none_of_its_producer_waits_for_its_first_burst() -> None:
    """A dependency between disjoint spans carries no data (a blocking step's order, ADR
    0034): the dependent starts one burst after its producer's delivery begins and ends no
    earlier than it, whether its span lies below the producer's or above it. (Before ADR
    0034 a span below started with the producer, one burst early: the rule read the absolute
    offsets, so a translation that moved a block past the end of the vector changed times.)"""
    net = build_network(_topo("fully_connected", 3))

    def program(dependent_span: tuple[int, int]) -> FabricProgram:
        prog = FabricProgram()
        first = prog.add(TRANSFER, 1, 0, 4_000_000, 0, (), hbm=0, span=(1000, 2000))
        prog.add(TRANSFER, 0, 2, 2_000_000, 1, (first,), hbm=0, span=dependent_span)
        return prog

    below, above = program((0, 500)), program((3000, 3500))
    for timed in (simulate_fabric, reference):
        low, high = timed(net, below), timed(net, above)
        assert low.equals(high), timed
        producer_starts, dependent_starts = (int(x) for x in low.start[:2])
        assert dependent_starts > producer_starts + net.latency_ps  # its first burst is in
        assert int(low.end[1]) >= int(low.end[0]) + net.latency_ps  # not before it is all in


@pytest.mark.parametrize("seed", range(3))
def test_distinct_is_np_unique(seed: int) -> None:
    """sim.fabric.distinct: np.unique's sorted distinct values, by one sort."""
    from sim.fabric import distinct

    rng = np.random.default_rng(seed)
    for high in (3, 1000, 1 << 50):
        x = rng.integers(-high, high, int(rng.integers(0, 5000)), dtype=np.int64)
        assert np.array_equal(distinct(x), np.unique(x))
    assert len(distinct(np.zeros(0, dtype=np.int64))) == 0
