"""A fast, deterministic NPU simulator: topologies, engines, op logs, GEMM and collectives.

``sim`` imports neither pytest nor the plugin: use it as a library or from a notebook.
"""

from __future__ import annotations

from sim.topology import Topology, TopologyError, available_topologies, load_topology

__all__ = ["Topology", "TopologyError", "available_topologies", "load_topology"]
