"""HBM address mapping: bursts dealt round-robin over pseudo-channels."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim import load_topology
from sim.hbm import channel_counts, transfer_channels
from sim.topology import Topology
from sim.units import ps_for_bytes


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


@given(st.integers(0, 40), st.integers(1, 40))
def test_whole_stripes_make_the_channels_one_server(stripe_at: int, stripes: int) -> None:
    """The collectives' HBM is one server of hbm_bw (ADR 0010): exact for an op of whole
    stripes (num_pcs bursts) from a stripe-aligned address, which loads every pseudo-channel
    alike, so each channel is busy exactly bytes / hbm_bw."""
    hbm = load_topology().hbm
    stripe = hbm.num_pcs * hbm.burst_bytes
    nbytes = stripes * stripe
    loads = dict(transfer_channels(hbm, stripe_at * stripe, nbytes))
    assert set(loads) == set(range(hbm.num_pcs))
    assert {n * hbm.burst_ps for n in loads.values()} == {ps_for_bytes(nbytes, hbm.bw)}


def test_where_one_server_is_not_the_channels(topo: Topology) -> None:
    """Not exact below a stripe or off its alignment: a 2-byte op holds one channel for a
    whole burst (16 ns, not 8 ps), and a stripe one burst off its alignment is still one
    burst per channel, but a stripe plus one byte loads one channel with a second burst."""
    hbm = topo.hbm
    stripe = hbm.num_pcs * hbm.burst_bytes
    assert dict(transfer_channels(hbm, 0, 2)) == {0: 1}
    assert hbm.burst_ps > 1000 * ps_for_bytes(2, hbm.bw)
    assert set(dict(transfer_channels(hbm, hbm.burst_bytes, stripe)).values()) == {1}
    assert max(dict(transfer_channels(hbm, 0, stripe + 1)).values()) == 2
