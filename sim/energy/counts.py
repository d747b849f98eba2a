"""The access counts of a run, from what its metrics and programs already count exactly.

* **GEMM** (one chip): MACs issued (the PE does the padded ones), HBM read = DMA-in bytes,
  HBM write = DMA-out bytes, operand fetch = bytes the fetch unit moved SRAM -> PE. SRAM
  reads are the fetches plus each C tile the DMA out reads; SRAM writes are the DMA-in bytes
  plus each finished C tile the PE writes once (output-stationary: partial sums stay in the
  PE's accumulators; docs/adr/0027).
* **Collective** (every chip): per op of the fabric program, a transfer's HBM bytes are reads
  (its sender's), a copy's writes, a reduction's half reads (the local operand) and half
  writes (the sum); a reduction's bytes are reduced (at a chip or a reducing switch). Link
  bytes are per hop (every link record), split by dimension when the energies differ.
* **Tensor-parallel layer**: the joint program's ops: GEMM stages as the GEMM's (coarse
  GEMM blocks from their shard's program and curve), collective ops as a collective's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sim.collectives import CollectiveRun, link_bytes
from sim.collectives.fast import SymmetricRun
from sim.energy.model import AccessCounts
from sim.fabric import COPY, REDUCTION, TRANSFER, FabricProgram, Network, hbm_default
from sim.gemm.program import GemmProgram
from sim.gemm.run import GemmRun
from sim.topology import Topology, dimensions_of
from sim.tp.config import gemm_shapes
from sim.tp.cosim import BLOCK, STAGES
from sim.tp.cosim import COPY as TP_COPY
from sim.tp.cosim import REDUCE as TP_REDUCE
from sim.tp.curve import gemm_curve
from sim.tp.run import LayerRun

__all__ = ["collective_counts", "gemm_counts", "layer_counts", "link_dimensions"]


def gemm_counts(run: GemmRun, metrics: Mapping[str, float]) -> AccessCounts:
    """A GEMM run's counts, from :func:`sim.gemm_metrics`'s exact counters."""
    read, write = int(metrics["hbm_read_bytes"]), int(metrics["hbm_write_bytes"])
    fetch = int(metrics["fetch_bytes"])
    return AccessCounts(
        macs=int(metrics["macs_issued"]),
        hbm_read=read,
        hbm_write=write,
        sram_read=fetch + write,
        sram_write=read + write,
        fetch=fetch,
        chips=1,
        time_ps=run.log.makespan_ps,
    )


def _program(run: CollectiveRun) -> tuple[FabricProgram, int]:
    """The fabric program whose ops the run did, and how many times over (a symmetric run
    stores its representative chips' ops only: every chip does the same)."""
    if isinstance(run, SymmetricRun):
        q = run.quotient
        reps = len(set(q.src))
        if run.chips % reps:
            raise AssertionError(f"{reps} representative chips do not divide {run.chips}")
        return q, run.chips // reps
    return run.compiled.program, 1


def _fabric_ops(
    kinds: Sequence[int], nbytes: Sequence[int], hbm: Sequence[int]
) -> tuple[int, int, int]:
    """(HBM read, HBM write, reduced) bytes of fabric ops (module docstring)."""
    read = write = reduced = 0
    for k, b, m in zip(kinds, nbytes, hbm, strict=True):
        h = hbm_default(k, b) if m < 0 else m
        if k == TRANSFER:
            read += h
        elif k == COPY:
            write += h
        elif k == REDUCTION:
            reduced += b
            read += h // 2
            write += h - h // 2
    return read, write, reduced


def link_dimensions(net: Network, topo: Topology) -> list[int]:
    """The dimension (innermost 0) of each link of ``net`` (ADR 0021's numbering: chip digits
    innermost first, switch nodes after the chips, dimension by dimension)."""
    dims = dimensions_of(topo.chips)
    sizes = [d.size for d in dims]
    p = int(np.prod(sizes))
    strides = [int(np.prod(sizes[:k])) for k in range(len(sizes))]
    switch_dim: list[int] = []
    for k, d in enumerate(dims):
        if d.shape == "switch":
            switch_dim += [k] * sum(1 for b in range(p) if (b // strides[k]) % d.size == 0)
    out = []
    for u, v in net.links:
        if max(u, v) >= p:
            out.append(switch_dim[max(u, v) - p])
            continue
        out.append(
            next(
                k
                for k in range(len(dims))
                if (u // strides[k]) % sizes[k] != (v // strides[k]) % sizes[k]
            )
        )
    return out


def _link_split(
    run: CollectiveRun, topo: Topology, total: int, per_dimension: bool
) -> tuple[int, ...]:
    ndim = len(dimensions_of(topo.chips))
    if not per_dimension or ndim == 1 or isinstance(run, SymmetricRun):
        return (total,)  # one energy for every link (a symmetric run is one ring)
    per_link = link_bytes(run)
    out = [0] * ndim
    for b, d in zip(per_link.tolist(), link_dimensions(run.network, topo), strict=True):
        out[d] += int(b)
    return tuple(out)


def collective_counts(
    run: CollectiveRun, topo: Topology, metrics: Mapping[str, float], per_dimension: bool
) -> AccessCounts:
    """A collective run's counts on every chip (``metrics``: its :func:`collective_metrics`);
    ``per_dimension``: split link bytes by dimension (the energies differ)."""
    prog, times = _program(run)
    read, write, reduced = _fabric_ops(prog.kind, prog.nbytes, prog.hbm)
    total = int(metrics["link_bytes_total"])
    return AccessCounts(
        hbm_read=read * times,
        hbm_write=write * times,
        link=_link_split(run, topo, total, per_dimension),
        reduce=reduced * times,
        chips=run.chips,
        time_ps=run.time_ps,
    )


def _shard_counts(prog: GemmProgram, hbm_total: int) -> tuple[int, int, int, int]:
    """(MACs issued, HBM read, HBM write, fetch bytes) of one whole GEMM shard run coarsely:
    its plan's tile-ops, its C write-backs, the rest of the curve's HBM bytes read."""
    plan = prog.plan
    write = sum(prog.out_bytes(j) for j in range(plan.out_tiles))
    return plan.padded_macs, hbm_total - write, write, plan.tile_ops * (plan.a_bytes + plan.b_bytes)


def layer_counts(run: LayerRun, link_bytes_total: int) -> AccessCounts:
    """A tensor-parallel layer's counts on every chip (module docstring)."""
    prog, cfg, p = run.built.prog, run.cfg, run.net.chips
    stage = [STAGES[s] for s in prog.stage]
    macs = read = write = fetch = 0
    if BLOCK in prog.kind:  # coarse GEMMs: every chip runs each of its shards once, whole
        for _name, shape in gemm_shapes(cfg, p):
            gp = GemmProgram(shape, cfg.variant, run.topo)
            got = _shard_counts(gp, gemm_curve(shape, cfg.variant, run.topo).hbm_bytes)
            macs, read, write, fetch = (
                a + p * b for a, b in zip((macs, read, write, fetch), got, strict=True)
            )
    for s, nb, m in zip(stage, prog.nbytes, prog.macs, strict=True):
        if s == "dma_in":
            read += nb
        elif s == "dma_out":
            write += nb
        elif s == "fetch":
            fetch += nb
        elif s == "gemm":
            macs += m
    fab = [
        (k, nb, h)
        for k, s, nb, h in zip(prog.kind, stage, prog.nbytes, prog.hbm, strict=True)
        if s in ("send", "reduce", "copy")
    ]
    kinds = {TP_COPY: COPY, TP_REDUCE: REDUCTION}
    r, w, reduced = _fabric_ops(
        [kinds.get(k, TRANSFER) for k, _, _ in fab],
        [nb for _, nb, _ in fab],
        [h for _, _, h in fab],
    )
    return AccessCounts(
        macs=macs,
        hbm_read=read + r,
        hbm_write=write + w,
        sram_read=fetch + write,
        sram_write=read + write,
        fetch=fetch,
        link=(link_bytes_total,),
        reduce=reduced,
        chips=p,
        time_ps=run.latency_ps,
    )
