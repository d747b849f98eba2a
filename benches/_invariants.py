"""The checks of issue 26's classes 3, 4 and 6 in one call per bench ``run()``: derived
metrics recomputed (:mod:`benches._derived`), per-record invariants (:mod:`benches._records`)
and, for collectives, the textbook alpha-beta time (:mod:`benches._alpha_beta`). Each returns
problems (strings naming the metric, engine or link); the bench fails the config on any."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benches._alpha_beta import check_alpha_beta
from benches._derived import ccl_algo_bound, ccl_derived, gemm_derived, tp_derived
from benches._records import fabric_records, gemm_records
from sim import Topology
from sim.fabric import FORWARD, REDUCE, SEND

__all__ = ["ccl_invariants", "gemm_invariants", "tp_invariants"]


def gemm_invariants(sim_run: Any, metrics: Mapping[str, float]) -> list[str]:
    return gemm_derived(sim_run, metrics) + gemm_records(sim_run, metrics)


def ccl_invariants(
    sim_run: Any,
    metrics: Mapping[str, float],
    params: Mapping[str, Any],
    topo: Topology,
    algo_bound: tuple[int, float],
) -> list[str]:
    """``algo_bound``: the bytes moved and the busiest resource's time (ps) run() used."""
    collective = params.get("collective", "allreduce")
    return [
        *ccl_derived(sim_run, metrics, params, (SEND, FORWARD), REDUCE),
        *ccl_algo_bound(metrics, *algo_bound, collective, sim_run.chips),
        *fabric_records(sim_run.log, topo, sim_run.network),
        *check_alpha_beta(topo, collective, params["algorithm"], params["size"], sim_run.time_ps),
    ]


def tp_invariants(sim_run: Any, metrics: Mapping[str, float], topo: Topology) -> list[str]:
    return [
        *tp_derived(sim_run, metrics),
        *fabric_records(sim_run.log, topo, sim_run.net, what="layer"),
        *fabric_records(sim_run.comm_log, topo, sim_run.net, what="collectives alone"),
    ]
