"""The simulator kernel: in-order semantics, contention, the reference oracle, failures."""

from __future__ import annotations

import random
from collections.abc import Hashable

import pytest

from sim.core import (
    DMA,
    PIPE,
    SERVE,
    Channels,
    Op,
    SimulationError,
    simulate,
    simulate_reference,
)
from sim.oplog import OpLog

ENGINES = ("dma0", "dma1", "fetch", "pe")
STAGES = ("dma_in", "fetch", "gemm")
BURST = 100
SETUP, LAT = 7, 50
CH = Channels(count=4, burst_ps=BURST)


class ListProgram:
    """A hand-written program: a list of blocks of ops (ids = position in program order)."""

    engines, stages, channels = ENGINES, STAGES, CH

    def __init__(self, blocks: list[list[Op]]) -> None:
        self.blocks = blocks
        self.num_blocks = len(blocks)
        self.starts = [sum(len(b) for b in blocks[:i]) for i in range(len(blocks) + 1)]

    def first_op(self, b: int) -> int:
        return self.starts[b]

    def num_ops(self) -> int:
        return self.starts[-1]

    def first_tile(self, b: int) -> int:
        return 0

    def block_ops(self, b: int) -> list[Op]:
        return self.blocks[b]

    def block_sig(self, b: int) -> Hashable:
        return b  # every block unique: no extrapolation

    def live(self, b: int) -> dict[int, tuple[int, ...]]:
        first = self.starts[b]
        return {
            d: tuple(range(len(ENGINES)))
            for blk in self.blocks[b:]
            for op in blk
            for d in op.deps
            if d < first
        }

    def resources(self, b: int) -> tuple[int, ...]:
        return tuple(range(len(ENGINES)))

    def ops(self) -> list[Op]:
        return [op for blk in self.blocks for op in blk]


def dma(eng: int, deps: tuple[int, ...], chans: tuple[tuple[int, int], ...]) -> Op:
    return Op(DMA, eng, deps, 0, 1, 0, -1, SETUP, LAT, chans)


def serve(deps: tuple[int, ...], dur: int) -> Op:
    return Op(SERVE, 2, deps, 1, 1, 0, -1, dur, 0)


def pipe(deps: tuple[int, ...], interval: int, latency: int) -> Op:
    return Op(PIPE, 3, deps, 2, 0, 1, 0, interval, latency)


def both(blocks: list[list[Op]]) -> OpLog:
    """Time with the fast path and the reference; they must agree record for record."""
    prog = ListProgram(blocks)
    fast = simulate(prog)
    ref = simulate_reference(prog.ops(), ENGINES, STAGES, CH)
    assert fast.equals(ref), fast.first_difference(ref)
    return fast


def test_concurrent_transfers_contend_channel_by_channel() -> None:
    """Two transfers on different engines sharing channel 0 serialise there, not elsewhere."""
    log = both([[dma(0, (), ((0, 2), (1, 2))), dma(1, (), ((0, 1), (2, 1)))]])
    t0 = SETUP
    first_end = t0 + 2 * BURST + LAT  # channels 0 and 1 serve two bursts each
    second_end = t0 + 3 * BURST + LAT  # its burst on channel 0 queues behind two
    assert [r.end_ps for r in log.records()] == [first_end, second_end]


def test_disjoint_channels_do_not_contend() -> None:
    """Transfers on different channels finish as if alone (contention is not averaged)."""
    log = both([[dma(0, (), ((0, 2),)), dma(1, (), ((1, 2),))]])
    assert {r.end_ps for r in log.records()} == {SETUP + 2 * BURST + LAT}


def test_engines_serve_in_program_order_even_when_a_later_op_is_ready() -> None:
    """An op waits behind the previous op of its engine in program order."""
    slow = serve((), 1000)
    waits = dma(0, (0,), ((0, 1),))  # ready at 1000
    ready = dma(0, (), ((1, 1),))  # ready at 0, but after `waits` in program order
    log = both([[slow, waits, ready]])
    recs = list(log.records())
    assert recs[2].start_ps == recs[1].start_ps + SETUP


def test_pipe_issues_every_interval_and_retires_later() -> None:
    """A pipelined engine accepts one op per interval; each ends `latency` after issue."""
    log = both([[pipe((), 16, 48), pipe((), 16, 48), pipe((), 16, 48)]])
    assert [(r.start_ps, r.end_ps) for r in log.records()] == [(0, 48), (16, 64), (32, 80)]


def test_dependencies_cross_blocks() -> None:
    """An op in a later block waits for its dependency in an earlier one."""
    log = both([[serve((), 30)], [serve((), 5)], [pipe((0,), 16, 48)]])
    assert log.record(2).start_ps == 30


def test_dependency_on_a_later_op_is_reported_as_deadlock() -> None:
    """A cycle through program order never completes; both simulators say which op waits."""
    ops = [serve((1,), 5), serve((0,), 5)]
    with pytest.raises(SimulationError, match=r"deadlock: .*op 0"):
        simulate_reference(ops, ENGINES, STAGES, CH)
    with pytest.raises(SimulationError, match="depends on op 1, which has not been timed"):
        simulate(ListProgram([ops]))


def test_runaway_is_stopped() -> None:
    """An event budget stops a simulation that would not end, naming what is pending."""
    ops = [serve((), 5) for _ in range(20)]
    with pytest.raises(SimulationError, match=r"runaway simulation: .*pending"):
        simulate_reference(ops, ENGINES, STAGES, CH, max_events=10)


def test_program_declaring_the_wrong_op_count_is_refused() -> None:
    """A program that emits more ops than it declares is a generator bug, caught loudly."""

    class Liar(ListProgram):
        def num_ops(self) -> int:
            return 1

    with pytest.raises(SimulationError, match="more operations than it declared"):
        simulate(Liar([[serve((), 1), serve((), 1)]]))


def test_same_program_same_log() -> None:
    """The simulator is deterministic: two runs give identical logs."""
    blocks = [[dma(0, (), ((0, 3), (1, 2))), dma(1, (), ((1, 1),)), serve((0, 1), 9)]]
    assert simulate(ListProgram(blocks)).equals(simulate(ListProgram(blocks)))


def _random_program(rng: random.Random) -> ListProgram:
    """1-4 blocks of 1-8 random ops: transfers with the same bursts on every channel (the
    fast path's one max-plus map), uneven ones (channel by channel), serves and pipes."""
    blocks: list[list[Op]] = []
    n = 0
    for _ in range(rng.randint(1, 4)):
        blk: list[Op] = []
        for _ in range(rng.randint(1, 8)):
            deps = tuple(sorted(rng.sample(range(n), min(n, rng.randint(0, 2)))))
            kind = rng.random()
            if kind < 0.7:
                if kind < 0.4:  # even: every channel, the same count
                    cnt = rng.randint(1, 3)
                    chans = tuple((c, cnt) for c in range(CH.count))
                else:  # uneven: some channels, or different counts
                    picked = rng.sample(range(CH.count), rng.randint(1, CH.count))
                    chans = tuple((c, rng.randint(1, 3)) for c in picked)
                blk.append(dma(rng.randint(0, 1), deps, chans))
            elif kind < 0.85:
                blk.append(serve(deps, rng.randint(1, 300)))
            else:
                blk.append(pipe(deps, rng.randint(1, 50), rng.randint(50, 200)))
            n += 1
        blocks.append(blk)
    return ListProgram(blocks)


def test_even_and_uneven_transfers_mixed_at_random_match_the_reference() -> None:
    """The fast path's lazy channel times (an even transfer applied as one max-plus map of
    all channel times, kept across a block; an uneven one channel by channel) time random
    mixes of both, across block boundaries, exactly as the reference does."""
    rng = random.Random(5)
    for _ in range(150):
        prog = _random_program(rng)
        fast = simulate(prog)
        ref = simulate_reference(prog.ops(), ENGINES, STAGES, CH)
        assert fast.equals(ref), fast.first_difference(ref)
