"""The topology schema: every key with its kind and meaning, the checks a value must pass
(finite, positive, whole picoseconds, inside what the simulator represents), and
:class:`Topology`, built only through validation (:func:`build`), fingerprinted by content."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sim.errors import InputError, TopologyError, short_number, short_repr
from sim.limits import MAX_CODE, MAX_OP_PS
from sim.pe import PE_MODELS, systolic_tile_cycles
from sim.systolic import DATAFLOWS
from sim.topology.checks import check_keys, fail, integer, real, require_mapping
from sim.topology.collectives_schema import (
    build_collectives,
    collectives_content,
    efficiency_duration_cases,
    with_changes,
)
from sim.topology.dimensions_schema import (
    MULTI,
    SHORTHAND_KEYS,
    build_dimensions,
    check_count,
    chips_content,
    derived_chips,
    dimension_duration_cases,
    network_links,
    refuse_both_forms,
    with_dimensions,
)
from sim.topology.energy_schema import (
    EnergyConfig,
    build_energy,
    check_energy_against,
    energy_content,
)
from sim.topology.sections import (
    PE_SYSTOLIC_KEYS,
    PE_TILE_ONLY_KEYS,
    ChipsConfig,
    DMAConfig,
    DTypeConfig,
    FetchConfig,
    HBMConfig,
    PEConfig,
    SRAMConfig,
    exact,
)
from sim.topology.system import CollectivesConfig, DimensionConfig, dimensions_of
from sim.units import PS_PER_NS, ps_for_bytes

__all__ = ["CHIP_TOPOLOGIES", "CHIP_TOPOLOGY_VALUES", "Topology", "as_topology", "build"]

CHIP_TOPOLOGIES = ("ring", "fully_connected", "torus2d", "switch")  # what a file may choose
# what ChipsConfig.topology may read: a dimensions file of several non-torus dimensions is multi
CHIP_TOPOLOGY_VALUES = (*CHIP_TOPOLOGIES, MULTI)


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
    collectives: CollectivesConfig = dataclasses.field(default_factory=CollectivesConfig)
    energy: EnergyConfig | None = None  # no ``energy:`` section: energy metrics are absent

    @property
    def bpe(self) -> int:
        return self.dtype.bytes_per_element

    def replace_chips(self, **changes: Any) -> Topology:
        """A revalidated copy with some ``chips`` fields changed (sweeps over chip counts).
        Changing a shorthand key (topology, torus_dims, link_bw_gbs, link_latency_ns) of a
        dimensions file returns it to the shorthand, from its derived one-level values."""
        data = self.to_dict()
        if self.chips.dimensions and set(changes) & set(SHORTHAND_KEYS):
            del data["chips"]["dimensions"]
            data["chips"].update({k: getattr(self.chips, k) for k in SHORTHAND_KEYS})
            data["chips"]["torus_dims"] = list(self.chips.torus_dims)
        data["chips"].update(changes)
        dims = changes.get("torus_dims")
        if isinstance(dims, tuple):
            data["chips"]["torus_dims"] = list(dims)
        return build(data, f"{self.source} (chips overridden: {sorted(changes)})")

    def replace_dimensions(
        self, dimensions: list[Mapping[str, Any]] | tuple[DimensionConfig, ...]
    ) -> Topology:
        """A revalidated copy whose chips are ``dimensions`` (mappings as the file writes
        them, or :class:`DimensionConfig`), the shorthand keys dropped; ``chips.count``
        follows the sizes (their product)."""
        data = self.to_dict()
        data["chips"] = with_dimensions(data["chips"], dimensions)
        return build(data, f"{self.source} (chips.dimensions overridden)")

    def replace_collectives(self, **changes: Any) -> Topology:
        """A revalidated copy with some ``collectives`` keys changed (``protocol="ll"``,
        ``channels=7`` or ``"auto"``); ``protocols`` merges per protocol and key; a value of
        None returns the key to its neutral default."""
        data = self.to_dict()
        data["collectives"] = with_changes(data.get("collectives", {}), changes)
        return build(data, f"{self.source} (collectives overridden: {sorted(changes)})")

    def with_systolic_pe(self, rows: int, cols: int, dataflow: str) -> Topology:
        """A revalidated copy whose PE is a ``rows x cols`` systolic array (same tiles)."""
        data = self.to_dict()
        pe = data["pe"]
        for key in PE_TILE_ONLY_KEYS:
            pe.pop(key, None)
        pe.update(model="systolic", rows=rows, cols=cols, dataflow=dataflow)
        return build(data, f"{self.source} (pe: systolic {rows}x{cols} {dataflow})")

    def to_dict(self) -> dict[str, Any]:
        """The normalised content (what the fingerprint hashes)."""
        sections = {section: getattr(self, section) for section in _SCHEMA}
        return _content(self.name, self.clock_ghz, sections, self.collectives, self.energy)


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
_CHOICES = {"chips.topology": CHIP_TOPOLOGIES, "pe.model": PE_MODELS, "pe.dataflow": DATAFLOWS}
_TOP_LEVEL = {"name", "clock_ghz", *_SCHEMA, "collectives", "energy"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_SECTION_TYPES: dict[str, type] = {
    "dtype": DTypeConfig,
    "pe": PEConfig,
    "fetch": FetchConfig,
    "sram": SRAMConfig,
    "hbm": HBMConfig,
    "dma": DMAConfig,
    "chips": ChipsConfig,
}


def _check_value(source: str, key: str, kind: str, value: object) -> object:
    if kind == "int":
        return integer(source, key, value)
    if kind == "choice":
        choices = _CHOICES[key]
        if not isinstance(value, str) or value not in choices:
            raise fail(source, key, value, f"must be one of {', '.join(choices)}")
        return value
    if kind == "dims":
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise fail(source, key, value, "must be a list of two positive integers [rows, cols]")
        rows, cols = (integer(source, key, v) for v in value)
        return (rows, cols)
    return real(source, key, kind, value)


def _links(chips: ChipsConfig) -> int:
    """How many links (one per direction) the chip network has, at most: its dimensions'
    (parallel links and ports count; the shorthand's are ring 2p, fully_connected p(p - 1),
    torus2d 4p, switch 2p)."""
    return network_links(dimensions_of(chips))


def _check_durations(
    source: str, sections: Mapping[str, Any], collectives: CollectivesConfig
) -> None:
    """Every operation one topology value defines must last at most MAX_OP_PS (int64 ps)."""
    pe: PEConfig = sections["pe"]
    hbm: HBMConfig = sections["hbm"]
    chips: ChipsConfig = sections["chips"]
    fetch, dtype = sections["fetch"], sections["dtype"]
    tile_pair = (pe.tile_m + pe.tile_n) * pe.tile_k * dtype.bytes_per_element
    chunk = f"one {chips.chunk_kib} KiB chunk"
    pe_case = (
        "pe.pipeline_stages",
        pe.pipeline_stages,
        pe.stage_ps * pe.pipeline_stages,
        "a tile-op's issue-to-retire time (pipeline_stages x stage_ns)",
    )
    if pe.model == "systolic":
        pe_case = (
            "pe.rows",
            pe.rows,
            pe.stage_ps,
            f"one tile-op's folds on the {pe.rows} x {pe.cols} {pe.dataflow} array",
        )
    link_cases = [
        (
            "chips.link_bw_gbs",
            chips.link_bw_gbs,
            ps_for_bytes(chips.chunk_bytes, chips.link_bw),
            f"sending {chunk}",
            " GB/s",
        )
    ]
    if chips.dimensions:
        link_cases = dimension_duration_cases(chips.dimensions, chips.chunk_bytes, chunk)
    slowest = min(d.link_bw for d in dimensions_of(chips))
    cases = [
        (*pe_case, ""),
        (
            "hbm.hbm_to_router_bw_gbs",
            hbm.hbm_to_router_bw_gbs,
            hbm.burst_ps,
            f"one {hbm.burst_bytes}-byte burst on one of {hbm.num_pcs} pseudo-channels",
            " GB/s",
        ),
        (
            "fetch.fetch_gbs",
            fetch.fetch_gbs,
            ps_for_bytes(tile_pair, fetch.bw),
            f"fetching one tile pair ({tile_pair} B)",
            " GB/s",
        ),
        *link_cases,
        (
            "chips.reduce_gbs",
            chips.reduce_gbs,
            ps_for_bytes(chips.chunk_bytes, chips.reduce_bw),
            f"reducing {chunk}",
            " GB/s",
        ),
        *efficiency_duration_cases(collectives, slowest, chips.chunk_bytes, chunk),
    ]
    for key, value, ps, what, unit in cases:
        if ps > MAX_OP_PS:
            rate = "; use fewer stages or a shorter pe.stage_ns"
            if key == "pe.rows":
                rate = "; use a larger array or smaller tiles"
            elif key != "pe.pipeline_stages":
                least = float(exact(value) * ps / MAX_OP_PS)
                rate = f"; use at least {least:.3g}{unit} (or less data per operation)"
            raise fail(
                source,
                key,
                value,
                f"{what} would take {short_number(ps)} ps, more than one operation may last "
                f"(2**40 ps, sim.limits.MAX_OP_PS, keeps runs within int64 picoseconds){rate}",
            )
    links = _links(chips)
    if links + 1 > MAX_CODE and chips.dimensions:
        shapes = " x ".join(f"{d.shape} {d.size}" for d in chips.dimensions)
        raise fail(
            source,
            "chips.dimensions",
            f"<{shapes}>",
            f"the network of {chips.count} chips has {links} links (parallel links and ports "
            f"count); links are int16 engine codes, so at most {MAX_CODE - 1} (fewer chips, "
            "fewer links or ports, or other shapes)",
        )
    if links + 1 > MAX_CODE:
        raise fail(
            source,
            "chips.count",
            chips.count,
            f"a {chips.topology} of {chips.count} chips has {links} links; links are int16 "
            f"engine codes, so at most {MAX_CODE - 1} (fewer chips, or another topology)",
        )


def _check_clock(source: str, clock: int | float, pe: PEConfig) -> None:
    cycles = exact(pe.stage_ns) * exact(clock)
    if cycles.denominator != 1:
        raise fail(
            source,
            "clock_ghz",
            clock,
            f"pe.stage_ns ({pe.stage_ns} ns) must be a whole number of clock cycles at "
            f"{clock} GHz (it is {float(cycles):.6g}); the PE issues on clock edges",
        )


def _build_pe(source: str, raw: Mapping[str, Any], clock: int | float) -> PEConfig:
    """The ``pe`` section: the tile pipeline's keys, or ``model: systolic`` and its array's."""
    model = str(_check_value(source, "pe.model", "choice", raw.get("model", "tile")))
    fields = dict(_SCHEMA["pe"])
    if model == "tile":
        misplaced = [k for k in PE_SYSTOLIC_KEYS if k in raw]
        if misplaced:
            stated = "is tile" if "model" in raw else "is not given, so it is tile"
            raise TopologyError(
                f"{source}: key 'pe.{misplaced[0]}' is only read when pe.model is systolic, "
                f"and pe.model {stated}. Add 'model: systolic' to the pe section, or remove "
                f"pe.{misplaced[0]}."
            )
    else:
        misplaced = [k for k in PE_TILE_ONLY_KEYS if k in raw]
        if misplaced:
            raise TopologyError(
                f"{source}: key 'pe.{misplaced[0]}' is not used when pe.model is systolic: a "
                "tile-op's timing comes from pe.rows, pe.cols, pe.dataflow and clock_ghz "
                f"(sim/pe.py, docs/adr/0012). Remove pe.{misplaced[0]}, or set pe.model: tile."
            )
        fields = {k: v for k, v in fields.items() if k not in PE_TILE_ONLY_KEYS} | PE_SYSTOLIC_KEYS
    check_keys(source, "pe.", raw, {*fields, "model"}, frozenset({"model"}))
    values: dict[str, Any] = {
        key: _check_value(source, f"pe.{key}", kind, raw[key])
        for key, (kind, _desc) in fields.items()
    }
    if model == "tile":
        return PEConfig(**values)
    cycle = PS_PER_NS / exact(clock)
    if cycle.denominator != 1:
        raise fail(
            source,
            "clock_ghz",
            clock,
            f"with pe.model systolic the array steps once per clock cycle, so a cycle "
            f"(1000 / clock_ghz = {float(cycle):.6g} ps) must be a whole number of picoseconds; "
            "use e.g. 0.5, 1, 1.25 or 2 GHz",
        )
    cycles = systolic_tile_cycles(
        values["tile_m"],
        values["tile_k"],
        values["tile_n"],
        values["rows"],
        values["cols"],
        values["dataflow"],
    )
    issue = Fraction(cycles * int(cycle), PS_PER_NS)
    stage_ns = int(issue) if issue.denominator == 1 else float(issue)
    return PEConfig(
        **values, model=model, pipeline_stages=1, stage_ns=stage_ns, cycle_ps=int(cycle)
    )


def build(data: object, source: str) -> Topology:
    """Validate a topology's parsed content (``source`` names it in messages) and build it;
    the only way a :class:`Topology` is made."""
    data = require_mapping(source, "<top level>", data)
    check_keys(source, "", data, _TOP_LEVEL, frozenset({"collectives", "energy"}))
    name = data["name"]
    if not isinstance(name, str) or not _NAME.match(name):
        raise fail(
            source, "name", name, "must be 1-64 letters, digits, '.', '_' or '-' (e.g. npu-1h)"
        )
    clock = real(source, "clock_ghz", "num", data["clock_ghz"])
    sections: dict[str, Any] = {}
    for section, fields in _SCHEMA.items():
        raw = require_mapping(source, section, data[section])
        if section == "pe":
            sections["pe"] = _build_pe(source, raw, clock)
            continue
        if section == "chips" and "dimensions" in raw:
            sections["chips"] = _build_dimensions_chips(source, raw)
            continue
        # chips: the one-level shorthand here; the unknown-key message names the other form
        other = {"dimensions"} if section == "chips" else set()
        check_keys(source, f"{section}.", raw, set(fields) | other, frozenset(other))
        values = {
            key: _check_value(source, f"{section}.{key}", kind, raw[key])
            for key, (kind, _desc) in fields.items()
        }
        sections[section] = _SECTION_TYPES[section](**values)
    chips: ChipsConfig = sections["chips"]
    rows, cols = chips.torus_dims
    if chips.topology == "torus2d" and rows * cols != chips.count:
        raise fail(
            source,
            "chips.torus_dims",
            [rows, cols],
            f"rows x cols must equal chips.count ({chips.count}) when chips.topology is torus2d",
        )
    collectives = CollectivesConfig()
    if "collectives" in data:
        collectives = build_collectives(source, data["collectives"])
    energy = None
    if "energy" in data:
        energy = build_energy(source, data["energy"], sections["dtype"].bytes_per_element)
        check_energy_against(source, energy, len(dimensions_of(chips)))
    _check_durations(source, sections, collectives)
    _check_clock(source, clock, sections["pe"])
    normal = _content(name, clock, sections, collectives, energy)
    digest = hashlib.sha256(json.dumps(normal, sort_keys=True).encode()).hexdigest()[:12]
    return Topology(
        name=name,
        clock_ghz=float(clock),
        fingerprint=f"{name}:{digest}",
        source=source,
        collectives=collectives,
        energy=energy,
        **sections,
    )


def _build_dimensions_chips(source: str, raw: Mapping[str, Any]) -> ChipsConfig:
    """``chips`` in the general form: ``dimensions`` and the keys the shorthand shares."""
    refuse_both_forms(source, raw)
    fields = {k: v for k, v in _SCHEMA["chips"].items() if k not in SHORTHAND_KEYS}
    check_keys(source, "chips.", raw, {*fields, "dimensions"})
    values: dict[str, Any] = {
        key: _check_value(source, f"chips.{key}", kind, raw[key])
        for key, (kind, _desc) in fields.items()
    }
    dims = build_dimensions(source, raw["dimensions"])
    check_count(source, values["count"], dims)
    return ChipsConfig(**values, **derived_chips(dims), dimensions=dims)


def _content(
    name: str,
    clock: float,
    sections: Mapping[str, Any],
    collectives: CollectivesConfig,
    energy: EnergyConfig | None = None,
) -> dict[str, Any]:
    """The canonical content the fingerprint hashes (and ``to_dict`` gives): every section's
    plain values; ``collectives`` only with the keys that differ from neutral; ``energy`` as
    written, when the file has it (a change of energy constants is a change of the machine,
    docs/adr/0027; a file without it keeps its fingerprint)."""
    out: dict[str, Any] = {"name": name, "clock_ghz": clock}
    out.update({k: _normal(v) for k, v in sections.items()})
    extra = collectives_content(collectives)
    if extra:
        out["collectives"] = extra
    if energy is not None:
        out["energy"] = energy_content(energy)
    return out


def _normal(section: object) -> dict[str, Any]:
    """A section's content as plain values (the PE leaves out what it derives)."""
    if isinstance(section, PEConfig):
        return section.content()
    if isinstance(section, ChipsConfig) and section.dimensions:
        return chips_content(section)
    out = dataclasses.asdict(section)  # type: ignore[call-overload]
    if isinstance(section, ChipsConfig) and not section.dimensions:
        out.pop("dimensions")  # the shorthand: today's content, today's fingerprint
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in out.items()}


def as_topology(topo: object) -> Topology:
    """``topo`` itself if it is a :class:`Topology`, else an :class:`InputError` that says
    where to get one (the API's argument check)."""
    if not isinstance(topo, Topology):
        raise InputError(
            f"topo = {short_repr(topo)} must be a sim.Topology; "
            "get one from sim.load_topology('npu-1h') or a .yaml path"
        )
    return topo
