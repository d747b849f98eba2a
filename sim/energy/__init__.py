"""Energy and power from the simulator's exact counters and the topology's ``energy:`` section
(docs/adr/0027).

Modules, in import order: :mod:`~sim.energy.model` (access counts -> integer femtojoules per
component, static power over the run's time), :mod:`~sim.energy.counts` (the counts of a GEMM,
a collective and a tensor-parallel layer run), :mod:`~sim.energy.metrics` (the flat metrics a
bench reports: µJ per component, W, efficiencies).
"""

from __future__ import annotations

from sim.energy.counts import collective_counts, gemm_counts, layer_counts
from sim.energy.metrics import ENERGY_COMPONENTS, FJ_PER_PJ, energy_metrics, power_w
from sim.energy.model import COMPONENTS, AccessCounts, Energy, energy_of

__all__ = [
    "COMPONENTS",
    "ENERGY_COMPONENTS",
    "FJ_PER_PJ",
    "AccessCounts",
    "Energy",
    "collective_counts",
    "energy_metrics",
    "energy_of",
    "gemm_counts",
    "layer_counts",
    "power_w",
]
