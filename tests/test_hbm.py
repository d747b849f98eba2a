"""HBM address mapping: bursts dealt round-robin over pseudo-channels."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.hbm import channel_counts, transfer_channels
from sim.topology import Topology


@given(st.integers(0, 63), st.integers(1, 500), st.integers(1, 32))
def test_bursts_are_dealt_evenly_and_all_accounted_for(first: int, nbursts: int, pcs: int) -> None:
    """Every burst lands on exactly one channel and channel loads differ by at most one."""
    first %= pcs
    counts = dict(channel_counts(first, nbursts, pcs))
    assert sum(counts.values()) == nbursts
    assert max(counts.values()) - min(counts.values()) <= 1 or len(counts) < pcs
    assert counts[first] == max(counts.values())


def test_transfer_maps_from_its_address(topo: Topology) -> None:
    """A transfer starts on the channel its address falls in and wraps around."""
    burst, pcs = topo.hbm.burst_bytes, topo.hbm.num_pcs
    chans = transfer_channels(topo.hbm, addr=(pcs - 1) * burst, nbytes=2 * burst)
    assert dict(chans) == {pcs - 1: 1, 0: 1}
    # a partial burst still occupies a whole burst slot
    assert dict(transfer_channels(topo.hbm, 0, 1)) == {0: 1}


def test_empty_transfer_is_an_error(topo: Topology) -> None:
    """A zero-byte DMA is a program bug, not a free operation."""
    with pytest.raises(ValueError, match="at least one byte"):
        transfer_channels(topo.hbm, 0, 0)
