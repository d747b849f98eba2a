"""An independent closed-form check for collectives (issue 26, class 6): the textbook
alpha-beta time of an uncontended single-message case, from the topology's constants only.

``sim.collectives.model`` times the same program on the same engine with contention off, so a
bug in the engine (a hop's latency charged twice, a link kind's bandwidth off by a factor)
moves the model with the simulation and ``sim_model_ratio`` does not move. This module uses
neither the engine nor the model nor the network builder: it reads ``chips.link_bw_gbs``
(beta), ``chips.link_latency_ns`` (alpha), ``hbm.hbm_to_router_bw_gbs``, ``hbm.burst_bytes``
and the interconnect's shape, and writes the time down in the form of Thakur, Rabenseifner
and Gropp, "Optimization of collective communication operations in MPICH" (IJHPCA 2005): a
point-to-point message of ``n`` bytes over ``h`` hops costs ``h alpha + n beta`` (here
cut-through: every hop adds its flight time, the bytes cross once at the link rate, as
ADR 0005 states), plus the rules of this machine that the textbook leaves out and ADR 0005 /
0016 state: the receiver's copy ends one HBM burst after its last byte arrived.

Covered: ``sendrecv`` (``direct``; nccl-tests' ``sendrecv_perf``: every chip sends ``n`` bytes
to chip ``c+1`` at once, each over its own links, so nothing contends) on ``ring``,
``fully_connected``, ``switch`` and ``torus2d``:

    T = launch + max_c hops(c, c+1) x alpha + n / beta + burst / B_hbm

where ``hops`` is 1 on a ring or fully connected (neighbours), 2 through a switch (up and
down), and on a ``rows x cols`` torus 2 when ``c+1`` starts a new row (one hop along the row
wrap, one along the column), else 1.

On two chips ``broadcast`` (``direct``, ``ring``), ``reduce`` and ``allreduce`` (``direct``)
are one message each way too (root to chip 1; chip 1 to the root; each chip to the other),
and the same form holds with the receiver's tail its own: a copy's last burst through HBM,
or a reduction's last burst, ``max(burst / R, 2 burst / B_hbm)`` (the reduce engine, and
HBM reading and writing the accumulator: ADR 0016, the streaming granule of
``sim.fabric.holds``):

    T = launch + hops x alpha + n / beta + tail

It applies when the message is link-bound: the reduce engine is at least as fast as the
link, and the HBM never holds the link back, ``beta x m <= B_hbm`` with ``m`` the bytes one
chip's HBM moves per byte on the link (sendrecv 2: it reads its send and writes its receive;
broadcast 1, reduce 2 on the root, a 2-chip allreduce 3: the send, and the reduction's read
and write); every chunk of the message has its staging buffer at once (``n <=
staging_buffers x chunk_kib``: no credit waits); the topology is one level (no
``chips.dimensions``) and the collectives are neutral (no protocol, channels or step cost;
a launch only shifts the start). A broadcast or reduce on more chips is not one message:
the root's HBM serves ``p - 1`` sends, its downlink ``p - 1`` receives; a ring allreduce of
two chips is two steps.

A failure reads the difference in the formula's terms (:meth:`AlphaBeta.explain`): a whole
number of hop latencies (a hop charged twice), or of messages at the link rate.

**Exactness.** Each chunk's link time is a whole number of ps rounded up, so when ``1000 /
link_bw_gbs`` ps per byte is an integer (every topology in this repository: 50 GB/s is 20 ps
per byte) and one burst is a whole number of ps at the HBM rate, the time is exact and the
check is ``==``. Otherwise each of the message's ``k`` chunks may round up by under 1 ps, and
the tolerance is ``k`` ps, with ``k`` bounded by the chunking rule (equal chunks of at most
``chunk_kib``, at least ``staging_buffers / 2`` of them, a power of two: ``k <= 2 max(ceil(n /
chunk), staging_buffers / 2)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from sim import Topology
from sim.topology.system import CollectivesConfig

__all__ = ["AlphaBeta", "alpha_beta", "check_alpha_beta"]


@dataclass(frozen=True)
class AlphaBeta:
    time_ps: int
    tolerance_ps: int
    formula: str
    alpha_ps: int = 0  # one hop's latency (the alpha term)
    wire_ps: int = 0  # the message's bytes at the link rate (the beta term)

    def explain(self, off: int) -> str:
        """A difference read in the formula's terms: whole hop latencies, or whole messages
        at the link rate (what an engine bug that moves one term gives)."""
        for name, unit in (("the hop latency alpha", self.alpha_ps), ("n / beta", self.wire_ps)):
            if unit and off and abs(off) > self.tolerance_ps and off % unit == 0:
                return (
                    f" = {off // unit:+d} x {name} ({unit} ps): a hop latency charged "
                    f"{'once too often' if off > 0 else 'too rarely'} on the way"
                    if unit == self.alpha_ps
                    else f" = {off // unit:+d} x {name} ({unit} ps): the message's bytes "
                    "crossed a link at the wrong rate"
                )
        return ""


def _gbs(value: float) -> Fraction:
    return Fraction(str(value))


def _neighbour_hops(shape: str, chips: int, torus: tuple[int, int]) -> int:
    """The most hops any chip's message to chip ``c+1`` crosses (module docstring)."""
    if shape == "switch":
        return 2
    if shape == "torus2d":
        rows, cols = torus
        return 2 if rows > 1 and cols > 1 else 1
    return 1  # ring, fully_connected: neighbours are one link apart


#: (collective, algorithm) -> what its one message's receiver does with it: the cases
#: this module times, each only where it is one message each way (module docstring)
ONE_MESSAGE = {
    ("sendrecv", "direct"): "copy",
    ("broadcast", "direct"): "copy",
    ("broadcast", "ring"): "copy",
    ("reduce", "direct"): "reduce",
    ("allreduce", "direct"): "reduce",
}


def alpha_beta(topo: Topology, collective: str, algorithm: str, nbytes: int) -> AlphaBeta | None:
    """The textbook time of this call, or None when it is not a case this module covers."""
    chips = topo.chips
    tail = ONE_MESSAGE.get((collective, algorithm))
    p = chips.count
    if tail is None or p < 2 or nbytes <= 0 or (collective != "sendrecv" and p != 2):
        return None
    if chips.dimensions or _neutral(topo.collectives) is False:
        return None
    beta, hbm = _gbs(chips.link_bw_gbs), _gbs(topo.hbm.hbm_to_router_bw_gbs)
    reduce = _gbs(chips.reduce_gbs)
    chunk = chips.chunk_kib * 1024
    # what one chip's HBM moves per byte on the link: sendrecv and a 2-chip allreduce read
    # the send and write (a reduction: read and write) the receive, a broadcast or reduce
    # reads on one chip and writes on the other
    per_byte = {"sendrecv": 2, "allreduce": 3, "reduce": 2, "broadcast": 1}[collective]
    if beta * per_byte > hbm or nbytes > chips.staging_buffers * chunk:
        return None
    if tail == "reduce" and reduce < beta:
        return None
    alpha_ps = round(chips.link_latency_ns * 1000)
    hops = _neighbour_hops(chips.topology, p, tuple(chips.torus_dims))  # type: ignore[arg-type]
    wire = Fraction(nbytes * 1000) / beta
    grain = min(topo.hbm.burst_bytes, nbytes)
    if tail == "copy":  # the copy's last burst into HBM
        last = Fraction(grain * 1000) / hbm
        how = f"one burst {grain} B / HBM {topo.hbm.hbm_to_router_bw_gbs} GB/s"
    else:  # the reduction's last burst: reduce engine, or read and written in HBM
        last = max(Fraction(grain * 1000) / reduce, Fraction(2 * grain * 1000) / hbm)
        how = (
            f"one reduced burst max({grain} B / reduce {chips.reduce_gbs} GB/s, 2 x {grain} B "
            f"/ HBM {topo.hbm.hbm_to_router_bw_gbs} GB/s)"
        )
    launch = round(topo.collectives.launch_ns * 1000)
    exact = (Fraction(1000) / beta).denominator == 1 and last.denominator == 1
    k = 2 * max(-(-nbytes // chunk), max(1, chips.staging_buffers // 2))
    time_ps = launch + hops * alpha_ps + math.ceil(wire) + math.ceil(last)
    formula = (
        f"launch {launch} + {hops} hop(s) x alpha {alpha_ps} + n {nbytes} B / beta "
        f"{chips.link_bw_gbs} GB/s + {how}"
    )
    return AlphaBeta(time_ps, 0 if exact else k, formula, alpha_ps, math.ceil(wire))


def _neutral(cfg: CollectivesConfig) -> bool:
    """No protocol derating, channels or step cost (a launch is allowed: it shifts the start)."""
    neutral = CollectivesConfig()
    return (cfg.step_sync_ns, cfg.channels, cfg.protocol, cfg.simple) == (
        neutral.step_sync_ns,
        neutral.channels,
        neutral.protocol,
        neutral.simple,
    )


def check_alpha_beta(
    topo: Topology, collective: str, algorithm: str, nbytes: int, time_ps: int
) -> list[str]:
    """A problem when a covered case's simulated time is not its textbook time."""
    want = alpha_beta(topo, collective, algorithm, nbytes)
    if want is None or abs(time_ps - want.time_ps) <= want.tolerance_ps:
        return []
    tol = f" (tolerance {want.tolerance_ps} ps)" if want.tolerance_ps else " (exact)"
    return [
        f"alpha-beta check: {collective} on {topo.chips.topology} x{topo.chips.count} took "
        f"{time_ps} ps, its textbook time is {want.time_ps} ps{tol} = {want.formula}; "
        f"off by {time_ps - want.time_ps:+d} ps{want.explain(time_ps - want.time_ps)}"
    ]
