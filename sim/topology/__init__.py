"""Hardware descriptions: load, validate and fingerprint ``sim/topologies/*.yaml``.

Modules, in import order: :mod:`~sim.topology.system` (ADR 0021's shapes: dimensions,
protocols, the collectives section), :mod:`~sim.topology.sections` (the dataclasses and
derived values), :mod:`~sim.topology.checks` (one value's checks and the message style),
:mod:`~sim.topology.dimensions_schema` (``chips.dimensions``),
:mod:`~sim.topology.collectives_schema` (``collectives``), :mod:`~sim.topology.schema`
(keys, :class:`Topology`, the fingerprint), :mod:`~sim.topology.loader` (files, names, YAML,
the environment).

Every hardware constant of the project lives in a topology YAML file. This module turns
one into frozen dataclasses; the simulator and the analytic models read the same objects,
so no other file holds a hardware number. Derived values (per-pseudo-channel bandwidth,
peak PE throughput, picosecond durations) are computed here, never stored in YAML.
"""

from __future__ import annotations

from sim.errors import TopologyError
from sim.topology.collectives_schema import AUTO_CHANNELS, PROTOCOL_CHOICES
from sim.topology.dimensions_schema import MULTI
from sim.topology.loader import (
    TOPOLOGY_DIR,
    TOPOLOGY_ENV,
    available_topologies,
    load_topology,
    topology_from_env,
)
from sim.topology.schema import CHIP_TOPOLOGIES, CHIP_TOPOLOGY_VALUES, Topology, as_topology
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
    DIMENSION_SHAPES,
    NEUTRAL_PROTOCOLS,
    PROTOCOLS,
    CollectivesConfig,
    DimensionConfig,
    ProtocolConfig,
    dimensions_of,
)

__all__ = [
    "AUTO_CHANNELS",
    "CHIP_TOPOLOGIES",
    "CHIP_TOPOLOGY_VALUES",
    "DIMENSION_SHAPES",
    "MULTI",
    "NEUTRAL_PROTOCOLS",
    "PROTOCOLS",
    "PROTOCOL_CHOICES",
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
