"""The single-chip engine: programs of engine operations, and two ways to time them.

Modules: :mod:`~sim.core.ops` (what a program is), :mod:`~sim.core.writer` (the op log as it
is written), :mod:`~sim.core.periodic` (:func:`simulate`), :mod:`~sim.core.reference`
(:func:`simulate_reference`).

Hardware semantics (docs/adr/0001-simulator-semantics.md):

* Every resource serves its operations **in program order**: a DMA engine, each HBM
  pseudo-channel, the fetch unit and the PE issue slot. An operation starts when its
  dependencies have ended and its resource has finished the previous operation.
* A DMA operation holds its engine for ``setup``; then its bursts arrive at their
  pseudo-channels, each channel serving its bursts back to back at ``burst_ps`` each,
  in program order; the transfer ends ``latency`` after its last burst. Concurrent
  transfers therefore contend channel by channel.
* A DMA operation has two times: its ``end`` (the data has landed) and its *release*
  (its last burst has been served: every byte has left its source). A dependency
  ``~d`` (``-d - 1``) waits for the release of DMA op ``d``; a plain ``d`` for its end.
  A buffer a DMA out reads is free again at the release, not when the HBM write lands.
* A SERVE operation (fetch) holds its resource for ``dur``.
* A PIPE operation (a PE tile-op) holds the issue slot for ``dur`` (T) and ends ``lat``
  (D*T) after it issued.

Because service is in program order, a schedule is a longest-path evaluation over the
program. :func:`simulate` evaluates it block by block in plain Python and, when the machine
state at a block boundary repeats (relative to a moving floor) and the program ahead
repeats too, fills whole periods at once with numpy. :func:`simulate_reference` is the
simple heap-driven event simulator that the fast path is tested against.
"""

from __future__ import annotations

from sim.core.ops import (
    COPY,
    DMA,
    FETCH_COPY,
    HBM,
    MAC,
    PE,
    PIPE,
    SERVE,
    SPACES,
    SRAM,
    Access,
    BlockProgram,
    Channels,
    Op,
    SimulationError,
    program_ops,
)
from sim.core.periodic import simulate
from sim.core.reference import simulate_reference

__all__ = [
    "COPY",
    "DMA",
    "FETCH_COPY",
    "HBM",
    "MAC",
    "PE",
    "PIPE",
    "SERVE",
    "SPACES",
    "SRAM",
    "Access",
    "BlockProgram",
    "Channels",
    "Op",
    "SimulationError",
    "program_ops",
    "simulate",
    "simulate_reference",
]
