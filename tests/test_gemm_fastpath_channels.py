"""The fast path's lazy channel times (sim.core._run_block) against the event-driven reference.

A transfer with the same bursts on every channel (a whole GEMM tile: most DMAs) is applied
as one max-plus map of all channel times, kept lazily across a block; an uneven one
channel by channel. Random mixes of both, across block boundaries, must time exactly as
the reference does.
"""

from __future__ import annotations

import random
from collections.abc import Hashable

from sim.core import DMA, PIPE, SERVE, Channels, Op, simulate, simulate_reference

ENGINES = ("dma0", "dma1", "fetch", "pe")
STAGES = ("dma_in", "fetch", "gemm")
CH = Channels(count=4, burst_ps=100)


class Blocks:
    """Random blocks of ops; every block unique (no extrapolation), every earlier op live."""

    engines, stages, channels = ENGINES, STAGES, CH

    def __init__(self, blocks: list[list[Op]]) -> None:
        self.blocks, self.num_blocks = blocks, len(blocks)
        self.starts = [sum(len(b) for b in blocks[:i]) for i in range(len(blocks) + 1)]
        self.ops = [op for blk in blocks for op in blk]

    def first_op(self, b: int) -> int:
        return self.starts[b]

    def num_ops(self) -> int:
        return self.starts[-1]

    def first_tile(self, b: int) -> int:
        return 0

    def block_ops(self, b: int) -> list[Op]:
        return self.blocks[b]

    def block_sig(self, b: int) -> Hashable:
        return b

    def live(self, b: int) -> dict[int, tuple[int, ...]]:
        return {d: (0, 1, 2, 3) for d in range(self.starts[b])}

    def resources(self, b: int) -> tuple[int, ...]:
        return (0, 1, 2, 3)


def _random_program(rng: random.Random) -> Blocks:
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
                blk.append(Op(DMA, rng.randint(0, 1), deps, 0, 1, 0, -1, 7, 50, chans))
            elif kind < 0.85:
                blk.append(Op(SERVE, 2, deps, 1, 1, 0, -1, rng.randint(1, 300), 0))
            else:
                blk.append(Op(PIPE, 3, deps, 2, 0, 1, 0, rng.randint(1, 50), rng.randint(50, 200)))
            n += 1
        blocks.append(blk)
    return Blocks(blocks)


def test_even_and_uneven_transfers_mixed_at_random_match_the_reference() -> None:
    rng = random.Random(5)
    for _ in range(150):
        prog = _random_program(rng)
        fast = simulate(prog)
        ref = simulate_reference(prog.ops, ENGINES, STAGES, CH)
        assert fast.equals(ref), fast.first_difference(ref)
