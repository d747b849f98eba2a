"""Terms 5 and 6 of the model (:mod:`sim.collectives.model`): the congestion-unaware
critical path of the algorithm's own chunk program, and the release-time bound of the
busiest resource on it (Carlier 1982, ADR 0015, ADR 0017)."""

from __future__ import annotations

import itertools

import numpy as np

from sim.collectives.algorithms import build_schedule
from sim.collectives.budget import check_collective
from sim.collectives.compile import fabric_program
from sim.collectives.run import check_channels
from sim.collectives.steps import (
    Costs,
)
from sim.errors import BudgetError
from sim.fabric import (
    FORWARD,
    REDUCE,
    REDUCTION,
    SEND,
    TRANSFER,
    FabricProgram,
    Network,
    one_after_another,
    simulate_fabric,
)
from sim.oplog import OpLog
from sim.topology import Topology

SHARED = ("halving_doubling", "double_binary_tree")


def critical_path(
    topo: Topology,
    net: Network,
    algorithm: str,
    nbytes: int,
    collective: str,
    chunk_bytes: int | None,
    c: Costs,
    channels: int = 0,
) -> tuple[float, float]:
    """Terms 5 and 6 (:mod:`sim.collectives.model`), from the algorithm's own chunk program
    (:func:`fabric_program`) timed with ``contention=False`` (ASTRA-sim's congestion-unaware
    analytical network; fair link shares for :data:`SHARED`): its critical path, and the
    release-time bound of the busiest resource on it. Over the simulator's budgets
    (:func:`~sim.collectives.budget.check_collective`) both are 0: the model is the analytic
    terms. A ring runs on ``channels`` channels (0: the ring order and its reverse)."""
    if net.chips <= 1 or nbytes == 0:
        return 0.0, 0.0
    try:
        check_collective(topo, nbytes, algorithm, chunk_bytes)
    except BudgetError:
        return 0.0, 0.0
    schedule = build_schedule(
        topo,
        nbytes,
        algorithm,
        collective,
        chunk_bytes=chunk_bytes,
        network=net,
        channels=channels if algorithm == "ring" else None,
    )
    try:
        if channels:
            check_channels(schedule, net)
    except BudgetError:
        return 0.0, 0.0
    return program_path(net, fabric_program(schedule).program, algorithm in SHARED, c)


def program_path(
    net: Network, prog: FabricProgram, shared: bool, c: Costs, timed: FabricProgram | None = None
) -> tuple[float, float]:
    """Terms 5 and 6 of any fabric program (:func:`critical_path`; ``shared``: fair link
    shares, as for :data:`SHARED`; ``timed``: ``prog`` as the path times it, if not so)."""
    kinds = np.asarray(prog.kind, dtype=np.int64)
    sizes = np.asarray(prog.nbytes, dtype=np.int64)
    given = np.asarray(prog.hbm, dtype=np.int64)
    # hbm_default op by op: a reduction reads and writes its bytes, a send or copy moves them once
    mem_op = np.where(given < 0, np.where(kinds == REDUCTION, 2 * sizes, sizes), given)
    if timed is None:
        timed = _shared(net, prog, mem_op.tolist()) if shared else prog
    log = simulate_fabric(net, timed, contention=False)
    total = float(log.makespan_ps)
    nlinks, p = len(net.links), net.chips
    op = log.op.astype(np.int64)
    stage = log.stage
    on_link = (stage == SEND) | (stage == FORWARD)
    mem = np.asarray(mem_op, dtype=np.float64)[op]
    nb = np.asarray(prog.nbytes, dtype=np.float64)[op]
    chip = log.chip.astype(np.int64)
    reduce = stage == REDUCE
    reads = (stage == SEND) | (~on_link)  # an op's HBM bytes: at its first hop or on chip
    res = np.concatenate(
        [log.engine[on_link].astype(np.int64), nlinks + chip[reduce], nlinks + p + chip[reads]]
    )
    # a link's setup (a protocol's handshake, ADR 0023) holds it before every transfer's bytes
    setup = np.asarray(net.link_setup_ps or (0,) * len(net.links), dtype=np.float64)
    held = nb * c.beta + np.where(on_link, setup[np.where(on_link, log.engine, 0)], 0.0)
    work = np.concatenate([held[on_link], nb[reduce] * c.gamma, mem[reads] * c.mem])
    hop = _hop_index(op)
    late = _sender_queues(net, prog, log, op, hop, on_link, held)
    moved = log.start + np.where(on_link, late[op], 0)
    start = np.concatenate([moved[on_link], log.start[reduce], moved[reads]])
    if not len(res):
        return total, 0.0
    # the tail of each record: the least time its op's dependents still need after it ends
    ops = np.concatenate([op[on_link], op[reduce], op[reads]])
    hops_left = _hops(net, prog)
    left = np.where(kinds[op] == TRANSFER, hops_left[op] - 1 - hop, 0)
    rec_tail = left * c.alpha
    tail = np.concatenate([rec_tail[on_link], rec_tail[reduce], rec_tail[reads]])
    tail = tail + _tails(prog, hops_left, mem_op, c)[ops]
    # per resource, ops by start: from op j on, the work of j and every later op, then the
    # shortest tail among them (Carlier 1982's one-machine bound with heads and tails)
    order = np.lexsort((start, res))
    r, w, t0, q = res[order], work[order], start[order].astype(np.float64), tail[order]
    suffix = np.cumsum(w[::-1])[::-1]
    group_end = np.searchsorted(r, r, side="right")  # one past each op's resource group
    after = suffix - np.append(suffix, 0.0)[group_end]
    path = t0 + after + _suffix_min(r, q)
    return total, float(path.max(initial=0.0))


def _sender_queues(
    net: Network,
    prog: FabricProgram,
    log: OpLog,
    op: np.ndarray,
    hop: np.ndarray,
    on_link: np.ndarray,
    hold: np.ndarray,
) -> np.ndarray:
    """Per op: how much later a transfer leaves when the transfers that leave its sender on
    the same link direction take turns there, first come, first served, in the order (and
    for the time) the congestion-unaware path gives them. Only each pair's first
    ``staging_buffers`` transfers: later ones wait for credits that come back as the
    receiver consumes, which this pass does not follow."""
    late = np.zeros(len(prog), dtype=np.int64)
    p = net.chips
    conn = np.asarray(prog.src, dtype=np.int64) * p + np.asarray(prog.dst, dtype=np.int64)
    kinds = np.asarray(prog.kind, dtype=np.int64)
    ids = np.flatnonzero(kinds == TRANSFER)
    by_pair = ids[np.argsort(conn[ids], kind="stable")]
    rank = np.empty(len(prog), dtype=np.int64)
    rank[by_pair] = _hop_index(conn[by_pair])  # each transfer's place among its pair's
    early = np.zeros(len(prog), dtype=bool)
    early[ids] = rank[ids] < net.staging_buffers
    first = np.flatnonzero(on_link & (hop == 0) & early[op])
    if not len(first):
        return late
    s0 = log.start[first].astype(np.int64)
    w = np.ceil(hold[first]).astype(np.int64)
    end = one_after_another(log.engine[first].astype(np.int64), s0, s0 + w, w)
    late[op[first]] = end - w - s0
    return late


def _hop_index(op: np.ndarray) -> np.ndarray:
    """Each record's hop within its op (records sorted by op, then hop): each element's
    place within its run of equal values."""
    idx = np.arange(len(op))
    first = np.r_[True, op[1:] != op[:-1]]
    return idx - np.maximum.accumulate(np.where(first, idx, 0))


def _hops(net: Network, prog: FabricProgram) -> np.ndarray:
    """Per op: the hops of its route (a reduction or copy: 0, its src is its dst)."""
    p = net.chips
    table = np.asarray([[len(r) for r in row] for row in net.routes], dtype=np.int64).reshape(-1)
    return table[np.asarray(prog.src, dtype=np.int64) * p + np.asarray(prog.dst, dtype=np.int64)]


RELAX_ROUNDS = 64  # _tails relaxes this many times at most, then makes one backward pass


def _tails(prog: FabricProgram, hops: np.ndarray, mem: np.ndarray, c: Costs) -> np.ndarray:
    """Per op: the least time the ops that depend on it (directly or not) still need after
    it is done (a transfer: when its last hop ends), whatever the contention. Along each
    chain of dependents: a transfer's data arrives ``a`` after its last hop ends; a
    dependent ends no earlier than one burst after its input (ADR 0005 decision 4: ops
    stream at the granule of one burst), and a transfer's last hop ends ``(h-1) a`` after
    its first.

    The longest such chain, relaxed along every dependency edge at once until nothing
    changes (as many rounds as the deepest chain; the same sums in the same order as one
    backward pass, so the same values)."""
    n = len(prog)
    kind = np.asarray(prog.kind, dtype=np.int64)
    nb = np.asarray(prog.nbytes, dtype=np.float64)
    g = np.minimum(nb, float(c.burst))
    rate = np.where(kind == TRANSFER, c.beta, np.where(kind == REDUCTION, c.gamma, 0.0))
    grain = g * rate
    share = np.divide(mem * g, nb, out=np.zeros(n), where=nb != 0)
    grain = np.maximum(grain, share * c.mem)
    transfer = kind == TRANSFER
    grain = np.where(transfer, grain + (hops - 1) * c.alpha, grain)
    count = np.fromiter(map(len, prog.deps), np.int64, n)
    user = np.repeat(np.arange(n, dtype=np.int64), count)  # edge: op `user` needs op `dep`
    dep = np.fromiter(itertools.chain.from_iterable(prog.deps), np.int64, int(count.sum()))
    lag = np.where(transfer[dep], c.alpha, 0.0)
    lag_by_op = np.where(transfer, c.alpha, 0.0)
    out = np.zeros(n)
    for _ in range(RELAX_ROUNDS):  # chains of a collective are a few steps deep
        new = np.zeros(n)
        np.maximum.at(new, dep, (out[user] + grain[user]) + lag)
        if np.array_equal(new, out):
            return out
        out = new
    tails = [0.0] * n  # deeper: one backward pass (ops depend on earlier ops only)
    grains, lags = grain.tolist(), lag_by_op.tolist()
    for i in range(n - 1, -1, -1):
        here = tails[i] + grains[i]
        for d in prog.deps[i]:
            if here + lags[d] > tails[d]:
                tails[d] = here + lags[d]
    return np.asarray(tails)


def _suffix_min(group: np.ndarray, value: np.ndarray) -> np.ndarray:
    """``value[j:]``'s minimum within ``j``'s group (``group`` sorted, groups contiguous)."""
    if not len(value):
        return value
    ids = np.cumsum(np.r_[True, group[1:] != group[:-1]])  # 1, 2, ... per group
    span = float(value.max() - value.min()) + 1.0
    shifted = value[::-1] + span * ids[::-1]  # a later group (first when reversed) is larger
    return np.minimum.accumulate(shifted)[::-1] - span * ids


def _shared(net: Network, prog: FabricProgram, mem: list[int]) -> FabricProgram:
    """``prog`` with each transfer as long on its links as the fair share it gets: its bytes
    times the number of (sender, receiver) pairs of its step that cross its busiest link."""
    pairs: dict[tuple[int, int], set[int]] = {}
    routes = net.routes
    p = net.chips
    for k, s, d, st in zip(prog.kind, prog.src, prog.dst, prog.step, strict=True):
        if k == TRANSFER:
            for link in routes[s][d]:
                pairs.setdefault((st, link), set()).add(s * p + d)
    out = prog.copy()
    for i, (k, s, d, st) in enumerate(zip(prog.kind, prog.src, prog.dst, prog.step, strict=True)):
        if k == TRANSFER:
            share = max(len(pairs[st, link]) for link in routes[s][d])
            out.nbytes[i] *= share
            out.hbm[i] = mem[i]
    return out
