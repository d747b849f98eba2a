"""How many SRAM buffers a GEMM program holds, and Little's law that sizes them (docs/adr/0006)."""

from __future__ import annotations

from dataclasses import dataclass

from sim.topology import Topology

__all__ = ["Buffers", "busiest_channel_ps", "littles_depth"]


@dataclass(frozen=True)
class Buffers:
    """How many SRAM buffers a program holds per operand and for C (docs/adr/0006).

    ``a`` and ``b`` count tile buffers (streaming modes), row/column panel buffers
    (``panel``) or 1 (``whole``: the operand staged entire); ``c`` counts output tiles.
    """

    a: int
    b: int
    c: int


def littles_depth(hold_ps: int, interval_ps: int) -> int:
    """Buffers needed to keep one consumer per ``interval_ps`` fed when each is held ``hold_ps``.

    Little's law: items in flight = arrival rate x time in the system, so
    ``ceil(hold / interval)`` buffers sustain the rate; one more absorbs the jitter of
    contention (a buffer is refilled only after its consumer has released it).
    """
    return -(-hold_ps // interval_ps) + 1


def busiest_channel_ps(topo: Topology, nbytes: int) -> int:
    """Time the busiest pseudo-channel needs for one transfer of ``nbytes`` (aligned start)."""
    hbm = topo.hbm
    bursts = -(-nbytes // hbm.burst_bytes)
    return -(-bursts // hbm.num_pcs) * hbm.burst_ps
