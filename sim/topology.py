"""Hardware descriptions: load, validate and fingerprint ``sim/topologies/*.yaml``.

Every hardware constant of the project lives in a topology YAML file. This module turns
one into frozen dataclasses; the simulator and the analytic models read the same objects,
so no other file holds a hardware number. Derived values (per-pseudo-channel bandwidth,
peak PE throughput, picosecond durations) are computed here, never stored in YAML.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "TOPOLOGY_DIR",
    "ChipsConfig",
    "DMAConfig",
    "DTypeConfig",
    "FetchConfig",
    "HBMConfig",
    "PEConfig",
    "SRAMConfig",
    "Topology",
    "TopologyError",
    "available_topologies",
    "load_topology",
    "ps_for_bytes",
]

TOPOLOGY_DIR = Path(__file__).parent / "topologies"
CHIP_TOPOLOGIES = ("ring", "fully_connected", "torus2d", "switch")
PS_PER_NS = 1000


class TopologyError(ValueError):
    """A topology file is missing, malformed or breaks a rule; the message says how to fix it."""


def _exact(value: float | int) -> Fraction:
    """The exact decimal value of a YAML number (0.1 -> 1/10, not the nearest binary float)."""
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def ps_for_bytes(nbytes: int, gbs: Fraction) -> int:
    """Picoseconds to move ``nbytes`` at ``gbs`` GB/s (1 GB/s = 1 byte/ns), rounded up."""
    num = nbytes * PS_PER_NS * gbs.denominator
    return -(-num // gbs.numerator)


@dataclass(frozen=True)
class DTypeConfig:
    bytes_per_element: int


@dataclass(frozen=True)
class PEConfig:
    tile_m: int
    tile_k: int
    tile_n: int
    pipeline_stages: int
    stage_ns: float
    operand_slots: int

    @property
    def stage_ps(self) -> int:
        return _whole_ps(self.stage_ns)

    @property
    def tile_macs(self) -> int:
        return self.tile_m * self.tile_k * self.tile_n

    @property
    def peak_macs_per_ns(self) -> float:
        """Peak PE throughput: one tile-op of m*k*n MACs every T ns."""
        return self.tile_macs / float(self.stage_ns)


@dataclass(frozen=True)
class FetchConfig:
    fetch_gbs: float

    @property
    def bw(self) -> Fraction:
        return _exact(self.fetch_gbs)


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
        return _exact(self.hbm_to_router_bw_gbs)

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
        return _whole_ps(self.latency_ns)


@dataclass(frozen=True)
class DMAConfig:
    engines: int
    setup_ns: float

    @property
    def setup_ps(self) -> int:
        return _whole_ps(self.setup_ns)


@dataclass(frozen=True)
class ChipsConfig:
    count: int
    topology: str
    torus_dims: tuple[int, int]
    link_bw_gbs: float
    link_latency_ns: float
    reduce_gbs: float
    chunk_kib: int
    staging_buffers: int

    @property
    def link_bw(self) -> Fraction:
        return _exact(self.link_bw_gbs)

    @property
    def reduce_bw(self) -> Fraction:
        return _exact(self.reduce_gbs)

    @property
    def link_latency_ps(self) -> int:
        return _whole_ps(self.link_latency_ns)

    @property
    def chunk_bytes(self) -> int:
        return self.chunk_kib * 1024


@dataclass(frozen=True)
class Topology:
    """One validated hardware description; ``fingerprint`` identifies its content."""

    name: str
    clock_ghz: float
    dtype: DTypeConfig
    pe: PEConfig
    fetch: FetchConfig
    sram: SRAMConfig
    hbm: HBMConfig
    dma: DMAConfig
    chips: ChipsConfig
    fingerprint: str
    source: str

    @property
    def bpe(self) -> int:
        return self.dtype.bytes_per_element

    def replace_chips(self, **changes: Any) -> Topology:
        """A revalidated copy with some ``chips`` fields changed (sweeps over chip counts)."""
        data = self.to_dict()
        data["chips"].update(changes)
        if "torus_dims" in changes:
            data["chips"]["torus_dims"] = list(changes["torus_dims"])
        return _build(data, f"{self.source} (chips overridden: {sorted(changes)})")

    def to_dict(self) -> dict[str, Any]:
        """The normalised content (what the fingerprint hashes)."""
        out: dict[str, Any] = {"name": self.name, "clock_ghz": self.clock_ghz}
        for section in _SCHEMA:
            out[section] = dataclasses.asdict(getattr(self, section))
        out["chips"]["torus_dims"] = list(self.chips.torus_dims)
        return out


def _whole_ps(ns: float) -> int:
    ps = _exact(ns) * PS_PER_NS
    if ps.denominator != 1:
        raise TopologyError(f"{ns} ns is not a whole number of picoseconds")
    return int(ps)


# --- schema -------------------------------------------------------------------------------
# section -> key -> (kind, description). kinds: "int" positive integer, "num" positive number,
# "ns" positive number of whole picoseconds, "choice", "dims".
_SCHEMA: dict[str, dict[str, tuple[str, str]]] = {
    "dtype": {"bytes_per_element": ("int", "bytes per operand element")},
    "pe": {
        "tile_m": ("int", "output rows per tile-op"),
        "tile_k": ("int", "reduction depth per tile-op"),
        "tile_n": ("int", "output columns per tile-op"),
        "pipeline_stages": ("int", "PE pipeline depth D"),
        "stage_ns": ("ns", "PE stage time T in ns"),
        "operand_slots": ("int", "PE operand buffers (tile-ops fetched ahead of retire)"),
    },
    "fetch": {"fetch_gbs": ("num", "SRAM -> PE bandwidth in GB/s")},
    "sram": {"capacity_kib": ("int", "SRAM capacity in KiB")},
    "hbm": {
        "num_pcs": ("int", "HBM pseudo-channels"),
        "hbm_to_router_bw_gbs": ("num", "aggregate HBM bandwidth in GB/s"),
        "burst_bytes": ("int", "DMA burst size in bytes"),
        "latency_ns": ("ns", "HBM access latency in ns"),
    },
    "dma": {"engines": ("int", "DMA engines"), "setup_ns": ("ns", "DMA setup time in ns")},
    "chips": {
        "count": ("int", "number of chips"),
        "topology": ("choice", "chip interconnect: " + ", ".join(CHIP_TOPOLOGIES)),
        "torus_dims": ("dims", "torus rows and columns, e.g. [2, 4]"),
        "link_bw_gbs": ("num", "link bandwidth per direction in GB/s"),
        "link_latency_ns": ("ns", "link latency per hop in ns"),
        "reduce_gbs": ("num", "per-chip reduction throughput in GB/s"),
        "chunk_kib": ("int", "collective chunk size in KiB"),
        "staging_buffers": ("int", "receive buffers (one chunk each) per link peer"),
    },
}
_TOP_LEVEL = {"name", "clock_ghz", *_SCHEMA}
# Keys added after baselines were committed, with the value the file they joined holds: the
# fingerprint leaves such a key out while it has that value, so adding a key to a topology
# file does not invalidate the committed baselines of benches that do not read it.
_ADDED_LATER: dict[tuple[str, str], object] = {("chips", "staging_buffers"): 8}
_SECTION_TYPES: dict[str, type] = {
    "dtype": DTypeConfig,
    "pe": PEConfig,
    "fetch": FetchConfig,
    "sram": SRAMConfig,
    "hbm": HBMConfig,
    "dma": DMAConfig,
    "chips": ChipsConfig,
}


def _fail(source: str, key: str, value: object, rule: str) -> TopologyError:
    return TopologyError(
        f"{source}: key '{key}' = {value!r}: {rule}. Fix the value in the topology file."
    )


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_value(source: str, key: str, kind: str, value: object) -> object:
    if kind == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            raise _fail(source, key, value, "must be an integer")
        if value <= 0:
            raise _fail(source, key, value, "must be positive (> 0)")
        return value
    if kind == "choice":
        if value not in CHIP_TOPOLOGIES:
            raise _fail(source, key, value, f"must be one of {', '.join(CHIP_TOPOLOGIES)}")
        return value
    if kind == "dims":
        ok = (
            isinstance(value, list)
            and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
        )
        if not ok:
            raise _fail(source, key, value, "must be a list of two positive integers [rows, cols]")
        assert isinstance(value, list)
        return (value[0], value[1])
    if not _is_number(value):
        raise _fail(source, key, value, "must be a number")
    assert isinstance(value, (int, float))
    if value <= 0:
        raise _fail(source, key, value, "must be positive (> 0)")
    if kind == "ns" and (_exact(value) * PS_PER_NS).denominator != 1:
        raise _fail(source, key, value, "must be a whole number of picoseconds (<= 3 decimals)")
    return value


def _require_mapping(source: str, key: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(source, key, value, "must be a mapping of keys to values")
    return value


def _check_keys(source: str, prefix: str, got: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(got) - allowed)
    if unknown:
        key = f"{prefix}{unknown[0]}"
        raise TopologyError(
            f"{source}: unknown key '{key}'. Allowed here: {', '.join(sorted(allowed))}. "
            "Remove or rename it."
        )
    missing = sorted(allowed - set(got))
    if missing:
        raise TopologyError(
            f"{source}: missing key '{prefix}{missing[0]}'. Add it to the topology file."
        )


def _build(data: Mapping[str, Any], source: str) -> Topology:
    data = _require_mapping(source, "<top level>", data)
    _check_keys(source, "", data, _TOP_LEVEL)
    name = data["name"]
    if not isinstance(name, str) or not name:
        raise _fail(source, "name", name, "must be a non-empty string")
    clock = _check_value(source, "clock_ghz", "num", data["clock_ghz"])
    sections: dict[str, Any] = {}
    for section, fields in _SCHEMA.items():
        raw = _require_mapping(source, section, data[section])
        _check_keys(source, f"{section}.", raw, set(fields))
        values = {
            key: _check_value(source, f"{section}.{key}", kind, raw[key])
            for key, (kind, _desc) in fields.items()
        }
        sections[section] = _SECTION_TYPES[section](**values)
    chips: ChipsConfig = sections["chips"]
    rows, cols = chips.torus_dims
    if chips.topology == "torus2d" and rows * cols != chips.count:
        raise _fail(
            source,
            "chips.torus_dims",
            [rows, cols],
            f"rows x cols must equal chips.count ({chips.count}) when chips.topology is torus2d",
        )
    normal = {"name": name, "clock_ghz": clock, **{k: _normal(v) for k, v in sections.items()}}
    hashed = {
        k: {x: y for x, y in v.items() if _ADDED_LATER.get((k, x), object()) != y}
        if isinstance(v, dict)
        else v
        for k, v in normal.items()
    }
    digest = hashlib.sha256(json.dumps(hashed, sort_keys=True).encode()).hexdigest()[:12]
    return Topology(
        name=name,
        clock_ghz=float(clock),  # type: ignore[arg-type]
        fingerprint=f"{name}:{digest}",
        source=source,
        **sections,
    )


def _normal(section: object) -> dict[str, Any]:
    out = dataclasses.asdict(section)  # type: ignore[call-overload]
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in out.items()}


def available_topologies() -> list[str]:
    """Names of the topologies shipped in ``sim/topologies``."""
    return sorted(p.stem for p in TOPOLOGY_DIR.glob("*.yaml"))


def load_topology(name_or_path: str | Path = "npu-1h") -> Topology:
    """Load and validate a topology by shipped name (``"npu-1h"``) or by YAML file path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = TOPOLOGY_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise TopologyError(
            f"{path}: no such topology file. Known topologies: "
            f"{', '.join(available_topologies())}; or pass a path to a .yaml file."
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise TopologyError(f"{path}: not valid YAML ({exc}). Fix the syntax.") from None
    return _build(data, str(path))
