"""Units: simulated time is integer picoseconds, bandwidth exact GB/s (1 GB/s = 1 byte/ns).

A leaf module (it imports nothing from ``sim``), so the topology loader, the input limits
and the engines all convert with the same two definitions.
"""

from __future__ import annotations

from fractions import Fraction

__all__ = ["PS_PER_NS", "ps_for_bytes"]

PS_PER_NS = 1000


def ps_for_bytes(nbytes: int, gbs: Fraction) -> int:
    """Picoseconds to move ``nbytes`` at ``gbs`` GB/s (1 GB/s = 1 byte/ns), rounded up."""
    num = nbytes * PS_PER_NS * gbs.denominator
    return -(-num // gbs.numerator)
