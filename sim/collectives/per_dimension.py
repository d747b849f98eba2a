"""The per-dimension alpha-beta model and the lower bounds of a collective on a network of
dimensions (docs/adr/0021; the cluster-scale issue), where links differ in bandwidth and
latency from one dimension to the next, so the one-value model of
:mod:`sim.collectives.steps` (``model_costs``) refuses them.

**Model** (:func:`dimension_model_ps`). The algorithm's own schedule, step by step. Step
``i`` costs ``alpha_i``, the longest route latency of its messages (each hop's
``link_latency_ns``, plus ``nic_latency_ns`` at both ends of a switch traversal), and
``beta_i``, its busiest resource: the bytes a link carries in the step over that link's
bandwidth (the dimension's ``link_bw_gbs``), or the bytes a chip reduces (``1 /
reduce_gbs``) or moves through its HBM. A message may leave once one of its chunks has all
its data in (its own data is there from the start; data another step wrote, ``alpha``
after that step started, plus the share of that step's time before those elements, since
chunks stream, plus one burst ``g``, and no earlier than that share of its receivers'
time, from when their engines and HBM begin on it to its end); it cannot end before its
data has all come in; a
pair's chunks wait for the receiver's staging buffers, which fly back after the chunk they
held is consumed (``k`` chunks through ``b`` buffers take ``k / b`` credit round trips at
least). An engine or a chip's HBM serves one step at a time; a link serves chunks
(``sent_i`` below). A step starts when its data is ready and ends ``beta_i`` later at the
earliest:

    ready_i = max over messages of  max(start_j + alpha_j + g + lo_frac * (sent_j - start_j),
                                        recv_j + g + lo_frac * (end_j - recv_j)),
    recv_j  = max(start_j + alpha_j, when its receiver's engine and HBM are free for it)
    start_i = max(ready_i, first chunk of step i on its first hop)
    end_i   = max(start_i + beta_i, last_i, sent_i, free(engines, HBM of step i)),
    last_i  = max end_j + alpha_j + g over its data

``sent_i``: the links carry chunks first come, first served, each chunk once all of its
elements are in (a chunk of a message made of the chip's own block and a piece that is
still arriving waits for that piece, and a chunk that straddles pieces from two senders
for the later one; the sender's other chunks go first), each into the
first time from then that its link is idle for it: a later step's chunk goes while an
earlier step's waits for its data. A chunk reaches its next hop one latency after it
started on this one (cut-through), so the chunks several senders send one receiver queue
at its port. ``g`` is one burst of the message, or its whole chunk when that is smaller
(small messages forward chunk by chunk), through its slowest link and into the receiver
(a reduction: its engine or HBM's read and write; a copy: HBM); under a protocol with a
handshake per chunk, the last burst of a step's data holds its link for it too, so
``last_i`` and the end add it. The collective ends when the last step's data has arrived:
``max_i end_i + alpha_i + g``.
On a ring of ``S`` steps of ``m`` bytes this is ``S max(alpha, m beta) + min(alpha, m beta)``
up to ``g``: ``steps x (latency + NIC) + bytes / bandwidth`` where latency dominates, the
pipelined bandwidth term where bytes do.

**Bounds** (:func:`dimension_bounds_ps`), true for any schedule of the collective on the
machine (no run can beat them):

* bandwidth, per level ``k`` (``k = 0``: each chip alone; ``k >= 1``: each *block* of the
  ``B`` chips spanned by dimensions ``0..k-1``, ``N = p / B`` blocks): every element of an
  allreduce must cross between blocks at least ``2 (N - 1)`` times in all (one-way
  gossip: ``N - 1`` transfers to combine ``N`` inputs and ``N - 1`` to spread the result;
  a block's inside is free), through the ``N B`` chips' links of dimensions ``>= k``:
  ``2 (N-1)/N n / (B sum_{d>=k} out_bw_d)``. When a switch of those dimensions reduces
  (``switch_reduce_gbs > 0``) only ``n`` must leave each block: ``n / (B sum out_bw)``.
  ``reduce_scatter`` and ``all_gather``: ``(N-1)/N n`` must leave (reach) each block.
* latency: the longest shortest route (dimension-ordered routes are shortest: a digit
  changes only on its own dimension's links, a ring digit by one per hop).
* reduce: ``(p-1)/p n / reduce_gbs`` (``p - 1`` additions per element over ``p``
  engines; 0 when a switch reduces); HBM: each chip reads its input and writes its result
  once: ``2 n`` (allreduce), ``n + n/p`` (reduce_scatter), ``n`` (all_gather: its own block
  stays in place, it reads ``n/p`` and writes the rest).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from sim.collectives.algorithms import build_schedule
from sim.collectives.compile import chunks
from sim.collectives.hierarchical import HIERARCHICAL_ALGORITHMS, dimension_groups
from sim.collectives.protocols import choose_protocol, protocol_network
from sim.collectives.schedule import CollectiveError, Message, Range, Schedule
from sim.fabric import Network, build_network
from sim.topology import Topology, dimensions_of

__all__ = [
    "HIERARCHICAL_ALGORITHMS",
    "DimensionBounds",
    "DimensionModel",
    "dimension_bounds_ps",
    "dimension_model_ps",
    "model_fields",
]


# per message: start, end, alpha, chunks, sharing, burst, handshake, when its links have sent
# it, when its receiver begins on it
Rec = tuple[float, float, float, int, int, float, float, float, float]
# per chunk: ready, its place in program order (chunk i of message m: (i, m), the step's
# messages take turns one chunk each, as the compiled program orders them), route, bytes
Chunk = tuple[float, tuple[int, int], tuple[int, ...], int]


@dataclass(frozen=True)
class DimensionModel:
    """The per-dimension model of one collective: its time, the textbook sum (every step
    ``alpha_i + beta_i``, no pipelining), and per step ``(alpha, beta, start, end)`` in ps."""

    time_ps: float
    textbook_ps: float
    steps: tuple[tuple[float, float, float, float], ...]


def _route_latency(net: Network, src: int, dst: int) -> int:
    return sum(net.link_latencies_ps[k] for k in net.routes[src][dst])


def dimension_model_ps(
    topo: Topology,
    algorithm: str,
    nbytes: int,
    collective: str = "allreduce",
    *,
    chunk_bytes: int | None = None,
    network: Network | None = None,
) -> DimensionModel:
    """The per-dimension model (module docstring) of ``algorithm`` on ``topo``."""
    net = network or build_network(topo)
    schedule = build_schedule(
        topo, nbytes, algorithm, collective, chunk_bytes=chunk_bytes, network=net
    )
    return _walk(topo, net, schedule)


def _walk(topo: Topology, net: Network, schedule: Schedule) -> DimensionModel:
    bpe = schedule.bytes_per_element
    gamma = 1000.0 / float(topo.chips.reduce_bw)
    mem = 1000.0 / float(topo.hbm.bw)
    burst = topo.hbm.burst_bytes
    link_beta = [1000.0 / float(bw) for bw in net.link_bws]
    lat = net.link_latencies_ps
    free: dict[object, float] = {}  # per engine and HBM: when it has done its work so far
    busy: dict[int, tuple[list[float], list[float]]] = {}  # per link: when it is busy
    credits: dict[tuple[int, int, int], list[float]] = {}  # per pair: when each buffer is back
    buffers = net.staging_buffers
    pieces: dict[Range, list[Range]] = {}  # a message's range -> its chunks
    recs: list[Rec] = []
    written: list[list[tuple[int, int, int]]] = [[] for _ in range(schedule.chips)]
    rows: list[tuple[float, float, float, float]] = []
    finish = textbook = 0.0
    for step in schedule.steps:
        plans: list[tuple[Message, dict[object, float], float, float, float, int]] = []
        work: dict[object, float] = {}
        count: dict[int, int] = {}  # messages per link in this step (they take turns by chunk)
        pair_chunks: dict[tuple[int, int, int], int] = {}
        queue: list[Chunk] = []
        for m in step:
            for x in net.route(m.src, m.dst, m.lane):
                count[x] = count.get(x, 0) + 1
        for m in step:
            nb = (m.hi - m.lo) * bpe
            route = net.route(m.src, m.dst, m.lane)
            cs = pieces.get((m.lo, m.hi))
            if cs is None:
                cs = pieces[m.lo, m.hi] = chunks(
                    m.lo, m.hi, bpe, schedule.chunk_bytes, schedule.depth
                )
            k = len(cs)
            setup = net.link_setup_ps  # a protocol's handshake per chunk (ADR 0023)
            uses: dict[object, float] = {
                x: nb * link_beta[x] + (k * setup[x] if setup else 0) for x in route
            }
            if m.reduce:
                uses["engine", m.dst] = nb * gamma
            uses["hbm", m.dst] = (2 if m.reduce else 1) * nb * mem
            alpha = float(sum(lat[x] for x in route))
            used = credits.setdefault((m.src, m.dst, m.lane), [])
            ready = used[len(used) - buffers] if len(used) >= buffers else 0.0
            back = len(used) + k - 1 - buffers  # the buffer its last chunk waits for
            last = used[min(back, len(used) - 1)] if back >= 0 and used else 0.0
            mine = written[m.src]
            if m.fresh or not any(lo < m.hi and m.lo < hi for lo, hi, _r in mine):
                key = ("hbm", m.src)  # the chip's own input: read from HBM
                uses[key] = uses.get(key, 0.0) + nb * mem
                queue += [
                    (ready, (i, len(plans)), route, (c1 - c0) * bpe)
                    for i, (c0, c1) in enumerate(cs)
                ]
            else:  # a chunk is ready when all its elements are in, the message with its first
                ins = [_in(mine, c0, c1, recs) for c0, c1 in cs]
                ready = max(ready, min(ins))
                queue += [
                    (t, (i, len(plans)), route, (c1 - c0) * bpe)
                    for i, (t, (c0, c1)) in enumerate(zip(ins, cs, strict=True))
                ]
                for lo, hi, r in reversed(mine):
                    if lo < m.hi and m.lo < hi:  # the latest message that wrote any of them
                        last = max(last, recs[r][1] + recs[r][2] + recs[r][5] + recs[r][6])
                        break
            plans.append((m, uses, alpha, ready, last, k))
            pair_chunks[m.src, m.dst, m.lane] = pair_chunks.get((m.src, m.dst, m.lane), 0) + k
            for y, w in uses.items():
                work[y] = work.get(y, 0.0) + w
        begin: dict[object, float] = {}
        for _m, uses, _a, ready, _l, _k in plans:
            for y in uses:
                begin[y] = min(begin.get(y, ready), ready)
        sent = _send(queue, len(plans), busy, link_beta, lat, net.link_setup_ps)
        ahead = {y: max(free.get(y, 0.0), begin[y]) for y in work if not isinstance(y, int)}
        for y, at in ahead.items():  # an engine or HBM does the step's work once it can begin
            free[y] = at + work[y]
        first_start, last_end, top_alpha = math.inf, 0.0, 0.0
        for (m, uses, alpha, ready, last, k), (first, done) in zip(plans, sent, strict=True):
            route = net.route(m.src, m.dst, m.lane)
            start = max(ready, first)
            end = max([last, done, *(free[y] for y in uses if y in free)])
            # one burst, or the whole chunk when it is smaller, through its slowest link and
            # into the receiver (a reduction: the engine or HBM's read and write; a copy: HBM)
            grain = min(burst, (m.hi - m.lo) * bpe / k)
            g = max(grain * link_beta[x] for x in route) + grain * (
                max(gamma, 2 * mem) if m.reduce else mem
            )
            # its last burst also holds a link for the protocol's handshake (the simulator's
            # grain, sim.fabric.holds); its first is in the share of its links' time
            shake = float(max(net.link_setup_ps[x] for x in route)) if net.link_setup_ps else 0.0
            both = pair_chunks[m.src, m.dst, m.lane]  # the pair's chunks in this step share buffers
            back = max(lat[x] for x in route)
            if both > buffers:  # a window of `buffers` chunks per credit round trip
                piece = max(uses[x] for x in route) / k
                end = max(end, start + both / buffers * (alpha + piece + g + back))
            share = max((count[x] for x in route), default=1)
            # its receiver's engine and HBM begin on it with its first chunk in and their
            # earlier steps' work done
            recv = max(
                [
                    start + alpha,
                    *(ahead[y] for y in (("engine", m.dst), ("hbm", m.dst)) if y in ahead),
                ]
            )
            recs.append((start, end, alpha, k, share, g, shake, max(last, done), recv))
            written[m.dst].append((m.lo, m.hi, len(recs) - 1))
            credits[m.src, m.dst, m.lane] += [  # chunk j is consumed (j + 1) / k of the way through
                start + alpha + (j + 1) / k * (end - start) + g + back for j in range(k)
            ]
            finish = max(finish, end + alpha + g + shake)
            first_start, last_end = min(first_start, start), max(last_end, end)
            top_alpha = max(top_alpha, alpha)
        beta = max(work.values(), default=0.0)
        rows.append((top_alpha, beta, first_start, last_end))
        textbook += top_alpha + beta
    return DimensionModel(finish, textbook, tuple(rows))


def _send(
    queue: list[Chunk],
    messages: int,
    busy: dict[int, tuple[list[float], list[float]]],
    link_beta: list[float],
    lat: Sequence[int],
    setup: Sequence[int],
) -> list[tuple[float, float]]:
    """When each message of the step starts and ends on its links, chunk by chunk (module
    docstring, ``sent_i``): each link takes the step's chunks in the order they are ready
    (``queue``: per chunk its ready time, its place in program order ``(chunk, message)``, its
    route and bytes), each into the first time from then that the link is idle for it (``busy``:
    per link the sorted starts and ends of what it carries, over the whole walk, so a later
    step's chunk goes while an earlier step waits for its data, as first come, first served
    links do). A chunk reaches its next hop one latency after it started on this one
    (cut-through) and ends there no earlier than one latency after it ended here. Per
    message: its first chunk's start on the first hop and its last chunk's end on the last
    hop less the latencies before it (so its arrival is that end plus ``alpha``). A chunk
    holds a link for its bytes and, under a protocol with one, its handshake (``setup``)."""
    times: dict[int, tuple[float, float]] = {}
    hop = 0
    state = [(r, r, o, route, nb) for r, o, route, nb in queue]  # ready, end floor, ...
    while state:
        state.sort(key=lambda z: (z[0], z[2]))
        nxt = []
        for ready, floor, o, route, nb in state:
            mi = o[1]
            x = route[hop]
            starts, ends = busy.setdefault(x, ([], []))
            t, d = ready, nb * link_beta[x] + (setup[x] if setup else 0)
            i = bisect.bisect_right(ends, t)  # the first interval still busy at t
            while i < len(starts) and starts[i] < max(t + d, floor):
                t = max(t, ends[i])
                i += 1
            end = max(t + d, floor)
            if i and ends[i - 1] >= t:  # it goes on from the interval before: join them
                if i < len(starts) and starts[i] <= end:
                    ends[i - 1] = ends.pop(i)
                    del starts[i]
                else:
                    ends[i - 1] = end
            elif i < len(starts) and starts[i] <= end:
                starts[i] = t
            else:
                starts.insert(i, t)
                ends.insert(i, end)
            first, done = times.get(mi, (t, 0.0))
            if hop == 0:
                first = min(first, t)
            if hop + 1 < len(route):
                nxt.append((t + lat[x], end + lat[x], o, route, nb))
            else:
                done = max(done, end - sum(lat[y] for y in route[:hop]))
            times[mi] = (first, done)
        state = nxt
        hop += 1
    return [times.get(mi, (0.0, 0.0)) for mi in range(messages)]


def _in(written: list[tuple[int, int, int]], lo: int, hi: int, recs: list[Rec]) -> float:
    """When all of elements ``[lo, hi)`` are there on a chip: over the pieces of the range,
    each from the latest message that wrote it, the latest time that message's chunk ``j``
    of ``k`` holding the piece's last element is in: ``alpha`` after the message started,
    plus ``(j + 1 - 1/M) / k`` of its time (chunks stream in order; ``M`` messages sharing a
    link take turns chunk by chunk), plus its burst ``g``; and no earlier than that share of
    its receiver's time, from when its engine and HBM begin on it (its first chunk in,
    ``alpha`` after it started, and their earlier steps' work done) to its end, plus ``g``.
    0 for what no message wrote."""
    out = 0.0
    todo = [(lo, hi)]  # the parts not yet found in a later message
    for w_lo, w_hi, r in reversed(written):
        rest = []
        for a, b in todo:
            x, y = max(a, w_lo), min(b, w_hi)
            if x >= y:
                rest.append((a, b))
                continue
            rest += [part for part in ((a, x), (y, b)) if part[0] < part[1]]
            s_r, e_r, a_r, k, share, g, _shake, sent, recv = recs[r]
            j = min(k - 1, (y - 1 - w_lo) * k // (w_hi - w_lo))
            f = (j + 1 - 1 / share) / k  # of its links' time, and of its receiver's
            out = max(out, s_r + a_r + g + f * (sent - s_r), recv + g + f * (e_r - recv))
        todo = rest
        if not todo:
            break
    return out


def model_fields(
    topo: Topology,
    algorithm: str,
    nbytes: int,
    collective: str = "allreduce",
    chunk_bytes: int | None = None,
    protocol: str | None = None,
) -> dict[str, object]:
    """The fields of :class:`sim.collectives.model.CollectiveModel` for the per-dimension
    model: its time (launch, then the walk on the chosen protocol's network) as the model's
    time and as its pipeline term, the textbook sum, the other terms 0 (they read one link
    bandwidth and latency)."""
    wires = build_network(topo)
    cfg = topo.collectives
    schedule = build_schedule(
        topo, nbytes, algorithm, collective, chunk_bytes=chunk_bytes, network=wires
    )
    chosen = choose_protocol(schedule, wires, cfg, protocol)  # as the run chooses
    net = protocol_network(wires, cfg, chosen)
    walked = _walk(topo, net, schedule)
    launch = float(cfg.launch_ps)
    dm = DimensionModel(walked.time_ps + launch, walked.textbook_ps + launch, walked.steps)
    zero = 0.0
    return {
        "algorithm": algorithm,
        "collective": collective,
        "chips": net.chips,
        "nbytes": nbytes,
        "time_ps": dm.time_ps,
        "pipeline_ps": dm.time_ps,
        "critical_path_ps": zero,
        "resource_path_ps": zero,
        "one_port_ps": zero,
        "busiest_link_ps": max((b for _a, b, _s, _e in dm.steps), default=zero),
        "busiest_engine_ps": zero,
        "busiest_hbm_ps": zero,
        "textbook_ps": dm.textbook_ps,
        "parts": (),
        "launch_ps": launch,
        "protocol": chosen,
    }


@dataclass(frozen=True)
class DimensionBounds:
    """Times no run of the collective on this machine can beat, in ps (module docstring)."""

    bandwidth: float
    latency: float
    reduce: float
    hbm: float
    levels: tuple[float, ...]  # the bandwidth bound of each level k

    @property
    def time_ps(self) -> float:
        return max(self.bandwidth, self.latency, self.reduce, self.hbm)


def dimension_bounds_ps(
    topo: Topology, nbytes: int, collective: str = "allreduce"
) -> DimensionBounds:
    """Lower bounds of one collective on ``topo``'s dimensions (module docstring)."""
    if collective not in ("allreduce", "reduce_scatter", "all_gather"):
        raise CollectiveError(
            f"unknown collective {collective!r}; use allreduce, reduce_scatter or all_gather"
        )
    net = build_network(topo)
    dims = dimensions_of(topo.chips)
    p, n = net.chips, float(nbytes)
    if p <= 1 or nbytes == 0:
        return DimensionBounds(0.0, 0.0, 0.0, 0.0, ())
    sizes = [d.size for d in dims]
    # per dimension: the bandwidth out of one chip (every lane), GB/s = B/ns
    out_bw = []
    for k, d in enumerate(dims):
        group = dimension_groups(sizes, k)[0]
        if d.shape == "switch":
            out_bw.append(float(d.link_bw) * d.ports if d.size > 1 else 0.0)
        elif d.shape == "fully_connected":
            out_bw.append(float(d.link_bw) * d.links * (len(group) - 1))
        else:
            peers = min(2, d.size - 1)
            out_bw.append(float(d.link_bw) * d.links * peers)
    levels = []
    for k in range(len(dims)):
        blocks = p // math.prod(sizes[:k])
        cap = math.prod(sizes[:k]) * sum(out_bw[k:])
        if blocks <= 1 or cap <= 0:
            continue
        reduces = any(d.shape == "switch" and d.switch_reduce_gbs > 0 for d in dims[k:])
        share = (blocks - 1) / blocks * n
        crossing = (n if reduces else 2 * share) if collective == "allreduce" else share
        levels.append(crossing / cap * 1000.0)
    latency = max(float(_route_latency(net, s, d)) for s in range(p) for d in range(p))
    switch_reduces = any(d.shape == "switch" and d.switch_reduce_gbs > 0 for d in dims)
    reduced = 0.0 if collective == "all_gather" or switch_reduces else (p - 1) / p * n
    memory = {"allreduce": 2.0 * n, "reduce_scatter": n * (1 + 1 / p), "all_gather": n}[collective]
    return DimensionBounds(
        bandwidth=max(levels, default=0.0),
        latency=latency,
        reduce=reduced * 1000.0 / float(topo.chips.reduce_bw),
        hbm=memory * 1000.0 / float(topo.hbm.bw),
        levels=tuple(levels),
    )
