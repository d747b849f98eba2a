"""Protocols: what a collective's runtime costs on the wires (ADR 0021 decision 2).

A run under protocol ``P`` (simple, ll128, ll; ``collectives.protocols``) uses the network
:func:`protocol_network` gives: every link's bandwidth times ``efficiency_P`` (flag words
travel in the data: NCCL's LL sends 8 B of flags per 8 B of data, LL128 8 B per 120 B), and
every link a chip sends on ``collectives.step_sync_ns + protocols[P].step_ns`` more latency
per hop: the per-step handshake, a dependency delay that holds no link (NCCL's per-hop
``hwLatencies`` play this role). Reductions, HBM, staging and the functional check are as
without protocols.

``protocol: auto`` (:func:`choose_protocol`) picks, per call, the protocol of least
modelled time, ties to the higher efficiency, as NCCL's tuner does with its alpha-beta
table (``src/graph/tuning.cc``). The model is the schedule's alpha-beta on that protocol's
network (:func:`modelled_ps`): ``launch + sum over the steps of (hops x latency) +
(bytes on the busiest link) / link_bw``, latency and bandwidth as derated.
"""

from __future__ import annotations

from fractions import Fraction

from sim.collectives.compile import chunk_count
from sim.collectives.schedule import CollectiveError, Schedule
from sim.fabric import Network
from sim.topology import PROTOCOLS, CollectivesConfig

__all__ = [
    "AUTO",
    "candidates",
    "choose_protocol",
    "derate",
    "is_choice",
    "modelled_ps",
    "protocol_network",
    "requested_protocol",
]

AUTO = "auto"


def derate(
    net: Network, bw_factor: Fraction, extra_out_latency_ps: int, out_setup_ps: int = 0
) -> Network:
    """``net`` with every link's bandwidth times ``bw_factor`` and ``extra_out_latency_ps``
    more latency on the links chips send on (:meth:`Network.derated`: a chip's link to a
    chip or to a switch, not a switch's link down); ``net`` itself when that changes nothing."""
    if bw_factor == 1 and extra_out_latency_ps == 0 and out_setup_ps == 0:
        return net
    return net.derated(bw_factor, extra_out_latency_ps, out_setup_ps)


def protocol_network(net: Network, cfg: CollectivesConfig, protocol: str) -> Network:
    """The network a run under ``protocol`` times its program on (module docstring)."""
    entry = cfg.protocols(protocol)
    return derate(net, entry.efficiency_exact, 0, cfg.step_ps(protocol))


def modelled_ps(schedule: Schedule, net: Network, launch_ps: int = 0) -> float:
    """The schedule's alpha-beta time on ``net`` (a protocol's network): ``launch`` + each
    step's slowest route's latency (the sum over its links) + the busiest link direction's
    time (its bytes over its own bandwidth, and its setup once per chunk it carries)."""
    bpe = schedule.bytes_per_element
    lat, bws, setup = net.link_latencies_ps, net.link_bws, net.link_setup_ps
    load: dict[int, int] = {}
    sends: dict[int, int] = {}
    flight = 0
    for step in schedule.steps:
        longest = 0
        for m in step:
            route = net.route(m.src, m.dst, m.lane)
            longest = max(longest, sum(lat[k] for k in route))
            k_chunks = chunk_count(m.hi - m.lo, bpe, schedule.chunk_bytes, schedule.depth)
            for link in route:
                load[link] = load.get(link, 0) + (m.hi - m.lo) * bpe
                sends[link] = sends.get(link, 0) + k_chunks
        flight += longest
    busiest = max(
        (float(b * 1000 / bws[k]) + (setup[k] * sends[k] if setup else 0) for k, b in load.items()),
        default=0.0,
    )
    return launch_ps + flight + busiest


def requested_protocol(cfg: CollectivesConfig, protocol: str | None = None) -> str:
    """``protocol`` (the argument), else ``cfg.protocol``, checked: a name or ``auto``."""
    return _check(cfg.protocol if protocol is None else protocol)


def candidates(protocol: str) -> tuple[str, ...]:
    """The protocols a call may run under ``protocol``: every one for ``auto``, the listed ones
    for a subset (``"ll,simple"``, as ``NCCL_PROTO=LL,Simple`` enables), else that one."""
    if protocol == AUTO:
        return PROTOCOLS
    return tuple(protocol.split(","))


def is_choice(protocol: str) -> bool:
    """Whether ``protocol`` leaves the choice to the tuner (``auto`` or a subset)."""
    return len(candidates(protocol)) > 1


def _check(protocol: str) -> str:
    if protocol != AUTO and not set(candidates(protocol)) <= set(PROTOCOLS):
        raise CollectiveError(
            f"protocol = {protocol!r}: use one of {', '.join(PROTOCOLS)}, 'auto' or a "
            "comma-separated subset such as 'll,simple' "
            "(the least modelled time)"
        )
    return protocol


def choose_protocol(
    schedule: Schedule, net: Network, cfg: CollectivesConfig, protocol: str | None = None
) -> str:
    """The protocol a call runs: ``protocol`` (the argument, as ``NCCL_PROTO``), else
    ``cfg.protocol``; ``auto``: the least :func:`modelled_ps` on each protocol's network,
    ties to the higher efficiency (then simple, ll128, ll)."""
    name = requested_protocol(cfg, protocol)
    if not is_choice(name):
        return name

    def key(p: str) -> tuple[float, Fraction, int]:
        t = modelled_ps(schedule, protocol_network(net, cfg, p), cfg.launch_ps)
        return t, -cfg.protocols(p).efficiency_exact, PROTOCOLS.index(p)

    return min(candidates(name), key=key)
