"""Ops at a switch node: a switch that reduces and multicasts (docs/adr/0021 decision 3,
NVLink SHARP's ``multimem.ld_reduce`` and ``multimem.st``).

A fabric program may name a switch node (node ids after the chips, :mod:`sim.fabric.network`)
as an op's place. The rules, beside those of :mod:`sim.fabric.simulate`:

* A **transfer** to or from a switch crosses the one link between its two nodes, on its lane
  (:func:`sim.fabric.program.op_routes`): a chip's port up, or the switch's port down to a
  chip. A multicast is one transfer per destination, each on its own down link.
* A **reduction at a switch** (``src == dst ==`` the switch) consumes a transfer that arrived
  at that switch and runs on the **reduce engine of the port it came in by**: one engine per
  port link into the switch, a bandwidth server at the switch dimension's
  ``switch_reduce_gbs`` (``nbytes / switch_reduce_gbs``), first come, first served like a
  chip's reduce engine, streaming its input at burst granularity. Reductions into one
  accumulator (``FabricProgram.into``: the ``p`` copies of a chunk) add in the order their
  data comes in, each ending one burst after the one before (ADR 0016); an op that needs the
  sum depends on all of them, so it starts once the first burst of every copy is reduced and
  ends no earlier than one burst after the last. A switch whose ``switch_reduce_gbs`` is 0
  refuses it.
* A **copy at a switch** is where data that only passes through lands (a multicast's
  source): it takes no engine time and holds **no staging buffer**, since the switch
  forwards what comes in as it comes in, burst by burst (its burst is that of the transfer
  it consumes): the transfers out that depend on it start one burst after the first burst
  is there. The switch's buffering of a multicast whose receivers have no
  staging buffer free is not modelled (the chips' buffers bound it).
* A switch has **no HBM**: an op at a switch holds none (an op that says otherwise is an
  error).
* **Staging buffers** of a transfer to or from a switch are per port link (each port has
  ``staging_buffers`` of its own), not per (sender, receiver) pair.

The op log records a reduction at a switch with the switch as its chip, the stage
``switch_reduce`` and its port's engine, named ``reduce@link3->sw#1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sim.fabric.network import Network
from sim.fabric.program import COPY, REDUCTION, TRANSFER, FabricProgram
from sim.limits import MAX_CODE
from sim.units import ps_for_bytes

SWITCH_REDUCE = 4  # the op-log stage of a reduction at a switch (after sim.fabric.log's four)
SWITCH_REDUCE_STAGE = "switch_reduce"


def at_switch(net: Network, program: FabricProgram) -> bool:
    """Whether ``program`` names a switch node (any op's ``src`` or ``dst`` is not a chip)."""
    n = net.chips
    return max(program.src, default=0) >= n or max(program.dst, default=0) >= n


def up_links(net: Network) -> tuple[int, ...]:
    """The port links into a switch (chip to switch, every lane), in link order: the ports
    whose reduce engines reductions at a switch run on."""
    return tuple(k for k, (u, v) in enumerate(net.links) if u < net.chips <= v)


def _rate(net: Network, node: int, op: int) -> int:
    """The reduce rate of switch ``node`` (as an index into ``switch_reduce_bws``)."""
    at = node - net.chips
    if at >= len(net.switch_reduce_bws) or net.switch_reduce_bws[at] <= 0:
        raise ValueError(
            f"op {op} reduces at switch node {node}, which does not reduce: set "
            "chips.dimensions[k].switch_reduce_gbs > 0 on its switch dimension"
        )
    return at


@dataclass(frozen=True)
class SwitchPlan:
    """What the event loop needs of a program with ops at a switch: per op its staging pool
    (``conn``: a (sender, receiver) pair of chips, ``s * p + d``, or ``p * p +`` the link of
    a transfer to or from a switch), how many pools, the transfers that take no staging
    buffer, and the reduce engine (index into :func:`up_links`) of each reduction at a switch."""

    conn: list[int]
    pools: int
    unstaged: tuple[int, ...]
    engine: dict[int, int]
    engines: int

    def place(self, res_of: list[tuple[int, ...]], servers: int) -> int:
        """Put each reduction at a switch on its port's engine, servers ``servers..``; returns
        the new number of servers."""
        for i, e in self.engine.items():
            res_of[i] = (servers + e,)
        return servers + self.engines


def switch_plan(net: Network, program: FabricProgram, routes: list[tuple[int, ...]]) -> SwitchPlan:
    """The :class:`SwitchPlan` of ``program`` (module docstring), its switch ops checked."""
    p = net.chips
    engine_of = {k: e for e, k in enumerate(up_links(net))}
    conn = [0] * len(program)
    unstaged = []
    engine: dict[int, int] = {}
    kind, src, dst, consumes = program.kind, program.src, program.dst, program.consumes
    for i, k in enumerate(kind):
        s, d = src[i], dst[i]
        if k == TRANSFER:
            conn[i] = s * p + d if s < p and d < p else p * p + routes[i][0]
            continue
        if s < p:
            continue
        if d != s:
            raise ValueError(f"op {i} at switch node {s} names {d} as its destination: use {s}")
        t = consumes[i]
        if k == COPY and t >= 0:
            unstaged.append(t)
        if k != REDUCTION:
            continue
        _rate(net, s, i)
        if t < 0 or dst[t] != s:
            raise ValueError(
                f"op {i} reduces at switch node {s}: it must consume a transfer that arrives "
                "there (its engine is the port the data came in by)"
            )
        engine[i] = engine_of[routes[t][-1]]
    return SwitchPlan(conn, p * p + len(net.links), tuple(unstaged), engine, len(engine_of))


def switch_holds(
    net: Network,
    program: FabricProgram,
    holds: tuple[list[int], list[int], list[int], list[int]],
) -> None:
    """Correct ``holds`` (own, HBM, total, burst per op, :func:`sim.fabric.holds.op_holds`) in
    place for ops at a switch: no HBM; a reduction at the switch's rate, a copy in no time."""
    first, hbm, total, burst = holds
    chips, grain = net.chips, net.burst_bytes
    rates: dict[tuple[int, int], tuple[int, int]] = {}
    for i, (k, s) in enumerate(zip(program.kind, program.src, strict=True)):
        if s < chips:
            continue
        if program.hbm[i] > 0:
            raise ValueError(
                f"op {i} at switch node {s} moves {program.hbm[i]} bytes of HBM; a switch has "
                "none: give it hbm 0"
            )
        if k == TRANSFER:
            hbm[i], total[i] = 0, first[i]
            continue
        b = program.nbytes[i]
        if k == COPY:  # it forwards each burst as it has come in
            t = program.consumes[i]
            first[i] = hbm[i] = total[i] = 0
            burst[i] = burst[t] if t >= 0 else 0
            continue
        key = (_rate(net, s, i), b)
        if key not in rates:
            bw = net.switch_reduce_bws[key[0]]
            rates[key] = (ps_for_bytes(b, bw), ps_for_bytes(min(b, grain), bw))
        first[i], burst[i] = rates[key]
        hbm[i], total[i] = 0, first[i]


def switch_log(
    net: Network,
    program: FabricProgram,
    routes: list[tuple[int, ...]],
    op: npt.NDArray[np.int64],
    cols: dict[str, npt.NDArray[np.int64]],
    names: tuple[str, ...],
    stages: tuple[str, ...],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The op log's engines and stages with the switches' reduce engines (``op``: each
    record's op; ``cols``' engine and stage are set in place for reductions at a switch)."""
    ups = up_links(net)
    if len(names) + len(ups) > MAX_CODE:
        raise ValueError(
            f"{len(names) + len(ups)} engines (links, the reduce engines of {len(ups)} switch "
            f"ports) do not fit the op log's int16 codes ({MAX_CODE}): use fewer ports"
        )
    engine_of = {k: e for e, k in enumerate(ups)}
    kind = np.asarray(program.kind, dtype=np.int64)[op]
    src = np.asarray(program.src, dtype=np.int64)[op]
    at = np.flatnonzero((kind == REDUCTION) & (src >= net.chips))
    consumes = program.consumes
    port = [engine_of[routes[consumes[i]][-1]] for i in op[at].tolist()]
    cols["engine"][at] = len(names) + np.asarray(port, dtype=np.int64)
    cols["stage"][at] = SWITCH_REDUCE
    port_names = tuple(f"reduce@{net.names[k]}" for k in ups)
    return (*names, *port_names), (*stages, SWITCH_REDUCE_STAGE)
