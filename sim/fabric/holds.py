"""What each op of a fabric program holds: its own engine, its chip's HBM, and one burst."""

from __future__ import annotations

import numpy as np

from sim.fabric.network import Network
from sim.fabric.program import COPY, TRANSFER, FabricProgram, hbm_default


def op_ps(net: Network, kind: int, nbytes: int, hbm: int) -> tuple[int, int]:
    """Time of an op of ``nbytes`` on its own engine, and on its chip's HBM."""
    own = net.link_ps(nbytes) if kind == TRANSFER else net.reduce_ps(nbytes) if kind else 0
    if kind == COPY:
        own = 0
    return own, net.hbm_ps(hbm)


def op_holds(
    net: Network, program: FabricProgram
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Per op: time on its own engine, on its chip's HBM, until it ends (the longer), and
    for one burst (the streaming granule: ``hbm.burst_bytes``)."""
    if not len(program):
        return [], [], [], []
    code = np.zeros(len(program), dtype=np.int64)
    table = np.zeros((0, 1), dtype=np.int64)  # per code: the column values seen so far
    for col in (program.kind, program.nbytes, program.hbm):
        vals, inv = np.unique(np.asarray(col, dtype=np.int64), return_inverse=True)
        pairs, code = np.unique(code * len(vals) + inv.reshape(-1), return_inverse=True)
        code = code.reshape(-1)  # renumbered: codes stay below len(program)
        table = np.vstack([table[:, pairs // len(vals)], vals[pairs % len(vals)]])
    per_key = []
    for k, b, m in table.T.tolist():
        mem = hbm_default(k, b) if m < 0 else m
        a, h = op_ps(net, k, b, mem)
        g = min(b, net.burst_bytes)
        ga, gh = op_ps(net, k, g, mem * g // b if b else 0)
        per_key.append((a, h, max(a, h), max(ga, gh)))
    per_op = np.asarray(per_key, dtype=np.int64)[code]
    first, hbm, total, burst = (per_op[:, c].tolist() for c in range(4))
    return first, hbm, total, burst
