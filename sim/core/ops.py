"""What the engine runs: operation kinds, accesses, ops, HBM channels, block programs."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from sim.errors import NpuSimError

DMA, SERVE, PIPE = 0, 1, 2


class SimulationError(NpuSimError, RuntimeError):
    """The program cannot be timed: a deadlock, a runaway, or a malformed program."""


#: address spaces and access kinds of :class:`Access` (what the data checker replays)
HBM, SRAM, PE = 0, 1, 2
SPACES = ("hbm", "sram", "pe")
COPY, FETCH_COPY, MAC = 0, 1, 2


class Access(NamedTuple):
    """The data one operation moves, beside its :class:`Op` (never read by the timing loop).

    ``reads`` and ``writes`` are ``(space, address, nbytes)`` ranges. ``COPY`` copies the
    bytes of its one read range to its one write range (a DMA); ``FETCH_COPY`` concatenates
    its read ranges into its write range (SRAM -> PE operand slot); ``MAC`` multiplies the
    A and B tiles of its first read range and writes (or, when it also reads the write
    range, accumulates into) its write range. Consecutive MACs with the same ``chain``
    accumulate in the PE pipeline in issue order.
    """

    kind: int
    reads: tuple[tuple[int, int, int], ...]
    writes: tuple[tuple[int, int, int], ...]
    chain: int = -1


class Op(NamedTuple):
    """One engine operation. ``deps`` are program-order ids of earlier operations
    (``~d`` for the release of DMA op ``d``, see the module docstring)."""

    kind: int
    res: int
    deps: tuple[int, ...]
    stage: int
    nbytes: int
    macs: int
    tile: int
    dur: int  # DMA: setup ps; SERVE: service ps; PIPE: issue interval ps
    lat: int  # DMA: latency after last burst; PIPE: issue-to-retire ps
    chans: tuple[tuple[int, int], ...] = ()  # DMA only: (channel, bursts)


@dataclass(frozen=True)
class Channels:
    """The HBM pseudo-channels shared by all DMA operations."""

    count: int
    burst_ps: int


class BlockProgram(Protocol):
    """A program cut into blocks that can be generated one at a time.

    ``block_sig(b)`` must determine ``block_ops(b)`` up to a shift of op ids, tile
    indices and times: two blocks with equal signatures have the same operations with
    dependencies at the same relative distances.
    A program may also define ``block_sig_array(blocks)``: the
    signatures of an array of blocks as integer rows, equal where ``block_sig`` is equal
    (the fast path then checks how far a period repeats with numpy).
    """

    engines: tuple[str, ...]
    stages: tuple[str, ...]
    channels: Channels
    num_blocks: int

    def first_op(self, b: int) -> int: ...
    def num_ops(self) -> int: ...
    def first_tile(self, b: int) -> int: ...
    def block_ops(self, b: int) -> list[Op]: ...
    def block_sig(self, b: int) -> Hashable: ...
    def live(self, b: int) -> dict[int, tuple[int, ...]]:
        """Ops before block ``b`` that later blocks depend on, with their consumers' resources."""
        ...

    def resources(self, b: int) -> tuple[int, ...]:
        """Resources that blocks ``>= b`` use (a superset is safe, only slower).

        A program may also define ``floor_resources(b)``: a subset of them such that
        every later operation on another resource depends on a later operation on one
        of them or on a live operation it consumes (default: all of ``resources(b)``).
        It lets a rarely used engine's stale free time drop out of the state.
        And ``outer_blocks``: a period (in blocks) worth waiting for; periods shorter
        than it are not filled during the first ``outer_until`` blocks (default
        ``3 * outer_blocks``; any choice
        of which repeat to fill is exact; this one fills whole rows at once).
        And ``unique_block(b)``: True when no other block has block b's signature, so
        no period can start or end there; the fast path then skips its state
        (``live``, the canonical state, the signature) and just runs it.
        """
        ...


def program_ops(program: BlockProgram) -> list[Op]:
    """Every operation of the program, in program order (for the reference and tests)."""
    ops: list[Op] = []
    for b in range(program.num_blocks):
        if program.first_op(b) != len(ops):
            raise SimulationError(
                f"block {b} should start at op {program.first_op(b)}, but {len(ops)} precede it"
            )
        ops.extend(program.block_ops(b))
    return ops


# --- fast path ----------------------------------------------------------------------------
