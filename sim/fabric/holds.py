"""What each op of a fabric program holds: its own engine, its chip's HBM, and one burst; and,
on a network whose links differ, a transfer's time on each link of its route."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from sim.fabric.network import Network
from sim.fabric.program import COPY, TRANSFER, FabricProgram, hbm_default
from sim.fabric.switch_ops import at_switch, switch_holds


def op_ps(net: Network, kind: int, nbytes: int, hbm: int, link: int | None) -> tuple[int, int]:
    """Time of an op of ``nbytes`` on its own engine (a transfer: on ``link``, or on any link
    of a uniform network when None), and on its chip's HBM."""
    if kind == TRANSFER:
        own = net.link_ps(nbytes) if link is None else net.link_ps(nbytes, link)
    else:
        own = 0 if kind == COPY else net.reduce_ps(nbytes)
    return own, net.hbm_ps(hbm)


def op_holds(
    net: Network, program: FabricProgram, routes: list[tuple[int, ...]] | None = None
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Per op: time on its own engine (a transfer: on the first link of its route, one of
    ``routes``, needed when links differ), on its chip's HBM, until it ends (the longer), and
    for one burst (the streaming granule: ``hbm.burst_bytes``)."""
    if not len(program):
        return [], [], [], []
    columns = [program.kind, program.nbytes, program.hbm]
    links: list[int | None] = [None]  # per bandwidth code: a link of that bandwidth
    if not net.uniform:
        if routes is None:
            raise ValueError("op_holds on a network whose links differ needs the ops' routes")
        code_of: dict[Fraction, int] = {}
        links = []
        for k, bw in enumerate(net.link_bws):
            if bw not in code_of:
                code_of[bw] = len(links)
                links.append(k)
        # per link its bandwidth's code (a Fraction hashed per link, not per op)
        link_code = [code_of[bw] for bw in net.link_bws]
        columns.append([link_code[r[0]] if r else 0 for r in routes])
    code = np.zeros(len(program), dtype=np.int64)
    table = np.zeros((0, 1), dtype=np.int64)  # per code: the column values seen so far
    for col in columns:
        vals, inv = np.unique(np.asarray(col, dtype=np.int64), return_inverse=True)
        pairs, code = np.unique(code * len(vals) + inv.reshape(-1), return_inverse=True)
        code = code.reshape(-1)  # renumbered: codes stay below len(program)
        table = np.vstack([table[:, pairs // len(vals)], vals[pairs % len(vals)]])
    per_key = []
    for k, b, m, *bw_code in table.T.tolist():
        link = links[bw_code[0]] if bw_code else None
        mem = hbm_default(k, b) if m < 0 else m
        a, h = op_ps(net, k, b, mem, link)
        g = min(b, net.burst_bytes)
        ga, gh = op_ps(net, k, g, mem * g // b if b else 0, link)
        per_key.append((a, h, max(a, h), max(ga, gh)))
    per_op = np.asarray(per_key, dtype=np.int64)[code]
    first, hbm, total, burst = (per_op[:, c].tolist() for c in range(4))
    if at_switch(net, program):  # ops at a switch: no HBM, the switch's reduce rate
        switch_holds(net, program, (first, hbm, total, burst))
    return first, hbm, total, burst


def hop_holds(
    net: Network,
    program: FabricProgram,
    routes: list[tuple[int, ...]],
    burst: list[int],
) -> tuple[list[tuple[int, ...]], list[int]]:
    """On a network whose links differ: per transfer, its time on each link of its route
    (``bytes / that link's bandwidth``), and the grain its data reaches the receiver at: one
    burst through the slowest of its links (or its HBM grain, ``burst``, when that is longer);
    other ops: ``()`` and their ``burst``."""
    cache: dict[tuple[int, int], int] = {}
    grain_bytes = net.burst_bytes
    # links by the class of what link_ps reads of them, bandwidth and setup (an int key:
    # hashing a Fraction per hop cost more than the rest of this loop; the setup too, which
    # a key of the bandwidth alone left out)
    setup = net.link_setup_ps or (0,) * len(net.link_bws)
    classes: dict[tuple[Fraction, int], int] = {}
    cls = [classes.setdefault(k, len(classes)) for k in zip(net.link_bws, setup, strict=True)]

    def ps(nbytes: int, link: int) -> int:
        key = (nbytes, cls[link])
        got = cache.get(key)
        if got is None:
            got = cache[key] = net.link_ps(nbytes, link)
        return got

    # an op's holds follow from its bytes, its burst and its links' classes: each distinct
    # (bytes, burst, classes of the route) worked out once (80 k ops, a few dozen distinct,
    # on one rail of h100 at p = 256)
    route_cls: dict[tuple[int, ...], tuple[int, ...]] = {}
    done: dict[tuple[int, int, tuple[int, ...]], tuple[tuple[int, ...], int]] = {}
    own: list[tuple[int, ...]] = []
    grain: list[int] = []
    for r, b, g in zip(routes, program.nbytes, burst, strict=True):
        rc = route_cls.get(r)
        if rc is None:
            rc = route_cls[r] = tuple(cls[k] for k in r)
        key = (b, g, rc)
        got = done.get(key)
        if got is None:
            got = done[key] = (
                tuple(ps(b, k) for k in r),
                max([g, *(ps(min(b, grain_bytes), k) for k in r)]),
            )
        own.append(got[0])
        grain.append(got[1])
    return own, grain
