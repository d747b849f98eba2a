"""The event engine and the replay against the engine as it was before their speed work
(``tests/sim/engine_reference.py``, kept verbatim): every op-log column and every replayed
value identical, and the same error where one fails, on random programs (on uniform networks,
networks of dimensions with lanes, and switches, with and without contention) and on the
programs and logs of real collectives, including logs altered so that the replay refuses them
or falls back to its numpy loop."""

from __future__ import annotations

import dataclasses
from typing import Any

import engine_reference as ref
import numpy as np
import pytest
from fabric_oracle import random_program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim.collectives.run as run_module
import sim.collectives.verify as verify
import sim.fabric.simulate as simulate_module
from sim import load_topology
from sim.collectives import run_collective
from sim.collectives.catalog import collective_algorithms
from sim.fabric import FabricProgram, Network, build_network
from sim.fabric.events import simulate_events
from sim.fabric.holds import op_holds
from sim.fabric.program import op_routes
from sim.oplog import OpLog
from sim.topology import DimensionConfig, Topology

BASE = load_topology()
SHAPES = ("ring", "fully_connected", "switch", "torus2d")


def _outcome(fn: Any, *args: Any, **kw: Any) -> Any:
    """What a call gives: its result, or its error's type and message."""
    try:
        return fn(*args, **kw)
    except Exception as exc:  # the comparison is the point
        return (type(exc).__name__, str(exc))


def _same_log(old: Any, new: Any) -> None:
    if isinstance(old, tuple) or isinstance(new, tuple):
        assert old == new
        return
    assert isinstance(new, OpLog) and new.equals(old), new.first_difference(old)
    assert new.meta == old.meta and new.repeats == old.repeats


def _same_timing(net: Network, prog: FabricProgram, contention: bool) -> None:
    routes = _outcome(op_routes, net, prog)
    if isinstance(routes, tuple):
        return  # a program that names links the network does not have: not the engine's
    old_holds = _outcome(ref.op_holds, net, prog, routes)
    new_holds = _outcome(op_holds, net, prog, routes)
    assert old_holds == new_holds
    if isinstance(old_holds, tuple) and isinstance(old_holds[0], str):
        return
    old = _outcome(ref.simulate_events, net, prog, old_holds, contention=contention, routes=routes)
    new = _outcome(simulate_events, net, prog, new_holds, contention=contention, routes=routes)
    _same_log(old, new)


def _network(kind: str, p: int, lat: int, buffers: int, burst: int) -> Network:
    dims = {4: (2, 2), 6: (2, 3), 8: (2, 4)}.get(p, (1, p))
    net = build_network(BASE.replace_chips(count=p, topology=kind, torus_dims=dims))
    return dataclasses.replace(
        net,
        link_latencies_ps=(lat,) * len(net.links),
        staging_buffers=buffers,
        burst_bytes=burst,
    )


def _dims_network(rng: np.random.Generator) -> Network:
    dims = []
    for _ in range(int(rng.integers(1, 3))):
        shape = str(rng.choice(["ring", "fully_connected", "switch"]))
        size = int(rng.integers(2, 4))
        kw: dict[str, Any] = {"ports" if shape == "switch" else "links": int(rng.integers(1, 3))}
        bw = float(rng.choice([25, 50, 400]))
        lat = float(rng.choice([0, 0.007, 1, 250]))
        dims.append(DimensionConfig(shape, size, bw, lat, **kw))  # type: ignore[arg-type]
    count = int(np.prod([d.size for d in dims]))
    chips = dataclasses.replace(BASE.chips, dimensions=tuple(dims), count=count)
    net = build_network(dataclasses.replace(BASE, chips=chips))
    return dataclasses.replace(
        net,
        staging_buffers=int(rng.integers(1, 4)),
        burst_bytes=int(rng.choice([64, 256, 4096])),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(SHAPES),
    lat=st.sampled_from([0, 7, 1000, 250_000]),
    buffers=st.integers(1, 3),
    burst=st.sampled_from([64, 256, 4096]),
    size=st.integers(1, 150),
)
def test_the_engine_is_the_reference_on_random_programs(
    seed: int, kind: str, lat: int, buffers: int, burst: int, size: int
) -> None:
    """Random programs (ties at 0 latency, staging buffers that run out, deadlocks, spans that
    need part of a producer, accumulators) on uniform networks: the same log or error, with
    and without contention."""
    rng = np.random.default_rng(seed)
    p = 4 if kind == "torus2d" else int(rng.integers(2, 7))
    net = _network(kind, p, lat, buffers, burst)
    prog = random_program(rng, net.chips, size)
    for contention in (True, False):
        _same_timing(net, prog, contention)


@pytest.mark.parametrize("seed", range(4))
def test_the_engine_is_the_reference_on_dimensions_and_lanes(seed: int) -> None:
    """Random programs on lanes over networks of dimensions whose links differ."""
    rng = np.random.default_rng(7000 + seed)
    for _ in range(15):
        net = _dims_network(rng)
        if net.chips < 2:
            continue
        prog = random_program(rng, net.chips, int(rng.integers(1, 120)), lanes=4)
        for contention in (True, False):
            _same_timing(net, prog, contention)


def test_the_engine_refuses_what_the_reference_refuses() -> None:
    """Bad programs: the same error from both (a dependency on a later op, a consumer of no
    transfer it depends on, a transfer without links, a deadlock on staging buffers)."""
    from sim.fabric import COPY, REDUCTION, TRANSFER

    net = _network("ring", 3, 1000, 1, 256)
    later = FabricProgram()
    later.add(TRANSFER, 0, 1, 64, 0, (1,))
    later.add(TRANSFER, 0, 1, 64, 0, ())
    stray = FabricProgram()
    stray.add(TRANSFER, 0, 1, 64, 0, ())
    stray.add(REDUCTION, 1, 1, 64, 0, (), consumes=0)
    selfish = FabricProgram()
    selfish.add(TRANSFER, 0, 0, 64, 0, ())
    selfish.add(COPY, 0, 0, 64, 0, (0,), consumes=0)
    stuck = FabricProgram()  # two transfers on one pair, one buffer, consumed in reverse
    stuck.add(TRANSFER, 0, 1, 64, 0, ())
    stuck.add(TRANSFER, 0, 1, 64, 0, ())
    stuck.add(COPY, 1, 1, 64, 0, (1,), consumes=1)
    stuck.add(COPY, 1, 1, 64, 0, (0, 2), consumes=0)
    for prog in (later, stray, selfish, stuck):
        routes = op_routes(net, prog)
        holds = ref.op_holds(net, prog, routes)
        old = _outcome(ref.simulate_events, net, prog, holds, contention=True, routes=routes)
        assert isinstance(old, tuple)  # each of them fails
        _same_timing(net, prog, True)


# --- real collectives: the engine's and the replay's inputs, captured ---------------------------


def _captured(topo: Topology, nbytes: int, alg: str, coll: str, **kw: Any) -> dict[str, Any]:
    """One collective, keeping the arguments of its engine and replay calls."""
    got: dict[str, Any] = {}
    engine, rep = simulate_module.simulate_events, run_module.replay

    def events(net: Network, prog: FabricProgram, holds: Any, **how: Any) -> OpLog:
        got["engine"] = (net, prog, how)
        return engine(net, prog, holds, **how)

    def replayed(*args: Any) -> Any:
        got["replay"] = args
        return rep(*args)

    simulate_module.simulate_events, run_module.replay = events, replayed  # type: ignore
    try:
        got["run"] = run_collective(topo, nbytes, alg, coll, **kw)
    finally:
        simulate_module.simulate_events, run_module.replay = engine, rep
    return got


def _collectives() -> list[tuple[str, Topology, int, str, str, dict[str, Any]]]:
    out = []
    for shape in SHAPES:
        kw_t = {"torus_dims": [2, 4]} if shape == "torus2d" else {}
        topo = BASE.replace_chips(topology=shape, count=8, **kw_t)
        for coll in ("allreduce", "reduce_scatter", "all_gather", "broadcast", "alltoall"):
            for alg in collective_algorithms(coll, shape):
                for kw in ({}, {"protocol": "ll128"}) if coll == "allreduce" else ({},):
                    out.append((f"{shape}-{coll}-{alg}-{kw}", topo, 3 << 20, alg, coll, kw))
    mi = load_topology("mi300x-8")
    out.append(("mi300x-8-ring-16MiB", mi, 16 << 20, "ring", "allreduce", {}))
    out.append(("h100-nvls", load_topology("h100-sxm-8"), 1 << 20, "nvls", "allreduce", {}))
    ring = BASE.replace_chips(topology="ring", count=8)
    out.append(("ring-channels-4", ring, 3 << 20, "ring", "allreduce", {"channels": 4}))
    return out


COLLECTIVES = _collectives()


@pytest.mark.parametrize("case", COLLECTIVES, ids=[c[0] for c in COLLECTIVES])
def test_collectives_are_the_reference(case: tuple[Any, ...]) -> None:
    """Each collective's program timed by both engines, and its log replayed by both."""
    _label, topo, nbytes, alg, coll, kw = case
    got = _outcome(_captured, topo, nbytes, alg, coll, **kw)
    assert not isinstance(got, tuple), f"the catalog offers it, yet it fails: {got}"
    if "engine" in got:
        net, prog, how = got["engine"]
        _same_timing(net, prog, how["contention"])
    if "replay" in got:
        _same_replay(*got["replay"])


def _same_replay(schedule: Any, net: Network, compiled: Any, log: OpLog) -> None:
    old = _outcome(ref.replay, schedule, net, compiled, log)
    new = _outcome(verify.replay, schedule, net, compiled, log)
    if isinstance(old, tuple) or isinstance(new, tuple):
        assert old == new
        return
    for f in ("a", "b", "mask"):
        o, n = getattr(old, f), getattr(new, f)
        assert o.dtype == n.dtype and np.array_equal(o, n), f


def _altered(log: OpLog, rng: np.random.Generator) -> OpLog:
    """``log`` with its times or records disturbed: ends moved (consumers before their data,
    sends after their consumers, first hops after the last, consumers later), records dropped
    or repeated."""
    start, end = log.start.copy(), log.end.copy()
    cols = {c: getattr(log, c).copy() for c in ("chip", "engine", "stage", "op", "nbytes")}
    how = int(rng.integers(0, 6))
    pick = rng.choice(len(end), size=max(1, len(end) // 20), replace=False)
    if how == 0:  # some records end at random times
        end[pick] = rng.integers(0, int(end.max()) + 1, size=len(pick))
        start[pick] = np.minimum(start[pick], end[pick])
    elif how == 1:  # every record's times reversed: data used before it is sent
        start, end = end.max() - end, end.max() - start
    if how == 4:  # first hops end last: a multi-hop transfer's consumer replays before its send
        first_hop = cols["stage"] == verify.SEND
        end[first_hop] = end.max() + 1
    if how == 5:  # consumers end later, by up to the whole run: still valid, another order
        users = (cols["stage"] != verify.SEND) & (cols["stage"] != verify.FORWARD)
        end[users] += rng.integers(0, int(end.max()) + 1, size=int(users.sum()))
    keep = np.ones(len(end), dtype=bool)
    if how == 2:  # some records missing
        keep[pick] = False
    idx = np.flatnonzero(keep)
    if how == 3:  # some records twice
        idx = np.sort(np.concatenate([idx, pick]))
    return dataclasses.replace(
        log,
        start=start[idx],
        end=end[idx],
        **{c: v[idx] for c, v in cols.items()},
        macs=log.macs[idx],
        tile=log.tile[idx],
    )


@pytest.mark.parametrize("seed", range(3))
def test_the_replay_is_the_reference_on_altered_logs(seed: int) -> None:
    """Logs that break the rules (data used before it arrives, a transfer that never ran, one
    sent twice): the same result or the same error from both replays."""
    rng = np.random.default_rng(seed)
    for _label, topo, nbytes, alg, coll, kw in COLLECTIVES[seed::6]:
        got = _outcome(_captured, topo, nbytes, alg, coll, **kw)
        if isinstance(got, tuple) or "replay" not in got:
            continue
        schedule, net, compiled, log = got["replay"]
        for _ in range(6):
            _same_replay(schedule, net, compiled, _altered(log, rng))


def test_the_list_replay_runs_where_it_should_and_wraps_as_numpy() -> None:
    """The list replay takes the one-piece ops of a ring on 8 chips; it declines a log whose
    sums leave int64 (numpy's wrapped values then stand, as before)."""
    ring = BASE.replace_chips(topology="ring", count=8)
    got = _captured(ring, 3 << 20, "ring", "allreduce", protocol="ll128")
    schedule, net, compiled, log = got["replay"]
    calls: list[Any] = []
    inner = verify._replay_in_lists

    def spy(*args: Any) -> Any:
        calls.append(inner(*args))
        return calls[-1]

    verify._replay_in_lists = spy  # type: ignore[assignment]
    try:
        verify.replay(schedule, net, compiled, log)
    finally:
        verify._replay_in_lists = inner  # type: ignore[assignment]
    assert calls and calls[0] is not None
    # every chip starting near the top of int64: the sums wrap in numpy, not in lists
    pieces = len(compiled.bounds) - 1
    big = np.full((schedule.chips, pieces), (1 << 62) + 12345, dtype=np.int64)
    zero = np.zeros_like(big)
    sends = log.stage == verify.SEND
    users = (log.stage == verify.REDUCE) | (log.stage == verify.COPY_STAGE)
    seq = np.concatenate([log.op[sends], log.op[users]])
    order = np.lexsort(
        (
            seq,
            np.r_[np.ones(sends.sum()), np.zeros(users.sum())],
            np.r_[log.end[sends], log.end[users]],
        )
    )
    inputs = (big[:, 0], zero[:, 0], zero[:, 0])
    assert inner(compiled, seq[order], (big, zero, zero), inputs) is None
    small = np.ones_like(big)
    assert inner(compiled, seq[order], (small, zero, zero), (small[:, 0], *inputs[1:])) is not None


# --- the streaming rule fixed before the loop ----------------------------------------------------


def _old_first_burst(
    prog: FabricProgram, total: list[int], i: int, j: int, when: tuple[int, int, int, int]
) -> int:
    """The first burst dependent ``j`` gets from ``i`` by the rule as the loop read it per
    edge before it was fixed beforehand (``events.produced``, verbatim but for the names,
    with ADR 0034's overlap test: a dependent that shares no element needs no part)."""
    begin, end, grain, now = when
    spans = prog.span
    lo, hi = prog.seen_span.get((i, j), spans[i])
    width = hi - lo
    x, y = spans[j]
    if width > 0 and x < hi and lo < y and (x > lo or y < hi):  # j needs part of i's span
        a = max(x, lo) - lo
        if a >= min(y, hi) - lo:
            a = 0
        first_burst = begin + (end - begin) * a // width + grain
        last = end
        first_burst -= total[j] * (max(x, lo) - x) // (y - x)
    else:
        first_burst, last = begin + grain, end
    if first_burst > last:
        first_burst = last
    if first_burst < now:
        first_burst = now
    return first_burst


def _new_first_bursts(
    streams: tuple[list[int], ...], i: int, when: tuple[int, int, int, int]
) -> list[tuple[int, int]]:
    """(dependent, first burst) of every edge of ``i`` as ``produced`` reads _streams."""
    first_edge, first_part, edge_j, edge_a, edge_w, edge_sub = streams
    begin, end, grain, now = when
    out = []
    for e in range(first_edge[i], first_edge[i + 1]):
        got = begin + grain
        if e >= first_part[i]:
            got -= edge_sub[e]
            if edge_a[e]:
                got += (end - begin) * edge_a[e] // edge_w[e]
        out.append((edge_j[e], max(min(got, end), now)))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_streaming_rule_fixed_before_the_loop_is_the_per_edge_rule(seed: int) -> None:
    """events._streams against the rule as produced read it per edge: random programs with
    seen spans on random edges (a quotient's stand-ins), holds from ps to past int64 when
    multiplied by an offset (Python's integers then), at random times; every edge once, the
    same first burst; the same errors as dependents_of on a bad program."""
    from sim.fabric.events import _streams
    from sim.fabric.program import dependents_of

    rng = np.random.default_rng(8100 + seed)
    for _ in range(20):
        prog = random_program(rng, int(rng.integers(2, 6)), int(rng.integers(1, 90)))
        n = len(prog)
        scale = int(rng.choice([1, 1000, 10**9, 10**14]))  # ps and elements: int64 each
        total = [int(v) * scale for v in rng.integers(0, 5000, size=n)]
        prog.span = [
            (lo * scale, hi * scale) if rng.random() < 0.3 else (lo, hi) for lo, hi in prog.span
        ]
        for j, deps in enumerate(prog.deps):
            for i in deps:
                if rng.random() < 0.3:
                    lo = int(rng.integers(0, 9))
                    prog.seen_span[i, j] = (lo, lo + int(rng.integers(0, 6)))
        streams = _streams(prog, total)
        dependents = dependents_of(prog)
        for i in range(n):
            when = tuple(int(v) * scale for v in rng.integers(0, 10**4, size=4))
            got = _new_first_bursts(streams, i, when)  # type: ignore[arg-type]
            want = [(j, _old_first_burst(prog, total, i, j, when)) for j in dependents[i]]  # type: ignore[arg-type]
            assert sorted(got) == sorted(want)
    later = FabricProgram()
    later.add(0, 0, 1, 64, 0, ())
    later.add(0, 0, 1, 64, 0, (0, 2))
    later.add(0, 0, 1, 64, 0, ())
    stray = FabricProgram()
    stray.add(0, 0, 1, 64, 0, ())
    stray.add(1, 1, 1, 64, 0, (), consumes=0)
    for bad in (later, stray):
        assert _outcome(_streams, bad, [0] * len(bad)) == _outcome(dependents_of, bad)
        assert isinstance(_outcome(dependents_of, bad), tuple)
