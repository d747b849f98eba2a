"""Lower bounds of every collective (:func:`collective_bounds`): times no schedule of that
collective on this machine can beat, from the same Topology as the simulator (notation of
:mod:`sim.collectives.model`; allreduce: :func:`sim.collectives.bounds.bounds_ps`).

Each term rests on what the simulator cannot avoid, for any algorithm:

* **bandwidth**: bytes that must leave (or reach) a chip cross its links out (in), each
  direction at ``link_bw``. A chip's own data cannot ride on another element (every
  transfer moves element ranges), so: all_gather: chip ``c`` receives everything but its
  own block, ``(p-1) n`` over all chips, through all links into chips; reduce_scatter:
  chip ``c`` must send its input of every other chip's block, ``(p-1) n`` over all chips,
  through all links out of chips; alltoall: ``(p-1) n / p`` out of and into every chip;
  broadcast: ``n`` into every chip but the root (and out of the root); reduce: ``n`` out of
  every chip but the root, ``n`` into the root; sendrecv: ``n`` out of and into every chip.
* **latency**: data crosses the network's shortest route, each hop ``a`` (cut-through: an
  ``h``-hop transfer takes ``h a`` plus its bytes). Every topology here is
  vertex-transitive, so the farthest chip from any chip is the diameter away: every
  collective but sendrecv crosses it (alltoall: when its blocks are not empty);
  sendrecv crosses the longest route ``c -> c+1``.
* **reduce**: the sums of reduce_scatter and reduce take ``(p-1) n`` bytes of additions,
  shared by ``p`` engines at best.
* **HBM** (sends read it unless they forward a chunk just received, copies write it,
  reductions read and write it): all_gather ``n`` per chip (its block read, the rest
  written); reduce_scatter ``n + n/p`` (its input read, its block written); alltoall
  ``2 (p-1) n / p`` (every block out read, every block in written); broadcast ``n`` (written
  on every chip but the root, read on the root); reduce ``2n`` on the root (its input read,
  the sum written); sendrecv ``2n`` per chip.
"""

from __future__ import annotations

from sim.collectives.bounds import Bounds, bounds_ps
from sim.collectives.catalog import ALL_COLLECTIVES
from sim.collectives.schedule import CollectiveError
from sim.collectives.steps import model_costs
from sim.fabric import build_network
from sim.topology import Topology


def collective_bounds(
    topo: Topology, nbytes: int, collective: str = "allreduce", *, root: int = 0
) -> Bounds:
    """Lower bounds of one collective of ``nbytes`` (nccl-tests' size; module docstring)."""
    if collective == "allreduce":
        return bounds_ps(topo, nbytes, collective)
    if collective not in ALL_COLLECTIVES:
        raise CollectiveError(
            f"unknown collective {collective!r}; use one of {', '.join(ALL_COLLECTIVES)}"
        )
    net = build_network(topo)
    p = net.chips
    bpe = topo.bpe
    n = float(nbytes - nbytes % bpe)
    if collective == "alltoall":
        n = float((nbytes // bpe // max(p, 1)) * max(p, 1) * bpe)
    if p <= 1 or n == 0:
        return Bounds(0.0, 0.0, 0.0, 0.0)
    c = model_costs(topo, None)
    out = [0] * p
    into = [0] * p
    for u, v in net.links:
        if u < p:
            out[u] += 1
        if v < p:
            into[v] += 1
    others = [x for x in range(p) if x != root]
    if collective == "all_gather":
        link = (p - 1) * n / sum(into)
    elif collective == "reduce_scatter":
        link = (p - 1) * n / sum(out)
    elif collective == "alltoall":
        link = max((p - 1) / p * n / min(out), (p - 1) / p * n / min(into))
    elif collective == "broadcast":
        link = max(n / out[root], max(n / into[x] for x in others))
    elif collective == "reduce":
        link = max(n / into[root], max(n / out[x] for x in others))
    else:  # sendrecv
        link = max(n / min(out), n / min(into))
    hops = [[net.hops(s, d) for d in range(p)] for s in range(p)]
    if collective == "sendrecv":
        far = max(hops[x][(x + 1) % p] for x in range(p))
    else:
        far = max(max(row) for row in hops)
    reduced = (p - 1) / p * n if collective in ("reduce_scatter", "reduce") else 0.0
    memory = {
        "all_gather": n,
        "reduce_scatter": n * (1 + 1 / p),
        "alltoall": 2 * (p - 1) / p * n,
        "broadcast": n,
        "reduce": 2 * n,
        "sendrecv": 2 * n,
    }[collective]
    return Bounds(
        bandwidth=link * c.beta,
        latency=float(far) * c.alpha,
        reduce=reduced * c.gamma,
        hbm=memory * c.mem,
    )
