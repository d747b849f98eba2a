"""Energy of a run from its access counts: each component is an exact count times an integer
energy per access (femtojoules), static energy is chips x static power (mW) x time (ps), which
is femtojoules too (1 mW x 1 ps = 1e-15 J). Everything is integer arithmetic: the same
numbers on every machine, and a component moves only when its count does."""

from __future__ import annotations

from dataclasses import dataclass

from sim.topology.energy_schema import EnergyConfig

__all__ = ["COMPONENTS", "AccessCounts", "Energy", "energy_of"]

#: energy components, in report order
COMPONENTS = (
    "mac",
    "hbm_read",
    "hbm_write",
    "sram_read",
    "sram_write",
    "fetch",
    "link",
    "reduce",
    "static",
)


@dataclass(frozen=True)
class AccessCounts:
    """What a run did, counted exactly: MACs issued (padded ones included: the PE does them),
    bytes per memory and direction, operand bytes fetched into the PE, link bytes per hop per
    dimension (innermost first), bytes reduced, and the chips that were on for ``time_ps``."""

    macs: int = 0
    hbm_read: int = 0
    hbm_write: int = 0
    sram_read: int = 0
    sram_write: int = 0
    fetch: int = 0
    link: tuple[int, ...] = ()
    reduce: int = 0
    chips: int = 1
    time_ps: int = 0

    def __post_init__(self) -> None:
        for name in ("macs", "hbm_read", "hbm_write", "sram_read", "sram_write", "fetch"):
            _count(name, getattr(self, name))
        _count("reduce", self.reduce)
        for i, b in enumerate(self.link):
            _count(f"link[{i}]", b)
        _count("chips", self.chips)
        _count("time_ps", self.time_ps)


def _count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"AccessCounts.{name} = {value!r} must be a whole count >= 0")


@dataclass(frozen=True)
class Energy:
    """Femtojoules per component (:data:`COMPONENTS`) and the run's time and chips."""

    fj: tuple[tuple[str, int], ...]
    time_ps: int
    chips: int

    @property
    def total_fj(self) -> int:
        return sum(v for _k, v in self.fj)

    def component(self, name: str) -> int:
        return dict(self.fj)[name]


def energy_of(counts: AccessCounts, cfg: EnergyConfig) -> Energy:
    """The energy of ``counts`` at ``cfg``'s per-access energies, by component (fJ)."""
    link = sum(b * cfg.link_fj_of(d) for d, b in enumerate(counts.link))
    parts = {
        "mac": counts.macs * cfg.mac_fj,
        "hbm_read": counts.hbm_read * cfg.hbm_read_fj,
        "hbm_write": counts.hbm_write * cfg.hbm_write_fj,
        "sram_read": counts.sram_read * cfg.sram_read_fj,
        "sram_write": counts.sram_write * cfg.sram_write_fj,
        "fetch": counts.fetch * cfg.fetch_fj,
        "link": link,
        "reduce": counts.reduce * cfg.reduce_fj,
        "static": counts.chips * cfg.static_mw * counts.time_ps,
    }
    return Energy(tuple((k, parts[k]) for k in COMPONENTS), counts.time_ps, counts.chips)
