"""The ``energy:`` section (docs/adr/0027): per-access energies and static power, checked and
held as exact integers (femtojoules per access, milliwatts per chip), so that energy is
integer arithmetic on the simulator's exact counters.

A file without the section loads (``Topology.energy is None``: its energy metrics are absent,
not zero); a file with it gives every key. ``link_pj_per_byte`` is one number (every link,
per hop) or, on a topology of several dimensions, a list of one number per dimension,
innermost first (ADR 0021)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sim.topology.checks import check_keys, fail, real, require_mapping
from sim.topology.sections import exact

__all__ = [
    "ENERGY_KEYS",
    "MAC_DTYPES",
    "EnergyConfig",
    "build_energy",
    "check_energy_against",
    "energy_content",
]

FJ_PER_PJ = 1000
MW_PER_W = 1000
#: the operand types a MAC energy may be given for, and their bytes per element
MAC_DTYPES: dict[str, int] = {"fp8": 1, "int8": 1, "bf16": 2, "fp16": 2, "fp32": 4}

# key -> (kind, description); kinds: "pj" (>= 0 pJ, whole fJ), "w" (>= 0 W, whole mW),
# "dtype" (a MAC_DTYPES name), "table" (dtype -> pJ), "link" (pJ or a list per dimension)
ENERGY_KEYS: dict[str, tuple[str, str]] = {
    "mac_dtype": (
        "dtype",
        "the operand type the PE multiplies (its bytes = dtype.bytes_per_element)",
    ),
    "mac_pj": ("table", "pJ per MAC, per operand type: {bf16: 0.5, fp32: 1.5, ...}"),
    "hbm_read_pj_per_byte": ("pj", "pJ per byte read from HBM"),
    "hbm_write_pj_per_byte": ("pj", "pJ per byte written to HBM"),
    "sram_read_pj_per_byte": ("pj", "pJ per byte read from the on-chip SRAM"),
    "sram_write_pj_per_byte": ("pj", "pJ per byte written to the on-chip SRAM"),
    "fetch_pj_per_byte": ("pj", "pJ per byte delivered SRAM -> PE operand buffers"),
    "link_pj_per_byte": ("link", "pJ per byte per hop on a link: a number, or one per dimension"),
    "reduce_pj_per_byte": ("pj", "pJ per byte reduced (the reduce engine, or a switch)"),
    "static_w": ("w", "static (leakage and idle) power per chip, W, over the run's time"),
}


@dataclass(frozen=True)
class EnergyConfig:
    """Per-access energies in integer femtojoules (``*_fj``) and static power in integer
    milliwatts; ``mac_pj`` keeps the file's table (its ``mac_dtype`` entry is priced) and
    ``written`` the section as written (hashable: tables as pairs, lists as tuples)."""

    mac_dtype: str
    mac_pj: tuple[tuple[str, int | float], ...]
    mac_fj: int
    hbm_read_fj: int
    hbm_write_fj: int
    sram_read_fj: int
    sram_write_fj: int
    fetch_fj: int
    link_fj: tuple[int, ...]
    reduce_fj: int
    static_mw: int
    written: tuple[tuple[str, Any], ...] = ()

    def link_fj_of(self, dimension: int) -> int:
        """The link energy per byte per hop of ``dimension`` (one value: every dimension's)."""
        return self.link_fj[0] if len(self.link_fj) == 1 else self.link_fj[dimension]


def _whole(source: str, key: str, value: int | float, scale: int, unit: str) -> int:
    scaled = exact(value) * scale
    if scaled.denominator != 1:
        raise fail(source, key, value, f"must be a whole number of {unit} (at most 3 decimals)")
    return int(scaled)


def _pj(source: str, key: str, value: object) -> tuple[int | float, int]:
    number = real(source, key, "num", value, zero_ok=True)
    return number, _whole(source, key, number, FJ_PER_PJ, "femtojoules")


def _mac_table(source: str, value: object) -> dict[str, tuple[int | float, int]]:
    table = require_mapping(source, "energy.mac_pj", value)
    if not table:
        raise fail(source, "energy.mac_pj", value, "must give at least the mac_dtype's energy")
    check_keys(source, "energy.mac_pj.", table, set(MAC_DTYPES), frozenset(MAC_DTYPES))
    return {name: _pj(source, f"energy.mac_pj.{name}", v) for name, v in table.items()}


def _priced(
    source: str, raw: Mapping[str, Any], table: Mapping[str, Any], bytes_per_element: int
) -> str:
    """The operand type whose MAC is priced: ``mac_dtype`` if given (it must be listed and
    have ``bytes_per_element`` bytes), else the one listed type of that size."""
    if "mac_dtype" in raw:
        dtype = raw["mac_dtype"]
        if not isinstance(dtype, str) or dtype not in MAC_DTYPES:
            rule = f"must be one of {', '.join(MAC_DTYPES)}"
            raise fail(source, "energy.mac_dtype", dtype, rule)
        if MAC_DTYPES[dtype] != bytes_per_element:
            raise fail(
                source,
                "energy.mac_dtype",
                dtype,
                f"is {MAC_DTYPES[dtype]} bytes per element but dtype.bytes_per_element is "
                f"{bytes_per_element}; name the type the PE multiplies, or leave mac_dtype out",
            )
        if dtype not in table:
            rule = f"must give the energy of {dtype} (energy.mac_dtype)"
            raise fail(source, "energy.mac_pj", dict(raw["mac_pj"]), rule)
        return dtype
    sized = [t for t in table if MAC_DTYPES[t] == bytes_per_element]
    if len(sized) == 1:
        return sized[0]
    if not sized:
        rule = (
            f"gives no operand type of {bytes_per_element} bytes (dtype.bytes_per_element); "
            f"add the type the PE multiplies (one of "
            f"{', '.join(t for t, b in MAC_DTYPES.items() if b == bytes_per_element) or 'none'})"
        )
        raise fail(source, "energy.mac_pj", dict(raw["mac_pj"]), rule)
    rule = f"lists {' and '.join(sized)}, both {bytes_per_element} bytes; name one in mac_dtype"
    raise fail(source, "energy.mac_pj", dict(raw["mac_pj"]), rule)


def _link(source: str, value: object) -> tuple[Any, tuple[int, ...]]:
    key = "energy.link_pj_per_byte"
    if isinstance(value, list):
        if not value:
            raise fail(source, key, value, "must be a number or a non-empty list per dimension")
        parsed = [_pj(source, f"{key}[{i}]", v) for i, v in enumerate(value)]
        return [p[0] for p in parsed], tuple(p[1] for p in parsed)
    number, fj = _pj(source, key, value)
    return number, (fj,)


def build_energy(source: str, value: object, bytes_per_element: int) -> EnergyConfig:
    """The checked ``energy`` section (every key but ``mac_dtype`` given); the MAC priced is
    ``mac_pj``'s type of ``bytes_per_element`` bytes (``mac_dtype`` names it if two are)."""
    raw = require_mapping(source, "energy", value)
    check_keys(source, "energy.", raw, set(ENERGY_KEYS), frozenset({"mac_dtype"}))
    table = _mac_table(source, raw["mac_pj"])
    dtype = _priced(source, raw, table, bytes_per_element)
    per_byte = {
        key: _pj(source, f"energy.{key}", raw[key])
        for key, (kind, _d) in ENERGY_KEYS.items()
        if kind == "pj"
    }
    static = real(source, "energy.static_w", "num", raw["static_w"], zero_ok=True)
    link_written, link_fj = _link(source, raw["link_pj_per_byte"])
    written: dict[str, Any] = {key: per_byte[key][0] for key in per_byte}
    if "mac_dtype" in raw:  # as written: a file that leaves it out is priced by its dtype
        written["mac_dtype"] = dtype
    written |= {
        "mac_pj": tuple((k, v[0]) for k, v in sorted(table.items())),
        "link_pj_per_byte": tuple(link_written) if isinstance(link_written, list) else link_written,
        "static_w": static,
    }
    return EnergyConfig(
        mac_dtype=dtype,
        mac_pj=tuple((k, v[0]) for k, v in sorted(table.items())),
        mac_fj=table[dtype][1],
        hbm_read_fj=per_byte["hbm_read_pj_per_byte"][1],
        hbm_write_fj=per_byte["hbm_write_pj_per_byte"][1],
        sram_read_fj=per_byte["sram_read_pj_per_byte"][1],
        sram_write_fj=per_byte["sram_write_pj_per_byte"][1],
        fetch_fj=per_byte["fetch_pj_per_byte"][1],
        link_fj=link_fj,
        reduce_fj=per_byte["reduce_pj_per_byte"][1],
        static_mw=_whole(source, "energy.static_w", static, MW_PER_W, "milliwatts"),
        written=tuple(sorted(written.items())),
    )


def check_energy_against(source: str, energy: EnergyConfig, dimensions: int) -> None:
    """A list of link energies must give one per dimension of the chip network."""
    if len(energy.link_fj) > 1 and len(energy.link_fj) != dimensions:
        raise fail(
            source,
            "energy.link_pj_per_byte",
            [float(Fraction(f, FJ_PER_PJ)) for f in energy.link_fj],
            f"lists {len(energy.link_fj)} energies but the chip network has {dimensions} "
            "dimension(s); give one per dimension (innermost first), or one number for all",
        )


def energy_content(energy: EnergyConfig) -> dict[str, Any]:
    """The section as the file wrote it (what the fingerprint hashes)."""
    out: dict[str, Any] = dict(energy.written)
    out["mac_pj"] = dict(out["mac_pj"])
    if isinstance(out["link_pj_per_byte"], tuple):
        out["link_pj_per_byte"] = list(out["link_pj_per_byte"])
    return out
