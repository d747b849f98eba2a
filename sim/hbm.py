"""HBM address mapping: how a DMA transfer's bursts spread over the pseudo-channels."""

from __future__ import annotations

from functools import lru_cache

from sim.topology import HBMConfig

__all__ = ["align_up", "channel_counts", "transfer_channels"]


def align_up(nbytes: int, quantum: int) -> int:
    return -(-nbytes // quantum) * quantum


@lru_cache(maxsize=4096)
def channel_counts(first_channel: int, nbursts: int, num_pcs: int) -> tuple[tuple[int, int], ...]:
    """``(channel, bursts)`` pairs: ``nbursts`` bursts dealt round-robin from ``first_channel``."""
    full, extra = divmod(nbursts, num_pcs)
    out = []
    for t in range(min(nbursts, num_pcs)):
        out.append(((first_channel + t) % num_pcs, full + (1 if t < extra else 0)))
    return tuple(sorted(out))


def transfer_channels(hbm: HBMConfig, addr: int, nbytes: int) -> tuple[tuple[int, int], ...]:
    """The channel load of one transfer: bursts of ``burst_bytes`` from ``addr``, round-robin."""
    if nbytes <= 0:
        raise ValueError(f"a DMA transfer must move at least one byte, got {nbytes}")
    nbursts = -(-nbytes // hbm.burst_bytes)
    return channel_counts((addr // hbm.burst_bytes) % hbm.num_pcs, nbursts, hbm.num_pcs)
