"""The flat energy metrics a bench reports: total and per-component energy in µJ, average
power in W (energy over the run's time), from an :class:`~sim.energy.model.Energy`."""

from __future__ import annotations

from sim.energy.model import COMPONENTS, Energy

__all__ = ["ENERGY_COMPONENTS", "FJ_PER_PJ", "FJ_PER_UJ", "energy_metrics", "power_w"]

FJ_PER_UJ = 10**9
FJ_PER_PJ = 1000
#: metric name -> component, in report order
ENERGY_COMPONENTS = {f"energy_{c}_uj": c for c in COMPONENTS}


def power_w(energy: Energy) -> float:
    """Average power over the run: fJ / ps is mW."""
    return energy.total_fj / energy.time_ps / 1000 if energy.time_ps else 0.0


def energy_metrics(energy: Energy) -> dict[str, float]:
    """``energy_uj``, ``energy_<component>_uj`` and ``power_w``."""
    out = {"energy_uj": energy.total_fj / FJ_PER_UJ}
    for name, component in ENERGY_COMPONENTS.items():
        out[name] = energy.component(component) / FJ_PER_UJ
    out["power_w"] = power_w(energy)
    return out
