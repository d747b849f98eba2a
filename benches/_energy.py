"""What every bench shares of energy (docs/adr/0027): the metric spec, gated like the counters
the energies come from (a dynamic component is an exact count times a constant: tolerance 0,
a change is ``changed``; static energy and the total follow the run's time), the meta line
that says when a topology has no ``energy:`` section, and the lines that say which component
moved."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_npubench import Metric
from sim import Topology
from sim.energy import ENERGY_COMPONENTS, Energy, energy_metrics

COMPONENT_NAMES = {
    "mac": "MAC",
    "hbm_read": "HBM read",
    "hbm_write": "HBM write",
    "sram_read": "SRAM read",
    "sram_write": "SRAM write",
    "fetch": "PE operand fetch",
    "link": "link",
    "reduce": "reduction",
    "static": "static (leakage + idle)",
}


def energy_spec(
    topo: Topology, time_tolerance: float, efficiencies: Mapping[str, Metric]
) -> dict[str, Metric]:
    """The energy metrics of a bench on ``topo``; none when it has no ``energy:`` section
    (absent, not zero)."""
    if topo.energy is None:
        return {}
    timed = Metric("uJ", "lower", tolerance=time_tolerance)
    spec = {"energy_uj": timed}
    for name, component in ENERGY_COMPONENTS.items():
        exact = Metric("uJ", "lower", tolerance=0.0, counter=True)
        spec[name] = timed if component == "static" else exact
    spec["power_w"] = Metric("W", "lower", gate=False)
    return {**spec, **efficiencies}


def energy_values(topo: Topology, energy: Energy | None) -> dict[str, float]:
    """``energy``'s metrics, or none on a topology without the section."""
    if topo.energy is None or energy is None:
        return {}
    return energy_metrics(energy)


def energy_meta(topo: Topology) -> dict[str, Any]:
    """The ``energy`` line of a bench's meta: what the energies come from, or that they are
    absent."""
    if topo.energy is None:
        return {"energy": f"absent (no energy: section in {topo.source})"}
    return {"energy": f"per-access energies of {topo.name} (docs/adr/0027)"}


def energy_explain(current: Mapping[str, float], baseline: Mapping[str, float]) -> list[str]:
    """Which energy components moved, largest change first: ``energy: SRAM read +100.00%
    (0.0064 -> 0.0128 µJ)``; nothing when none did (or the bench has no energy metrics)."""
    rows = []
    for name, component in ENERGY_COMPONENTS.items():
        if name not in current or name not in baseline:
            continue
        before, after = baseline[name], current[name]
        if before == after:
            continue
        change = (after - before) / before if before else None
        what = COMPONENT_NAMES[component]
        text = f"{change:+.2%}" if change is not None else "new"
        rows.append(
            (abs(change) if change is not None else float("inf"), what, text, before, after)
        )
    rows.sort(key=lambda r: -r[0])
    return [
        f"energy: {what} {text} ({before:.4g} -> {after:.4g} µJ)"
        for _, what, text, before, after in rows
    ]
