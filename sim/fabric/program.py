"""A fabric program: transfers, reductions and copies in program order, and the checks of its
dependencies and accumulators (the timing is :func:`sim.fabric.simulate.simulate_fabric`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from sim.fabric.network import Network

TRANSFER, REDUCTION, COPY = 0, 1, 2  # FabricProgram op kinds


@dataclass
class FabricProgram:
    """Transfers, reductions and copies in program order, as parallel lists (op id = index).

    ``kind[i]`` is :data:`TRANSFER` (``src -> dst``), :data:`REDUCTION` or :data:`COPY` (on
    chip ``src``); ``deps[i]`` are ids of earlier ops whose results op ``i`` needs.
    ``consumes[i]`` is the transfer whose staged data a reduction or copy drains (-1: none);
    while it is pending that transfer holds one staging buffer at its receiver.
    ``span[i]`` is the element range op ``i`` moves (``(0, 0)``: unknown, treat as whole);
    a dependent needs a producer only for the part of its span they share.
    ``hbm[i]`` is the bytes op ``i`` moves through its chip's HBM (-1: the default, see
    :func:`hbm_default`); a transfer that forwards a chunk its chip has just reduced or
    received streams it from on-chip buffers and moves 0.
    ``into[i]`` (reductions; -1: none) names an **accumulator**, by the id of its first
    reduction: reductions with the same ``into`` add their data into the same elements and
    do not depend on each other. Sums commute, so they add in the order they start (the
    order their data comes in), each ending no earlier than one burst after the one before
    it into the accumulator (ADR 0016); an op that needs the sum depends on all of them.
    ``seen_span[(d, j)]``, where given, is the span dependent ``j`` sees producer ``d`` move
    instead of ``span[d]``: a quotient's stand-in for a neighbour's op that moves another
    range (:mod:`sim.fabric.quotient`, ADR 0032); empty in every full program.
    """

    kind: list[int] = field(default_factory=list)
    src: list[int] = field(default_factory=list)
    dst: list[int] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    deps: list[tuple[int, ...]] = field(default_factory=list)
    consumes: list[int] = field(default_factory=list)
    hbm: list[int] = field(default_factory=list)
    span: list[tuple[int, int]] = field(default_factory=list)
    into: list[int] = field(default_factory=list)
    lane: list[int] = field(default_factory=list)
    seen_span: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)

    def add(
        self,
        kind: int,
        src: int,
        dst: int,
        nbytes: int,
        step: int,
        deps: tuple[int, ...],
        consumes: int = -1,
        hbm: int = -1,
        span: tuple[int, int] = (0, 0),
        into: int = -1,
        lane: int = 0,
    ) -> int:
        self.kind.append(kind)
        self.src.append(src)
        self.dst.append(dst)
        self.nbytes.append(nbytes)
        self.step.append(step)
        self.deps.append(deps)
        self.consumes.append(consumes)
        self.hbm.append(hbm)
        self.span.append(span)
        self.into.append(into)
        if lane or self.lane:  # the list stays empty while every op is on lane 0
            self.lane.extend([0] * (len(self.kind) - 1 - len(self.lane)))
            self.lane.append(lane)
        return len(self.kind) - 1

    def __len__(self) -> int:
        return len(self.kind)

    def copy(self) -> FabricProgram:
        """A copy whose columns can be changed without changing this one's."""
        return FabricProgram(
            **{f.name: type(getattr(self, f.name))(getattr(self, f.name)) for f in fields(self)}
        )


def hbm_default(kind: int, nbytes: int) -> int:
    """HBM bytes of an op: a send reads its data, a copy writes it, a reduction reads the local
    operand and writes the sum (the received operand is in a staging buffer)."""
    return 2 * nbytes if kind == REDUCTION else nbytes


def dependents_of(program: FabricProgram) -> list[list[int]]:
    dependents: list[list[int]] = [[] for _ in range(len(program))]
    for i, deps in enumerate(program.deps):
        for d in deps:
            if not 0 <= d < i:
                raise ValueError(f"op {i} depends on op {d}; dependencies must be earlier ops")
            dependents[d].append(i)
    for i, t in enumerate(program.consumes):
        if t >= 0 and (t >= i or program.kind[t] != TRANSFER or t not in program.deps[i]):
            raise ValueError(
                f"op {i} consumes op {t}: it must be an earlier transfer it depends on"
            )
    return dependents


def accumulators(program: FabricProgram) -> list[int]:
    """``program.into`` checked (a reduction names the first reduction of its accumulator,
    which names itself), or all -1 when the program gives none."""
    n = len(program)
    if not program.into:
        return [-1] * n
    into = program.into
    if len(into) != n:
        raise ValueError(f"program has {n} ops but {len(into)} accumulator entries ('into')")
    g = np.asarray(into, dtype=np.int64)
    ops = np.flatnonzero(g >= 0)
    kind = np.asarray(program.kind, dtype=np.int64)[ops]
    bad = (g[ops] > ops) | (kind != REDUCTION)
    bad |= g[np.minimum(g[ops], n - 1)] != g[ops]
    if bad.any():
        i = int(ops[np.argmax(bad)])
        raise ValueError(
            f"op {i} adds into accumulator {into[i]}: it must be a reduction and {into[i]} the "
            "first, earlier reduction of that accumulator (into[g] == g)"
        )
    return into


def lanes_of(program: FabricProgram) -> list[int]:
    """``program.lane`` checked (one entry per op, none negative), or all 0 when it gives none."""
    n = len(program)
    if not program.lane:
        return [0] * n
    if len(program.lane) != n:
        raise ValueError(f"program has {n} ops but {len(program.lane)} lane entries ('lane')")
    if min(program.lane) < 0:
        i = program.lane.index(min(program.lane))
        raise ValueError(f"op {i} is on lane {program.lane[i]}; lanes are 0 or more")
    return list(program.lane)


def op_routes(net: Network, program: FabricProgram) -> list[tuple[int, ...]]:
    """Per op: the links it crosses (a transfer: its pair's route on its lane), or ``()``."""
    routes = net.routes
    lanes = lanes_of(program)
    if max(program.src, default=0) >= net.chips or max(program.dst, default=0) >= net.chips:
        return _node_routes(net, program, lanes)  # ops at a switch (sim.fabric.switch_ops)
    if not any(lanes):
        return [
            routes[s][d] if k == TRANSFER else ()
            for k, s, d in zip(program.kind, program.src, program.dst, strict=True)
        ]
    return [
        net.route(s, d, lane) if k == TRANSFER else ()
        for k, s, d, lane in zip(program.kind, program.src, program.dst, lanes, strict=True)
    ]


def _node_routes(net: Network, program: FabricProgram, lanes: list[int]) -> list[tuple[int, ...]]:
    """:func:`op_routes` of a program that names switch nodes: a transfer to or from a switch
    crosses the one link between its two nodes, on its lane; chip to chip, its route."""
    lane0: dict[tuple[int, int], int] = {}
    for k, uv in enumerate(net.links):  # lane 0's links come first
        lane0.setdefault(uv, k)
    out: list[tuple[int, ...]] = []
    for i, (k, s, d) in enumerate(zip(program.kind, program.src, program.dst, strict=True)):
        if k != TRANSFER:
            out.append(())
        elif s < net.chips and d < net.chips:
            out.append(net.route(s, d, lanes[i]))
        elif (s, d) not in lane0:
            raise ValueError(f"op {i}: transfer {s}->{d} names a switch it has no link with")
        else:
            g = net.parallel[lane0[s, d]] if net.parallel else (lane0[s, d],)
            out.append((g[lanes[i] % len(g)],))
    return out
