"""Collectives on a multi-chip network: allreduce, reduce_scatter, all_gather, alltoall,
broadcast, reduce and sendrecv (nccl-tests' set; :mod:`~sim.collectives.catalog`), their
schedules, their timing on the fabric (:mod:`sim.fabric`), their functional check, their
metrics, and their analytic model and bounds.

Modules, each with one job:

* :mod:`~sim.collectives.schedule`: names, messages, schedules, errors;
* :mod:`~sim.collectives.trees`: NCCL's binary and double binary trees;
* :mod:`~sim.collectives.channels`: the directed rings (and lanes) of a ring's channels;
* :mod:`~sim.collectives.algorithms`: the schedule of each allreduce algorithm (and ring
  reduce_scatter and all_gather); :mod:`~sim.collectives.gather`,
  :mod:`~sim.collectives.alltoall`, :mod:`~sim.collectives.rooted` (broadcast, reduce),
  :mod:`~sim.collectives.sendrecv`: the other collectives' schedules;
  :mod:`~sim.collectives.catalog`: which collective runs which algorithms, any schedule;
  :mod:`~sim.collectives.hierarchical`: ``hierarchical`` and ``tree_ring`` on a network of
  dimensions (:mod:`~sim.collectives.per_dimension`: their model and the bounds there);
* :mod:`~sim.collectives.compile`: a schedule as a fabric program (chunks, dependencies);
  :mod:`~sim.collectives.lockstep`: blocking steps (MPI's pairwise alltoall);
* :mod:`~sim.collectives.nvls`, :mod:`~sim.collectives.nvls_program`: ``nvls``, the
  allreduce on a switch that reduces (ADR 0021 decision 3), its schedule and its program;
  :mod:`~sim.collectives.nvls_model` its model and bounds;
* :mod:`~sim.collectives.verify`: the functional check (the op log replayed on exact data);
* :mod:`~sim.collectives.protocols`: a protocol's network (derated links, per-step
  latency) and ``protocol: auto``'s choice;
* :mod:`~sim.collectives.run`: :func:`allreduce`, :func:`reduce_scatter`, :func:`all_gather`;
  :mod:`~sim.collectives.calls`: :func:`alltoall`, :func:`broadcast`, :func:`reduce`,
  :func:`sendrecv`;
* :mod:`~sim.collectives.metrics`: flat metrics of a run;
* :mod:`~sim.collectives.model`: the analytic model, from :mod:`~sim.collectives.steps`,
  :mod:`~sim.collectives.pipeline`, :mod:`~sim.collectives.critical_path` and
  :mod:`~sim.collectives.one_port`; :mod:`~sim.collectives.bounds`: lower bounds and
  textbook times; :mod:`~sim.collectives.bounds_more`: every collective's lower bounds;
  :mod:`~sim.collectives.model_more`: every collective's model (:func:`collective_model`).

Imports run one way: a module imports only modules listed before it in ``schedule``,
``trees``, ``channels``, ``nvls``, ``hierarchical``, ``algorithms``, ``gather``,
``alltoall``, ``rooted``, ``sendrecv``, ``catalog``, ``compile``, ``lockstep``,
``nvls_program``, ``verify``, ``budget``, ``protocols``, ``run``, ``fast``, ``fast_direct``,
``orbit``, ``fast_orbit``, ``fast_product``, ``calls``,
``metrics`` (a run), ``steps``, ``pipeline``, ``one_port``, ``nvls_model``,
``per_dimension``, ``bounds``, ``bounds_more``, ``critical_path``, ``model``, ``model_more``
(the model: nothing a run needs imports it). Outside the package:
:mod:`sim.fabric` (its package, not its modules), ``sim.topology``, ``sim.limits``,
``sim.errors`` and ``sim.oplog``.
"""

from __future__ import annotations

import sim.collectives.fast_direct  # noqa: F401  (registers direct on rings in run.FAST_PATHS)
from sim.collectives import (
    fast_orbit,  # noqa: F401  (before fast_product: the flat ring)
    fast_product,  # noqa: F401  (registers its run.FAST_PATHS entry)
)
from sim.collectives.bounds import Bounds, bounds_ps, lower_bounds_ps, textbook_ps
from sim.collectives.bounds_more import collective_bounds
from sim.collectives.calls import alltoall, broadcast, reduce, sendrecv
from sim.collectives.catalog import (
    ALL_COLLECTIVES,
    COLLECTIVE_ALGORITHMS,
    build_schedule,
    collective_algorithms,
)
from sim.collectives.compile import Compiled, chunks, fabric_program
from sim.collectives.metrics import bus_factor, collective_metrics, hbm_bytes, link_bytes
from sim.collectives.model import CollectiveModel
from sim.collectives.model_more import collective_model
from sim.collectives.run import (
    CollectiveRun,
    all_gather,
    allreduce,
    reduce_scatter,
    run_collective,
    run_schedule,
)
from sim.collectives.schedule import (
    ALGORITHMS,
    COLLECTIVES,
    CollectiveError,
    Message,
    Schedule,
    algorithms_for,
)
from sim.collectives.steps import ModelStep
from sim.collectives.trees import binary_tree, double_binary_tree, tree_levels
from sim.collectives.verify import Replayed, ReplayError, check, input_coefficients, replay

__all__ = [
    "ALGORITHMS",
    "ALL_COLLECTIVES",
    "COLLECTIVES",
    "COLLECTIVE_ALGORITHMS",
    "Bounds",
    "CollectiveError",
    "CollectiveModel",
    "CollectiveRun",
    "Compiled",
    "Message",
    "ModelStep",
    "ReplayError",
    "Replayed",
    "Schedule",
    "algorithms_for",
    "all_gather",
    "allreduce",
    "alltoall",
    "binary_tree",
    "bounds_ps",
    "broadcast",
    "build_schedule",
    "bus_factor",
    "check",
    "chunks",
    "collective_algorithms",
    "collective_bounds",
    "collective_metrics",
    "collective_model",
    "double_binary_tree",
    "fabric_program",
    "hbm_bytes",
    "input_coefficients",
    "link_bytes",
    "lower_bounds_ps",
    "reduce",
    "reduce_scatter",
    "replay",
    "run_collective",
    "run_schedule",
    "sendrecv",
    "textbook_ps",
    "tree_levels",
]
