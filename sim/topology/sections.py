"""The sections of a topology as frozen dataclasses, with the values derived from them
(exact bandwidths as fractions, picosecond durations): what the simulator and the models read."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sim.errors import TopologyError
from sim.systolic import DATAFLOWS
from sim.topology.system import DimensionConfig
from sim.units import PS_PER_NS, ps_for_bytes

__all__ = [
    "ChipsConfig",
    "DMAConfig",
    "DTypeConfig",
    "FetchConfig",
    "HBMConfig",
    "PEConfig",
    "SRAMConfig",
]

# pe.model: systolic replaces the tile pipeline's two keys by the array's three
PE_TILE_ONLY_KEYS = ("pipeline_stages", "stage_ns")
PE_SYSTOLIC_KEYS: dict[str, tuple[str, str]] = {
    "rows": ("int", "PE rows of the systolic array"),
    "cols": ("int", "PE columns of the systolic array"),
    "dataflow": ("choice", "systolic dataflow: " + ", ".join(DATAFLOWS)),
}


def exact(value: float | int) -> Fraction:
    """The exact decimal value of a YAML number (0.1 -> 1/10, not the nearest binary float)."""
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


@dataclass(frozen=True)
class DTypeConfig:
    bytes_per_element: int


@dataclass(frozen=True)
class PEConfig:
    """The PE. ``model: tile`` (the default) is a pipeline of ``pipeline_stages`` stages of
    ``stage_ns``; ``model: systolic`` is a ``rows x cols`` array running ``dataflow``, one step
    per clock cycle (``cycle_ps``, from ``clock_ghz``), whose ``stage_ns`` (the tile-op issue
    interval) and ``pipeline_stages`` (1: tile-ops do not overlap) are derived at load by
    :mod:`sim.pe`, not written in the file (docs/adr/0012)."""

    tile_m: int
    tile_k: int
    tile_n: int
    pipeline_stages: int
    stage_ns: float
    operand_slots: int
    model: str = "tile"
    rows: int = 0
    cols: int = 0
    dataflow: str = ""
    cycle_ps: int = 0

    @property
    def stage_ps(self) -> int:
        return whole_ps(self.stage_ns)

    @property
    def tile_macs(self) -> int:
        return self.tile_m * self.tile_k * self.tile_n

    @property
    def peak_macs_per_ns(self) -> float:
        """Peak PE throughput: one tile-op of m*k*n MACs every T ns (tile); every PE of the
        array doing one MAC per cycle (systolic, as SCALE-Sim's overall utilisation counts)."""
        if self.model == "systolic":
            return self.rows * self.cols * PS_PER_NS / self.cycle_ps
        return self.tile_macs / float(self.stage_ns)

    def content(self) -> dict[str, Any]:
        """The keys the topology file gives (derived values left out): what is fingerprinted."""
        out = dataclasses.asdict(self)
        # a tile PE's content is what it was before pe.model existed (same fingerprints)
        left_out: tuple[str, ...] = ("model", *PE_SYSTOLIC_KEYS, "cycle_ps")
        if self.model == "systolic":
            left_out = (*PE_TILE_ONLY_KEYS, "cycle_ps")
        return {k: v for k, v in out.items() if k not in left_out}


@dataclass(frozen=True)
class FetchConfig:
    fetch_gbs: float

    @property
    def bw(self) -> Fraction:
        return exact(self.fetch_gbs)


@dataclass(frozen=True)
class SRAMConfig:
    capacity_kib: int

    @property
    def capacity_bytes(self) -> int:
        return self.capacity_kib * 1024


@dataclass(frozen=True)
class HBMConfig:
    num_pcs: int
    hbm_to_router_bw_gbs: float
    burst_bytes: int
    latency_ns: float

    @property
    def bw(self) -> Fraction:
        return exact(self.hbm_to_router_bw_gbs)

    @property
    def pc_bw(self) -> Fraction:
        """Per pseudo-channel bandwidth in GB/s, derived: aggregate / num_pcs."""
        return self.bw / self.num_pcs

    @property
    def pc_bw_gbs(self) -> float:
        return float(self.pc_bw)

    @property
    def burst_ps(self) -> int:
        """Time one pseudo-channel takes to serve one burst."""
        return ps_for_bytes(self.burst_bytes, self.pc_bw)

    @property
    def latency_ps(self) -> int:
        return whole_ps(self.latency_ns)


@dataclass(frozen=True)
class DMAConfig:
    engines: int
    setup_ns: float

    @property
    def setup_ps(self) -> int:
        return whole_ps(self.setup_ns)


@dataclass(frozen=True)
class ChipsConfig:
    """The chip network and the per-chip collective engine. A shorthand file gives
    ``topology``, ``torus_dims``, ``link_bw_gbs`` and ``link_latency_ns`` and leaves
    ``dimensions`` empty; a ``chips.dimensions`` file gives the list, and those four are
    derived from it (``topology``: the one dimension's shape, ``torus2d`` for two rings,
    else ``multi``; the link values: dimension 0's). A model of a system of several
    dimensions reads :func:`sim.topology.system.dimensions_of`, not the four
    (docs/topology-schema.md)."""

    count: int
    topology: str
    torus_dims: tuple[int, int]
    link_bw_gbs: float
    link_latency_ns: float
    reduce_gbs: float
    chunk_kib: int
    staging_buffers: int
    # chips.dimensions (ADR 0021): () when the file uses the one-level shorthand above;
    # read it through sim.topology.system.dimensions_of, which covers both forms
    dimensions: tuple[DimensionConfig, ...] = ()

    @property
    def link_bw(self) -> Fraction:
        return exact(self.link_bw_gbs)

    @property
    def reduce_bw(self) -> Fraction:
        return exact(self.reduce_gbs)

    @property
    def link_latency_ps(self) -> int:
        return whole_ps(self.link_latency_ns)

    @property
    def chunk_bytes(self) -> int:
        return self.chunk_kib * 1024


def whole_ps(ns: float) -> int:
    ps = exact(ns) * PS_PER_NS
    if ps.denominator != 1:
        raise TopologyError(f"{ns} ns is not a whole number of picoseconds")
    return int(ps)
