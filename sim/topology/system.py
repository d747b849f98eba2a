"""The system's two new sections as data (docs/adr/0021):
``chips.dimensions`` (:class:`DimensionConfig`, innermost first) and ``collectives``
(:class:`CollectivesConfig`, what the runtime costs beside the wires).

These are the shapes every part reads; their parsing and validation live with the schema.
:func:`dimensions_of` turns today's one-level keys (``topology``, ``torus_dims``,
``link_bw_gbs``, ``link_latency_ns``) into the same list, so the rest of the simulator reads
one form.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from sim.units import PS_PER_NS

__all__ = [
    "DIMENSION_SHAPES",
    "NEUTRAL_PROTOCOLS",
    "PROTOCOLS",
    "CollectivesConfig",
    "DimensionConfig",
    "ProtocolConfig",
    "dimensions_of",
]

DIMENSION_SHAPES = ("ring", "fully_connected", "switch")
PROTOCOLS = ("simple", "ll128", "ll")


def _exact(value: float | int) -> Fraction:
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def _ps(ns: float | int) -> int:
    ps = _exact(ns) * PS_PER_NS
    if ps.denominator != 1:
        raise ValueError(f"{ns} ns is not a whole number of picoseconds")
    return int(ps)


@dataclass(frozen=True)
class DimensionConfig:
    """One dimension of the chip network (ADR 0021 decision 1).

    ``shape`` is ring, fully_connected or switch; ``size`` chips per group; ``links``
    parallel link engines per directed chip pair (ring: per neighbour, fully_connected: per
    peer); ``ports`` full-duplex ports per chip into the group's switch (switch only);
    ``link_bw_gbs`` per link (or port), per direction; ``link_latency_ns`` per hop;
    ``nic_latency_ns`` once at each end of a traversal of this dimension (scale-out NIC);
    ``switch_reduce_gbs`` > 0: the switch reduces (NVLS-style) at this rate per port.
    """

    shape: str
    size: int
    link_bw_gbs: float
    link_latency_ns: float
    links: int = 1
    ports: int = 1
    nic_latency_ns: float = 0
    switch_reduce_gbs: float = 0

    @property
    def link_bw(self) -> Fraction:
        return _exact(self.link_bw_gbs)

    @property
    def link_latency_ps(self) -> int:
        return _ps(self.link_latency_ns)

    @property
    def nic_latency_ps(self) -> int:
        return _ps(self.nic_latency_ns)

    @property
    def switch_reduce_bw(self) -> Fraction:
        return _exact(self.switch_reduce_gbs)

    @property
    def lanes(self) -> int:
        """Parallel engines a channel can own: ports on a switch, links otherwise."""
        return self.ports if self.shape == "switch" else self.links


@dataclass(frozen=True)
class ProtocolConfig:
    """A protocol's share of line rate (flag words travel in the data) and its extra cost per
    step (ADR 0021 decision 2; NCCL ``tuning.cc``: LL 0.5, LL128 0.92 of bus bandwidth)."""

    efficiency: float = 1.0
    step_ns: float = 0

    @property
    def step_ps(self) -> int:
        return _ps(self.step_ns)

    @property
    def efficiency_exact(self) -> Fraction:
        return _exact(self.efficiency)


NEUTRAL_PROTOCOLS: dict[str, ProtocolConfig] = {
    "simple": ProtocolConfig(1.0, 0),
    "ll128": ProtocolConfig(0.92, 0),
    "ll": ProtocolConfig(0.5, 0),
}


@dataclass(frozen=True)
class CollectivesConfig:
    """What a collective call costs beyond the wires (ADR 0021 decision 2). The defaults are
    neutral: no launch, no step cost, today's channels, Simple at full line rate.

    ``channels``: directed rings a ring-based collective splits over; 0 means today's
    default (the ring order and its reverse), -1 means ``auto`` (as many link-disjoint rings
    as the links allow). ``protocol``: simple, ll128, ll or auto (by the modelled time).
    """

    launch_ns: float = 0
    step_sync_ns: float = 0
    channels: int = 0
    protocol: str = "simple"
    simple: ProtocolConfig = NEUTRAL_PROTOCOLS["simple"]
    ll128: ProtocolConfig = NEUTRAL_PROTOCOLS["ll128"]
    ll: ProtocolConfig = NEUTRAL_PROTOCOLS["ll"]

    def protocols(self, name: str) -> ProtocolConfig:
        """The table entry of protocol ``name`` (simple, ll128 or ll)."""
        if name not in PROTOCOLS:
            raise ValueError(f"protocol {name!r}: use one of {', '.join(PROTOCOLS)}")
        entry: ProtocolConfig = getattr(self, name)
        return entry

    @property
    def launch_ps(self) -> int:
        return _ps(self.launch_ns)

    @property
    def step_sync_ps(self) -> int:
        return _ps(self.step_sync_ns)

    def step_ps(self, protocol: str) -> int:
        """The handshake of each chunk a chip sends under ``protocol``: it holds the sender's link
        before the bytes (ADR 0023 decision 2)."""
        return self.step_sync_ps + self.protocols(protocol).step_ps

    @property
    def neutral(self) -> bool:
        return self == CollectivesConfig()


class _OneLevel(Protocol):
    """What :func:`dimensions_of` reads of a ``ChipsConfig`` (its module imports this one)."""

    @property
    def dimensions(self) -> tuple[DimensionConfig, ...]: ...
    @property
    def topology(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def torus_dims(self) -> tuple[int, int]: ...
    @property
    def link_bw_gbs(self) -> float: ...
    @property
    def link_latency_ns(self) -> float: ...


def dimensions_of(chips: _OneLevel) -> tuple[DimensionConfig, ...]:
    """The dimensions of ``chips``: its own list when the file gives one, else the one-level
    shorthand as dimensions (ring, fully_connected, switch: one dimension of ``count``;
    torus2d: two ring dimensions ``[cols, rows]``, innermost first, so chip ``r * cols + c``
    is ``c + cols * r`` in ASTRA-sim's order)."""
    if chips.dimensions:
        return chips.dimensions
    bw, lat = chips.link_bw_gbs, chips.link_latency_ns
    if chips.topology == "torus2d":
        rows, cols = chips.torus_dims
        return (DimensionConfig("ring", cols, bw, lat), DimensionConfig("ring", rows, bw, lat))
    return (DimensionConfig(chips.topology, chips.count, bw, lat),)
