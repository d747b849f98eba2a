"""The multi-chip engine: chips joined by links, a fabric program of transfers, reductions and
copies, and its timing on the links, reduce engines and HBM of every chip.

Modules, each with one job:

* :mod:`~sim.fabric.dimensions`: the links, lanes, per-link bandwidth and latency and the
  dimension-ordered routes of a list of dimensions (ADR 0021);
* :mod:`~sim.fabric.network`: the network of a topology (:class:`Network`: links, lanes,
  per-link values, routes; :meth:`Network.derated` for a protocol);
* :mod:`~sim.fabric.program`: the fabric program and the checks of its dependencies;
* :mod:`~sim.fabric.switch_ops`: reductions and multicasts at a switch node (ADR 0021
  decision 3);
* :mod:`~sim.fabric.holds`: what each op holds (its engine, its chip's HBM, one burst);
* :mod:`~sim.fabric.simulate`: :func:`simulate_fabric`, the timing rules, which picks
  :mod:`~sim.fabric.events` (the event loop) or a fast path, :mod:`~sim.fabric.uncontended`
  or :mod:`~sim.fabric.rotation`, for a one-shot program (:mod:`~sim.fabric.one_shot`);
* :mod:`~sim.fabric.scan`: one server's queue as a max-plus scan in numpy, and an integer
  array's distinct values by one sort;
* :mod:`~sim.fabric.log`: the op log's engines and stages, and arrival times.

Imports run one way: a module imports only modules listed before it in ``dimensions``, ``network``,
``program``, ``switch_ops``, ``holds``, ``log``, ``one_shot``, ``scan``, ``events``,
``uncontended``, ``rotation``, ``simulate``, ``symmetry``, ``ring_quotient`` (direct on a
ring by symmetry, ADR 0026), ``quotient`` (products of dimensions). Outside the package,
``sim.fabric`` imports only
``sim.topology``, ``sim.oplog``, ``sim.units``, ``sim.limits`` and ``sim.errors``; other code
imports this package, not its modules.
"""

from __future__ import annotations

from sim.fabric.dimensions import digit_shift
from sim.fabric.log import (
    COPY_STAGE,
    FORWARD,
    HBM_ENGINE,
    REDUCE,
    REDUCE_ENGINE,
    SEND,
    STAGES,
    arrival_ps,
)
from sim.fabric.network import Network, build_network, ring_route, torus_cycle
from sim.fabric.program import COPY, REDUCTION, TRANSFER, FabricProgram, hbm_default
from sim.fabric.quotient import (
    ChipGroup,
    LinkMaps,
    Quotient,
    digit_translations,
    digit_xors,
    link_maps,
    link_orbit_minima,
    order_rotations,
    seen_spans,
    stream_geometry,
    time_by_quotient,
    time_representatives,
)
from sim.fabric.ring_quotient import direct_by_ring_rotation, expand_direct, goes_up
from sim.fabric.ring_quotient import turn as ring_turn
from sim.fabric.scan import distinct, one_after_another
from sim.fabric.simulate import simulate_fabric
from sim.fabric.switch_ops import SWITCH_REDUCE, SWITCH_REDUCE_STAGE
from sim.fabric.symmetry import SymmetricLog, ring_links, ring_network

__all__ = [
    "COPY",
    "COPY_STAGE",
    "FORWARD",
    "HBM_ENGINE",
    "REDUCE",
    "REDUCE_ENGINE",
    "REDUCTION",
    "SEND",
    "STAGES",
    "SWITCH_REDUCE",
    "SWITCH_REDUCE_STAGE",
    "TRANSFER",
    "ChipGroup",
    "FabricProgram",
    "LinkMaps",
    "Network",
    "Quotient",
    "SymmetricLog",
    "arrival_ps",
    "build_network",
    "digit_shift",
    "digit_translations",
    "digit_xors",
    "direct_by_ring_rotation",
    "distinct",
    "expand_direct",
    "goes_up",
    "hbm_default",
    "link_maps",
    "link_orbit_minima",
    "one_after_another",
    "order_rotations",
    "ring_links",
    "ring_network",
    "ring_route",
    "ring_turn",
    "seen_spans",
    "simulate_fabric",
    "stream_geometry",
    "time_by_quotient",
    "time_representatives",
    "torus_cycle",
]
