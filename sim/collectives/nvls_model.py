"""The model and the lower bounds of ``nvls`` (:mod:`sim.collectives.nvls`,
:mod:`sim.collectives.nvls_program`), from the same Topology as the simulator (notation of
:mod:`sim.collectives.model`: ``a`` latency per hop, ``b`` ps per byte on a port direction,
``m`` ps per byte of a chip's HBM; ``P`` ports, ``p`` chips, ``n`` bytes, ``R`` the switch's
reduce rate per port).

**Lower bounds** (:func:`nvls_bounds`), what no ``nvls`` run beats:

* ports: each chip sends ``n`` up (its copy of every shard) and ``n/p`` (its reduced
  shard), and takes ``n`` down, over ``P`` ports: ``(1 + 1/p) n b / P``;
* latency: a chunk goes up, down to its owner, up again and down: ``4 a``;
* the switch: a port's reduce engine sums what comes in by it, ``n / P`` at least: ``n/(P R)``;
* HBM: each chip reads its input (``n``) and writes the result (``n``): ``2 n m``.

:func:`machine_sent_bytes` is what any allreduce on a machine whose switch reduces must send
per chip (the generic bound of :func:`sim.collectives.bounds.bounds_ps` assumes the chips
reduce): ``n`` (every element's value leaves each chip once: its contribution, or the sum it
made; a multicast sends once for all), and that the chips need reduce nothing.

**Model** (:func:`nvls_model`): the largest of

1. the **busiest port** with the pipeline's fill: the bytes of the busiest port direction
   (the chunk layout of :mod:`sim.collectives.nvls_program`, port by port) times ``b``, plus
   what the last chunks still do once the ports up are done: their owner's send up waits
   behind the pull window's ``w`` reduce-up chunks, then the multicast down (``(w + 1)``
   chunk times) and the flights up and down (``2 a``);
2. the **one-chunk path** (small messages): a chunk's time on a port, four flights, its read
   and its write through HBM;
3. the switch's busiest reduce engine, ``n/(P R)``, and the busiest HBM, ``(2n) m``.
"""

from __future__ import annotations

from sim.collectives.compile import chunks
from sim.collectives.nvls import check_nvls, nvls_shards
from sim.collectives.nvls_program import pull_window
from sim.fabric import Network, build_network
from sim.topology import Topology

__all__ = ["machine_sent_bytes", "nvls_bounds", "nvls_model"]


def machine_sent_bytes(
    collective: str, chips: int, nbytes: float, share: float
) -> tuple[float, float]:
    """``(sent, reduced)``: bytes each chip must send and reduce when a switch reduces and
    multicasts (module docstring): allreduce sends ``n``, all_gather ``n/p`` (one multicast
    of its share), reduce_scatter ``share`` (every other share leaves once); a chip need
    reduce nothing (the switch may make every sum)."""
    if collective == "allreduce":
        return nbytes, 0.0
    if collective == "all_gather":
        return nbytes / chips, 0.0
    return share, 0.0


def _port(net: Network) -> tuple[float, float]:
    """``(b, a)``: ps per byte and latency of a port up (every port of the switch is alike)."""
    link = net.out_links(0)[0]
    return 1000.0 / float(net.link_bws[link]), float(net.link_latencies_ps[link])


def _layout(topo: Topology, nbytes: int, chunk_bytes: int | None) -> list[list[int]]:
    """Per shard, its chunks' bytes, as :func:`nvls_program` cuts them."""
    bpe = topo.bpe
    chunk = topo.chips.chunk_bytes if chunk_bytes is None else chunk_bytes
    chunk -= chunk % bpe
    depth = max(1, topo.chips.staging_buffers // 2)
    shards = nvls_shards(nbytes // bpe, topo.chips.count)
    return [
        [(hi - lo) * bpe for lo, hi in chunks(a, b, bpe, chunk, depth)] for a, b in shards if b > a
    ]


def _busiest_port(layout: list[list[int]], ports: int) -> tuple[int, int, int]:
    """The bytes of the busiest port up and down of any chip (chunk ``g`` on port
    ``g mod ports``), and the most chunks a port carries up in the reduce step."""
    every = [0] * ports  # every chip sends every chunk up; takes the others' down
    count = [0] * ports
    own: list[list[int]] = []
    g = 0
    for shard in layout:
        mine = [0] * ports
        for size in shard:
            every[g % ports] += size
            mine[g % ports] += size
            count[g % ports] += 1
            g += 1
        own.append(mine)
    up = max(every[q] + mine[q] for mine in own for q in range(ports))
    down = max(every[q] for q in range(ports))  # the others' multicasts and its own sum
    return up, down, max(count)


def nvls_bounds(topo: Topology, nbytes: int) -> tuple[float, float, float, float]:
    """``(ports, latency, switch, hbm)`` lower bounds of ``nvls`` in ps (module docstring)."""
    net = build_network(topo)
    check_nvls(net)
    p, ports = net.chips, net.lanes
    if p <= 1 or nbytes == 0:
        return 0.0, 0.0, 0.0, 0.0
    b, a = _port(net)
    rate = float(net.switch_reduce_bws[0])
    n = float(nbytes)
    return (
        (1 + 1 / p) * n * b / ports,
        4 * a,
        n / ports * 1000.0 / rate,
        2 * n * 1000.0 / float(topo.hbm.bw),
    )


def nvls_model(
    topo: Topology, nbytes: int, collective: str = "allreduce", chunk_bytes: int | None = None
) -> dict[str, object]:
    """The terms of the ``nvls`` model (module docstring) as
    :class:`sim.collectives.model.CollectiveModel`'s fields."""
    net = build_network(topo)
    check_nvls(net)
    p, ports = net.chips, net.lanes
    b, a = _port(net)
    mem = 1000.0 / float(topo.hbm.bw)
    layout = _layout(topo, nbytes, chunk_bytes) if p > 1 else []
    port = path = switch = hbm = 0.0
    if layout:
        big = max(max(s) for s in layout)
        w = pull_window(net, big)
        up, down, most = _busiest_port(layout, ports)
        port = max(up * b, down * b + (min(w, most) + 1) * big * b) + 2 * a
        path = big * b + 4 * a + 2 * big * mem
        _ports, _lat, switch, _hbm = nvls_bounds(topo, nbytes)
        hbm = 2.0 * nbytes * mem
    terms = (port, path, switch, hbm)
    return {
        "algorithm": "nvls",
        "collective": collective,
        "chips": p,
        "nbytes": nbytes,
        "time_ps": max(terms),
        "pipeline_ps": port,
        "critical_path_ps": path,
        "resource_path_ps": 0.0,
        "one_port_ps": 0.0,
        "busiest_link_ps": max(_busiest_port(layout, ports)[:2]) * b if layout else 0.0,
        "busiest_engine_ps": switch,
        "busiest_hbm_ps": hbm,
        "textbook_ps": (1 + 1 / p) * nbytes * b / ports + 4 * a if p > 1 else 0.0,
        "parts": (),
    }
