"""Collectives on a multi-chip network: allreduce, reduce_scatter and all_gather, their
schedules, their timing on the fabric (:mod:`sim.fabric`), their functional check, their
metrics, and their analytic model and bounds.

Modules, each with one job:

* :mod:`~sim.collectives.schedule`: names, messages, schedules, errors;
* :mod:`~sim.collectives.trees`: NCCL's binary and double binary trees;
* :mod:`~sim.collectives.channels`: the directed rings (and lanes) of a ring's channels;
* :mod:`~sim.collectives.algorithms`: the schedule of each algorithm;
  :mod:`~sim.collectives.hierarchical`: ``hierarchical`` and ``tree_ring`` on a network of
  dimensions (:mod:`~sim.collectives.per_dimension`: their model and the bounds there);
* :mod:`~sim.collectives.compile`: a schedule as a fabric program (chunks, dependencies);
* :mod:`~sim.collectives.nvls`, :mod:`~sim.collectives.nvls_program`: ``nvls``, the
  allreduce on a switch that reduces (ADR 0021 decision 3), its schedule and its program;
  :mod:`~sim.collectives.nvls_model` its model and bounds;
* :mod:`~sim.collectives.verify`: the functional check (the op log replayed on exact data);
* :mod:`~sim.collectives.protocols`: a protocol's network (derated links, per-step
  latency) and ``protocol: auto``'s choice;
* :mod:`~sim.collectives.run`: :func:`allreduce`, :func:`reduce_scatter`, :func:`all_gather`;
* :mod:`~sim.collectives.metrics`: flat metrics of a run;
* :mod:`~sim.collectives.model`: the analytic model, from :mod:`~sim.collectives.steps`,
  :mod:`~sim.collectives.pipeline`, :mod:`~sim.collectives.critical_path` and
  :mod:`~sim.collectives.one_port`; :mod:`~sim.collectives.bounds`: lower bounds and
  textbook times.

Imports run one way: a module imports only modules listed before it in ``schedule``,
``trees``, ``channels``, ``nvls``, ``hierarchical``, ``algorithms``, ``compile``,
``nvls_program``, ``verify``, ``budget``, ``protocols``, ``run``, ``metrics`` (a run),
``steps``, ``pipeline``, ``one_port``, ``nvls_model``, ``per_dimension``, ``bounds``,
``critical_path``, ``model`` (the model: nothing a run needs imports it). Outside the package:
:mod:`sim.fabric` (its package, not its modules), ``sim.topology``, ``sim.limits``,
``sim.errors`` and ``sim.oplog``.
"""

from __future__ import annotations

from sim.collectives.algorithms import build_schedule
from sim.collectives.bounds import Bounds, bounds_ps, lower_bounds_ps, textbook_ps
from sim.collectives.compile import Compiled, chunks, fabric_program
from sim.collectives.metrics import bus_factor, collective_metrics, hbm_bytes, link_bytes
from sim.collectives.model import CollectiveModel
from sim.collectives.model import model as collective_model
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
    "COLLECTIVES",
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
    "binary_tree",
    "bounds_ps",
    "build_schedule",
    "bus_factor",
    "check",
    "chunks",
    "collective_metrics",
    "collective_model",
    "double_binary_tree",
    "fabric_program",
    "hbm_bytes",
    "input_coefficients",
    "link_bytes",
    "lower_bounds_ps",
    "reduce_scatter",
    "replay",
    "run_collective",
    "run_schedule",
    "textbook_ps",
    "tree_levels",
]
