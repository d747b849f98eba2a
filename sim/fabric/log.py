"""The op log of a fabric program: its engines and stages, one record per hop of a transfer
and per reduction or copy, and when each transfer's data arrived."""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt

from sim.fabric.network import Network
from sim.fabric.program import REDUCTION, TRANSFER, FabricProgram, op_routes
from sim.fabric.switch_ops import at_switch, switch_log
from sim.oplog import OpLog

STAGES = ("send", "forward", "reduce", "copy")


SEND, FORWARD, REDUCE, COPY_STAGE = range(4)


REDUCE_ENGINE = "reduce"


HBM_ENGINE = "hbm"


def op_log(
    net: Network,
    program: FabricProgram,
    nrec: npt.NDArray[np.int64],
    start: list[int] | npt.NDArray[np.int64],
    end: list[int] | npt.NDArray[np.int64],
    routes: list[tuple[int, ...]] | None = None,
) -> OpLog:
    """The op log of ``program``: one record per hop of each transfer and per other op, in op
    and hop order, with the given start and end times; chip, engine and stage follow from
    each op (a hop's link on the op's route, one of ``routes``, and the chip it belongs to;
    the reduce engine; HBM for a copy)."""
    n, nlinks = len(program), len(net.links)
    kind = np.asarray(program.kind, dtype=np.int64)
    src = np.asarray(program.src, dtype=np.int64)
    op = np.repeat(np.arange(n, dtype=np.int64), nrec)
    hop = np.arange(len(op), dtype=np.int64) - np.repeat(np.cumsum(nrec) - nrec, nrec)
    k = kind[op]
    on_link = k == TRANSFER
    route_of = op_routes(net, program) if routes is None else routes
    hops = int(np.count_nonzero(on_link))
    link = np.zeros(len(op), dtype=np.int64)
    link[on_link] = np.fromiter(itertools.chain.from_iterable(route_of), np.int64, hops)
    link_chip = np.asarray([net.link_chip(i) for i in range(nlinks)], dtype=np.int64)
    cols = {
        "op": op,
        "chip": np.where(on_link, link_chip[link] if nlinks else 0, src[op]),
        "engine": np.where(on_link, link, np.where(k == REDUCTION, nlinks, nlinks + 1)),
        "stage": np.where(
            on_link,
            np.where(hop == 0, SEND, FORWARD),
            np.where(k == REDUCTION, REDUCE, COPY_STAGE),
        ),
        "start": np.asarray(start, dtype=np.int64),
        "end": np.asarray(end, dtype=np.int64),
        "nbytes": np.asarray(program.nbytes, dtype=np.int64)[op],
        "tile": np.asarray(program.step, dtype=np.int64)[op],
    }
    names: tuple[str, ...] = (*net.names, REDUCE_ENGINE, HBM_ENGINE)
    stages: tuple[str, ...] = STAGES
    if at_switch(net, program):  # reductions at a switch: their ports' engines, their stage
        names, stages = switch_log(net, program, route_of, op, cols, names, stages)
    return OpLog.from_columns(names, stages, cols)


def arrival_ps(net: Network, log: OpLog) -> dict[int, int]:
    """When each transfer's last byte reached its destination: its last hop's end plus that
    hop's link latency (the log's link engines are ``net``'s links, in order)."""
    is_link = (log.stage == SEND) | (log.stage == FORWARD)
    lats = np.asarray(net.link_latencies_ps, dtype=np.int64)
    ends = log.end[is_link] + lats[log.engine[is_link].astype(np.int64)]
    out: dict[int, int] = {}
    for op, end in zip(log.op[is_link].tolist(), ends.tolist(), strict=True):
        out[op] = max(out.get(op, 0), end)
    return out
