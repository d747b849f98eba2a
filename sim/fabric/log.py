"""The op log of a fabric program: its engines and stages, one record per hop of a transfer
and per reduction or copy, and when each transfer's data arrived."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from sim.fabric.network import Network
from sim.fabric.program import REDUCTION, TRANSFER, FabricProgram
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
) -> OpLog:
    """The op log of ``program``: one record per hop of each transfer and per other op, in op
    and hop order, with the given start and end times; chip, engine and stage follow from
    each op (a hop's link and the chip it belongs to, the reduce engine, HBM for a copy)."""
    n, p, nlinks = len(program), net.chips, len(net.links)
    kind = np.asarray(program.kind, dtype=np.int64)
    src = np.asarray(program.src, dtype=np.int64)
    op = np.repeat(np.arange(n, dtype=np.int64), nrec)
    hop = np.arange(len(op), dtype=np.int64) - np.repeat(np.cumsum(nrec) - nrec, nrec)
    deepest = max(1, max((len(r) for row in net.routes for r in row), default=1))
    route = np.zeros((p * p, deepest), dtype=np.int64)
    for s, row in enumerate(net.routes):
        for d, r in enumerate(row):
            route[s * p + d, : len(r)] = r
    conn = src * p + np.asarray(program.dst, dtype=np.int64)
    link = route[conn[op], np.minimum(hop, deepest - 1)]
    k = kind[op]
    link_chip = np.asarray([net.link_chip(i) for i in range(nlinks)], dtype=np.int64)
    on_link = k == TRANSFER
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
    return OpLog.from_columns((*net.names, REDUCE_ENGINE, HBM_ENGINE), STAGES, cols)


def arrival_ps(net: Network, log: OpLog) -> dict[int, int]:
    """When each transfer's last byte reached its destination: its last hop's end + latency."""
    is_link = (log.stage == SEND) | (log.stage == FORWARD)
    out: dict[int, int] = {}
    for op, end in zip(log.op[is_link].tolist(), log.end[is_link].tolist(), strict=True):
        out[op] = max(out.get(op, 0), end + net.latency_ps)
    return out
