"""The timing of a fabric program on a network: :func:`simulate_fabric`.

The rules (docs/adr/0005-interconnect-physics.md, docs/adr/0010-interconnect-completion.md,
docs/adr/0016-hbm-before-the-link-and-reductions-in-arrival-order.md):

* A **link** is one direction of a cable between two nodes. A transfer of ``b`` bytes
  occupies it for ``b / link_bw`` (:meth:`Network.link_ps`), one transfer at a time, so
  flows that share a link contend; its data arrives ``link_latency_ns`` after it leaves.
  Latency is flight time, not occupancy (ASTRA-sim's congestion-aware link): two
  back-to-back transfers on one link arrive at ``latency + 2 b / link_bw``. A link serves
  the transfers waiting for it first come, first served (equal ready times in program
  order).
* A transfer crosses its route **cut-through**: hop ``i+1`` is ready ``latency`` after hop
  ``i`` started (the head has crossed the hop) and starts then, or when its link frees,
  and ends no earlier than hop ``i`` ended plus ``latency``. An unloaded ``h``-hop transfer
  therefore arrives ``h * latency + b / link_bw`` after it starts. A switch is a
  non-blocking crossbar: its hop adds latency only.
* Each chip has one **reduce engine**, also first come, first served: reducing ``b``
  bytes takes ``b / reduce_gbs``. It runs concurrently with the chip's links.
* Each chip's **HBM** is one server of the aggregate bandwidth ``hbm_to_router_bw_gbs``:
  what ``num_pcs`` pseudo-channels give under a perfectly interleaved address map (ADR
  0010 says where that equals the per-channel model and where it does not). It serves
  ops in the order they are ready (a send once it has its staging buffer), and an op takes
  its link or reduce engine only when the HBM starts on its bytes, so no link or engine is
  held idle while its op waits for memory (ADR 0016).
* Reductions into one **accumulator** (``FabricProgram.into``) add in the order they
  start, each ending one burst after the one before it: sums commute (ADR 0016).
* An op that needs part of a producer's span may start early by the time it streams its
  own bytes before that part (ADR 0005 decision 4), but **never before its last producer
  starts** (a transfer: its last hop), when the engine learns that producer's timing: so
  nothing is due in the loop's past and no link is taken after it served someone later
  (ADR 0031).

On a network of dimensions (ADR 0021, :mod:`sim.fabric.dimensions`) links differ, and
every rule above reads **the link at hand**: a hop occupies its link for ``bytes / that
link's bandwidth`` and the next hop is ready that link's latency after it started; a
transfer's first hop streams at its own link's burst grain, and its data reaches the
receiver at the grain of its slowest link (one burst cannot come faster than the slowest
link passes it); the data arrives the last link's latency after the last hop ends. A
transfer takes the links of its **lane** (``FabricProgram.lane``, :meth:`Network.route`);
staging buffers are per (sender, receiver, lane) connection: a channel on a link or port of
its own has buffers of its own, as each NCCL channel has its own buffers per peer. A
**staging credit** flies back with the largest latency among the links its transfer
crossed: today's model charges a credit one link's flight time whatever the route's
length (so a one-hop and a
two-hop switch route, and a multi-hop ring route, all pay one latency, as before), and on
links that differ the slowest of them bounds it from below (a scale-out path's credit pays
its NIC). The full reverse path (a sum) would be more physical on multi-hop routes; it
would move every multi-hop baseline, so it is left to an ADR that takes that on purpose.
On a uniform network with every op on lane 0 all of this is today's rules, bit for bit.

Ops may also sit at a **switch node** (ADR 0021 decision 3): transfers to and from it, a
reduction on the reduce engine of the port its data came in by, a copy that only forwards;
their rules are in :mod:`sim.fabric.switch_ops`.
"""

from __future__ import annotations

from sim.fabric.events import simulate_events
from sim.fabric.holds import op_holds
from sim.fabric.network import Network
from sim.fabric.one_shot import one_shot
from sim.fabric.program import FabricProgram, op_routes
from sim.fabric.rotation import one_shot_by_rotation, rotation_invariant
from sim.fabric.uncontended import one_shot_uncontended
from sim.oplog import OpLog


def simulate_fabric(
    net: Network, program: FabricProgram, *, contention: bool = True, period: int = 0
) -> OpLog:
    """Time ``program`` on ``net`` (module docstring): a heap of ``(time, op id, hop)`` events.

    Every link direction and reduce engine is a FIFO server: an op that is ready while it is
    busy queues and starts when it frees (first come, first served; equal times in program
    order). A transfer occupies each link of its route for ``bytes / link_bw``; its first hop
    also reads the sender's HBM. Hop ``i+1`` starts ``latency`` after hop ``i`` started (or
    later, when its link frees) and cannot end before hop ``i`` ended plus ``latency``; the
    data has arrived ``latency`` after the last hop ends. Each chip's HBM is one bandwidth
    server of requests in the order ops are ready; an op takes its link or engine once the
    HBM starts on its bytes (ADR 0016). Reductions into one accumulator end one burst apart,
    in the order they start.

    Ops **stream** their inputs, at the granule of one HBM burst: an op may start once the
    first burst of each input is there (a transfer's first burst has arrived, a reduction
    or copy has produced its first burst) and cannot end before one burst after its last
    input byte. A link direction is held until its transfer ends; the reduce engine and HBM
    are bandwidth servers, busy for an op's work only. A transfer whose data a later op
    consumes first takes one of the receiver's ``staging_buffers`` for its (sender,
    receiver, lane) connection and gets it back ``latency`` after the consumer ends (the
    credit flies back). Returns one record per hop and per reduction or copy, sorted by op
    id and hop; ``tile`` holds the op's step.

    ``contention=False`` times the same program as if flows did not contend: each (sender,
    receiver) pair has a link of its own at every hop (its chunks still queue behind each
    other), every op has a reduce engine and HBM to itself; staging buffers are as in the
    machine. That is the congestion-unaware critical path of
    :func:`sim.collectives.model.model`. A one-shot program (``direct``: :class:`OneShot`)
    is then timed round by round in numpy (:func:`one_shot_uncontended`), with the same
    recurrences and so the same log (``tests/sim/test_fabric_fast.py`` compares both with an
    independent oracle).
    With contention, direct on a fully connected or switch network is timed from chip 0's
    share of the events and the other chips' records follow by turning the chips
    (:func:`one_shot_by_rotation`): the same log, from ``1/p`` of the events.

    ``period`` (> 0) says the program repeats every ``period`` ops where it is periodic: the
    loop then skips periods that repeat the one before, shifted (:mod:`sim.fabric.periodic`,
    ADR 0036), with the same log. It is ignored (the loop runs every op) without contention,
    with ops at a switch or with accumulators (``FabricProgram.into``), and on the one-shot
    paths above.
    """
    shape = one_shot(net, program)  # None on a non-uniform network or with lanes
    if contention and shape is not None and rotation_invariant(net, program, shape):
        return one_shot_by_rotation(net, program, shape)
    if not contention and shape is not None:
        return one_shot_uncontended(net, program, shape, op_holds(net, program))
    routes = op_routes(net, program)
    holds = op_holds(net, program, routes)
    return simulate_events(net, program, holds, contention=contention, routes=routes, period=period)
