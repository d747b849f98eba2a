"""The model on the configs where ADR 0010's model was furthest from the simulator (ADR 0015).

Each config was outside the bound asserted here before the correction it names (measured
sim / model in the docstring); the simulator is the reference, the model must track it.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from sim import load_topology
from sim.collectives import allreduce
from sim.collectives.model import model

BASE = load_topology()


def _ratio(kind: str, p: int, algorithm: str, nbytes: int) -> float:
    topo = BASE.replace_chips(count=p, topology=kind)
    return allreduce(topo, nbytes, algorithm).time_ps / model(topo, algorithm, nbytes).time_ps


@pytest.mark.parametrize(("nbytes", "most"), [(40_250_972, 1.03), (173_416_656, 1.12)])
def test_release_bound_charges_the_shortest_tail(nbytes: int, most: float) -> None:
    """Double binary tree on a 6-chip switch, port-bound. ADR 0010's release-time term added
    the whole rest of the path after a port's last op and modelled it up to 1.48x too slow
    (sim / model 0.675 at 40 MB, 0.739 at 173 MB); with Carlier's shortest tail among the
    port's ops it no longer overshoots (the simulator is 1.01x and 1.11x the busiest port's
    load there)."""
    ratio = _ratio("switch", 6, "double_binary_tree", nbytes)
    assert 0.97 < ratio < most, ratio


@pytest.mark.parametrize("nbytes", [819_912, 1_211_864])
def test_double_binary_tree_pipeline_fill_on_one_port(nbytes: int) -> None:
    """32-chip switch, about 1 MB: 4 chunks per half through 10 levels whose parents' single
    port takes two children's chunks. ADR 0010: sim / model 1.43 and 1.38 (no term saw the
    per-level store-and-forward); the Sanders-Speck-Traeff stages bring it within 1.2."""
    ratio = _ratio("switch", 32, "double_binary_tree", nbytes)
    assert 0.95 < ratio < 1.2, ratio


def test_halving_doubling_fold_serialises_on_a_switch_port() -> None:
    """26 chips on a switch (10 folded pairs), 94 MB: a survivor's one port takes the fold
    and its reduce-scatter, then sends the all-gather and the result back. ADR 0010: sim /
    model 1.558 (the busiest port's load, 2.875 n b); the one-port phase sum 3.875 n b brings
    it within 1.2."""
    ratio = _ratio("switch", 26, "halving_doubling", 94_245_798)
    assert 0.95 < ratio < 1.2, ratio


@pytest.mark.parametrize("algorithm", ["ring", "direct", "halving_doubling", "double_binary_tree"])
def test_tails_relaxed_at_once_equal_one_backward_pass(
    algorithm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tails relaxed along every dependency at once (numpy) are the values of one
    backward pass over the ops (the fallback for deep chains), to the last bit."""
    cm = importlib.import_module("sim.collectives.critical_path")
    from sim.collectives import build_schedule, fabric_program
    from sim.collectives.steps import model_costs
    from sim.fabric import build_network, hbm_default

    topo = load_topology().replace_chips(count=6, topology="ring", torus_dims=(2, 3))
    net = build_network(topo)
    prog = fabric_program(build_schedule(topo, 3 * 1024 * 1024 + 6, algorithm)).program
    ops = zip(prog.kind, prog.nbytes, prog.hbm, strict=True)
    mem = np.asarray([hbm_default(k, b) if m < 0 else m for k, b, m in ops], dtype=np.float64)
    costs = model_costs(topo, None)
    relaxed = cm._tails(prog, cm._hops(net, prog), mem, costs)
    monkeypatch.setattr(cm, "RELAX_ROUNDS", 0)
    backward = cm._tails(prog, cm._hops(net, prog), mem, costs)
    assert relaxed.max() > 0
    assert np.array_equal(relaxed, backward)


def test_a_leaf_sends_its_own_data_before_what_it_reduced() -> None:
    """Double binary tree, 8-chip switch, 16 MiB (ADR 0017): chip 4's children are leaves of
    the other tree, so each child's one port sends its own half first and chip 4's port
    out of the switch idles for (n/2) b before its 0.8 of the run. With heads from the
    congestion-unaware path the model saw only that port's load (sim / model 1.246); with
    each sender's first chunks queued on its link, within 1.2."""
    ratio = _ratio("switch", 8, "double_binary_tree", 16 * 1024 * 1024)
    assert 0.97 < ratio < 1.2, ratio


def test_sender_queues_delay_the_second_transfer_on_a_shared_port() -> None:
    """Two chunks that leave chip 0 of a switch at once on the congestion-unaware path (each
    pair has its own link there) share chip 0's one port: the second leaves b bytes later."""
    cm = importlib.import_module("sim.collectives.critical_path")
    from sim.fabric import TRANSFER, FabricProgram, build_network, simulate_fabric

    topo = BASE.replace_chips(count=3, topology="switch")
    net = build_network(topo)
    prog = FabricProgram()
    prog.add(TRANSFER, 0, 1, 1 << 20, 0, ())
    prog.add(TRANSFER, 0, 2, 1 << 20, 0, ())
    log = simulate_fabric(net, prog, contention=False)
    op = log.op.astype(np.int64)
    hop = cm._hop_index(op)
    on_link = np.ones(len(op), dtype=bool)
    hold = np.full(len(op), float((1 << 20) * 1000) / float(topo.chips.link_bw))
    late = cm._sender_queues(net, prog, log, op, hop, on_link, hold)
    assert log.start[hop == 0].tolist() == [0, 0]
    assert late.tolist() == [0, int(np.ceil(hold[0]))]
