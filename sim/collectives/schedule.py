"""What a collective is: its name, its algorithm and its schedule of messages.

A **schedule** is a list of steps; a step is a list of messages ``src -> dst`` of an element
range ``[lo, hi)`` of the vector, either reduced into the destination or copied over it, at
the same offset or, when the message says ``at``, at ``[at, at + hi - lo)`` (alltoall).
When it runs, every message is cut into equal chunks (:mod:`sim.collectives.compile`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from sim.errors import InputError
from sim.topology import Topology

Algorithm = Literal["ring", "direct", "halving_doubling", "double_binary_tree", "torus2d", "nvls"]
MoreAlgorithm = Literal["recursive_doubling", "recursive_halving", "pairwise", "binary_tree"]


Collective = Literal["allreduce", "reduce_scatter", "all_gather"]
MoreCollective = Literal["alltoall", "broadcast", "reduce", "sendrecv"]  # sim.collectives.catalog


ALGORITHMS: tuple[Algorithm, ...] = (
    "ring",
    "direct",
    "halving_doubling",
    "double_binary_tree",
    "torus2d",
)
HierarchicalAlgorithm = Literal["hierarchical", "tree_ring"]  # sim.collectives.hierarchical


COLLECTIVES: tuple[Collective, ...] = ("allreduce", "reduce_scatter", "all_gather")


I64 = npt.NDArray[np.int64]


Range = tuple[int, int]


class CollectiveError(InputError):
    """A collective cannot be built as asked; the message says what to change."""


@dataclass(frozen=True)
class Message:
    """``src`` sends elements ``[lo, hi)`` to ``dst``, which reduces them in or copies them
    over; ``fresh`` sends read the sender's input buffer instead of its current values;
    ``lane`` is the parallel link (or switch port) of the pair it takes (its channel's,
    :mod:`sim.collectives.channels`; 0: the first, the only one today)."""

    src: int
    dst: int
    lo: int
    hi: int
    reduce: bool
    fresh: bool = False
    lane: int = 0
    at: int | None = None  # where [lo, hi) lands at dst (None: at lo); sim.collectives.alltoall


@dataclass(frozen=True)
class Schedule:
    """What every chip sends in every step (element ranges), and what each chip must own."""

    collective: Collective | MoreCollective
    algorithm: Algorithm | MoreAlgorithm
    chips: int
    count: int
    bytes_per_element: int
    chunk_bytes: int
    steps: tuple[tuple[Message, ...], ...]
    shares: tuple[tuple[Range, ...], ...] = ()  # per chip: its ranges (reduce_scatter, all_gather)
    depth: int = 1  # at least this many chunks per message (chips.staging_buffers)
    channels: int = 0  # directed rings of a ring schedule (0: the ring order and its reverse)
    root: int = 0  # broadcast and reduce: the root chip
    blocking: bool = False  # each chip's step waits for its last (sim.collectives.lockstep)

    @property
    def nbytes(self) -> int:
        return self.count * self.bytes_per_element

    @property
    def nodes(self) -> int:
        """Nodes the messages name: the chips, then any switch (``nvls``: a switch node)."""
        return max([self.chips - 1, *(max(m.src, m.dst) for s in self.steps for m in s)]) + 1


#: The rows of :func:`message_rows`, one column per message.
ROWS = ("step", "src", "dst", "lo", "hi", "reduce", "fresh", "lane", "moved")


def message_rows(steps: tuple[tuple[Message, ...], ...] | list[list[Message]]) -> I64:
    """The messages of ``steps`` as one ``(9, n)`` array in step order, one row per name of
    :data:`ROWS` (``moved``: whether ``Message.at`` is set)."""
    rows = [
        (s, m.src, m.dst, m.lo, m.hi, m.reduce, m.fresh, m.lane, m.at is not None)
        for s, step in enumerate(steps)
        for m in step
    ]
    out: I64 = np.ascontiguousarray(np.asarray(rows, dtype=np.int64).reshape(-1, 9).T)
    return out


def message_steps(rows: I64, nsteps: int | None = None) -> tuple[tuple[Message, ...], ...]:
    """The steps of :func:`message_rows`, as messages again (``nsteps``: how many, a step
    without a row empty; default up to the last row's). The rows do not say where a message
    lands (``Message.at``): a ``moved`` row is a ``ValueError``."""
    if rows[8].any():
        raise ValueError("message rows do not say where a message lands (Message.at)")
    n = int(rows[0].max(initial=-1)) + 1 if nsteps is None else nsteps
    rows = rows[:, np.argsort(rows[0], kind="stable")]  # by step, in order within one
    flags = rows[5:7].astype(bool)
    cols = (*rows[1:5].tolist(), *flags.tolist(), rows[7].tolist())
    msgs = list(map(Message, *cols))  # column by column: a fifth of a loop over rows' time
    cut = np.searchsorted(rows[0], np.arange(n + 1)).tolist()
    return tuple(tuple(msgs[a:b]) for a, b in itertools.pairwise(cut))


def algorithms_for(topology: str) -> tuple[Algorithm, ...]:
    """Allreduce algorithms valid on a chip topology (``torus2d`` needs a torus)."""
    return tuple(a for a in ALGORITHMS if a != "torus2d" or topology == "torus2d")


def message_chunk(topo: Topology, nbytes: object, chunk_bytes: int | None) -> int:
    """The chunk size a schedule of ``nbytes`` cuts its messages by (``chunk_bytes``, else
    ``chips.chunk_kib``), after checking that ``nbytes`` is whole elements and the chunk at
    least one: one clear error each."""
    bpe = topo.bpe
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0 or nbytes % bpe:
        raise CollectiveError(
            f"message size {nbytes!r} bytes is not a whole number of {bpe}-byte elements; "
            f"use a non-negative multiple of dtype.bytes_per_element ({bpe})"
        )
    chunk = topo.chips.chunk_bytes if chunk_bytes is None else chunk_bytes
    if chunk < bpe:
        raise CollectiveError(f"chunk size {chunk} bytes is smaller than one element ({bpe} B)")
    return chunk
