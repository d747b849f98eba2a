"""The fabric program of ``nvls`` (:mod:`sim.collectives.nvls`): its four steps chunk by chunk
over the switch's ports, as NCCL's NVLS kernel pipelines them.

Each shard is cut into chunks as any message is (:func:`sim.collectives.compile.chunks`).
Chunk ``t`` of shard ``j`` (owner ``j``, switch ``S``) is, in program order:

* ``p`` transfers ``i -> S`` (each chip's copy, read from HBM), each consumed by a
  reduction at ``S`` into one accumulator (the switch's sum, :mod:`sim.fabric.switch_ops`);
* the transfer ``S -> j`` of the sum (it needs all ``p`` reductions) and its copy at ``j``;
* the transfer ``j -> S`` of the result (streamed from on-chip buffers as it arrives), a
  copy at ``S`` (the multicast's source: no time, no staging buffer), and the multicast:
  ``p - 1`` transfers ``S -> i``, ``i != j``, each on its own down link, each stored by a
  copy at ``i``.

**Ports.** The chunks of all shards are numbered shard by shard (``g``); every op of
chunk ``g`` is on lane ``g mod ports``, so every phase of every chip spreads over the ports
within one chunk.

**Pull window.** NCCL's NVLS kernel reduces a chunk when the owner's reduce warps ask for it
(``multimem.ld_reduce``), a few chunks at a time per port. Here a port's chunks, in program
order, are gated: the transfers up of a port's ``m``-th chunk depend on the switch's sum of
its ``(m - w)``-th (:func:`pull_window`: ``w = 2`` plus the chunks a latency covers).
Without that window every reduce-up chunk is ready at once, fills the ports' queues (each
port serves first come, first served) and the owner's send up, which the multicast waits
for, would queue behind ``staging_buffers`` of them.

What is left of the pipeline's fill: the multicasts of the last chunks follow their sends
up, which queue behind up to ``w`` reduce-up chunks; :mod:`sim.collectives.nvls_model`
takes that into account.
"""

from __future__ import annotations

import itertools

from sim.collectives.compile import Compiled, chunks
from sim.collectives.nvls import check_nvls
from sim.collectives.schedule import Range, Schedule
from sim.fabric import COPY, REDUCTION, TRANSFER, FabricProgram, Network


def pull_window(net: Network, nbytes: int) -> int:
    """Chunks of ``nbytes`` a port keeps in flight (module docstring): two, and as many more
    as cover a chunk's flight up (the port's latency over the chunk's time on it)."""
    link = net.out_links(0)[0]  # a port up: every port of the switch dimension is alike
    on_port = max(1, net.link_ps(nbytes, link))
    return 2 + -(-net.link_latencies_ps[link] // on_port)


def nvls_program(schedule: Schedule, net: Network) -> Compiled:
    """The fabric program of the ``nvls`` schedule ``schedule`` on ``net`` (module
    docstring), with what each op moves for the replay."""
    p = schedule.chips
    bpe = schedule.bytes_per_element
    plans: dict[int, list[Range]] = {}
    for m in schedule.steps[1] if schedule.steps else ():  # down to the owner: the shards
        plans[m.dst] = chunks(m.lo, m.hi, bpe, schedule.chunk_bytes, schedule.depth)
    bounds = sorted({0, schedule.count, *(x for plan in plans.values() for r in plan for x in r)})
    out = Compiled(FabricProgram(), bounds)
    if not plans:
        return out
    sw = check_nvls(net)
    ports = net.lanes
    first_chunk = next(iter(plans.values()))[0]
    window = pull_window(net, (first_chunk[1] - first_chunk[0]) * bpe)
    index = {b: i for i, b in enumerate(bounds)}
    offset = dict(
        zip(plans, itertools.accumulate(map(len, plans.values()), initial=0), strict=False)
    )
    prog = out.program

    def put(kind: int, src: int, dst: int, deps: tuple[int, ...], **kw: int) -> int:
        op = prog.add(kind, src, dst, nb, step, deps, span=span, lane=lane, **kw)
        out.lo.append(index[span[0]])
        out.hi.append(index[span[1]])
        out.reduce.append(kind == REDUCTION or (kind == TRANSFER and step == 0))
        out.fresh.append(False)
        return op

    sums: list[list[tuple[int, ...]]] = [[] for _ in range(ports)]  # per port, in order
    for t in range(max(map(len, plans.values()))):
        for j, plan in plans.items():
            if t >= len(plan):
                continue
            span = plan[t]
            nb = (span[1] - span[0]) * bpe
            lane = (offset[j] + t) % ports
            step = 0
            queue = sums[lane]
            gate = queue[-window] if len(queue) >= window else ()
            ups = [put(TRANSFER, i, sw, gate, hbm=nb) for i in range(p)]
            first = len(prog)
            queue.append(
                tuple(put(REDUCTION, sw, sw, (u,), consumes=u, hbm=0, into=first) for u in ups)
            )
            step = 1
            down = put(TRANSFER, sw, j, queue[-1], hbm=0)
            got = put(COPY, j, j, (down,), consumes=down)
            step = 2
            up = put(TRANSFER, j, sw, (got,), hbm=0)
            source = put(COPY, sw, sw, (up,), consumes=up, hbm=0)
            step = 3
            for i in range(p):
                if i != j:
                    mc = put(TRANSFER, sw, i, (source,), hbm=0)
                    put(COPY, i, i, (mc,), consumes=mc)
    return out
