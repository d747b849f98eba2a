"""Hardware descriptions: load, validate and fingerprint ``sim/topologies/*.yaml``.

Modules: :mod:`~sim.topology.sections` (the dataclasses and derived values),
:mod:`~sim.topology.schema` (keys, checks, :class:`Topology`), :mod:`~sim.topology.loader`
(files, names, YAML, the environment).

Every hardware constant of the project lives in a topology YAML file. This module turns
one into frozen dataclasses; the simulator and the analytic models read the same objects,
so no other file holds a hardware number. Derived values (per-pseudo-channel bandwidth,
peak PE throughput, picosecond durations) are computed here, never stored in YAML.
"""

from __future__ import annotations

from sim.errors import TopologyError
from sim.topology.loader import (
    TOPOLOGY_DIR,
    TOPOLOGY_ENV,
    available_topologies,
    load_topology,
    topology_from_env,
)
from sim.topology.schema import CHIP_TOPOLOGIES, Topology, as_topology
from sim.topology.sections import (
    ChipsConfig,
    DMAConfig,
    DTypeConfig,
    FetchConfig,
    HBMConfig,
    PEConfig,
    SRAMConfig,
)
from sim.topology.system import (
    PROTOCOLS,
    CollectivesConfig,
    DimensionConfig,
    ProtocolConfig,
    dimensions_of,
)

__all__ = [
    "CHIP_TOPOLOGIES",
    "PROTOCOLS",
    "TOPOLOGY_DIR",
    "TOPOLOGY_ENV",
    "ChipsConfig",
    "CollectivesConfig",
    "DMAConfig",
    "DTypeConfig",
    "DimensionConfig",
    "FetchConfig",
    "HBMConfig",
    "PEConfig",
    "ProtocolConfig",
    "SRAMConfig",
    "Topology",
    "TopologyError",
    "as_topology",
    "available_topologies",
    "dimensions_of",
    "load_topology",
    "topology_from_env",
]
