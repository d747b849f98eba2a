"""An elementwise kernel, y = a * x + b, as a pytest-npubench bench (docs/writing-a-bench.md).

The vector is cut into tiles; each tile is loaded by DMA engine 0, processed by the
on-chip vector path (npu-1h has no separate vector unit, so the kernel streams the tile
through the fetch path at ``fetch_gbs``) and stored by DMA engine 2. With BUFFERS = 2 the
load of tile i+1 overlaps the processing of tile i.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_npubench import Bench, Metric, Result
from sim import OpLog, load_topology
from sim.program import ProgramBuilder

TOPOLOGY = load_topology("npu-1h")
BUFFERS = 2  # input and output buffers per tile slot
TILE_ELEMENTS = 2048


def build(elements: int) -> ProgramBuilder:
    """The kernel's program: load, process, store per tile, BUFFERS tiles in flight.

    Every engine serves in the order ops are added, so the order is the kernel's issue
    order: the store of tile i is issued after the load of tile i + BUFFERS (software
    pipelining), otherwise the next loads would queue behind it on the HBM channels.
    """
    topo, bpe = TOPOLOGY, TOPOLOGY.bpe
    p = ProgramBuilder(topo, stages=("dma_in", "vector", "dma_out"))
    tiles = -(-elements // TILE_ELEMENTS)
    y_base = tiles * TILE_ELEMENTS * bpe

    def nbytes(i: int) -> int:
        return min(TILE_ELEMENTS, elements - i * TILE_ELEMENTS) * bpe

    def store(i: int) -> int:
        addr = y_base + i * TILE_ELEMENTS * bpe
        return p.dma("dma2", "dma_out", addr=addr, nbytes=nbytes(i), deps=[work[i]], tile=i)

    work: list[int] = []
    stores: list[int] = []
    for i in range(tiles):
        in_free = [work[i - BUFFERS]] if i >= BUFFERS else []  # input buffer consumed
        load = p.dma(
            "dma0", "dma_in", addr=i * TILE_ELEMENTS * bpe, nbytes=nbytes(i), deps=in_free, tile=i
        )
        if i >= BUFFERS:
            stores.append(store(i - BUFFERS))
        out_free = [stores[i - BUFFERS]] if i >= BUFFERS else []  # output buffer written back
        work.append(
            p.serve(
                "fetch",
                "vector",
                nbytes=nbytes(i),
                gbs=topo.fetch.bw,
                deps=[load, *out_free],
                tile=i,
            )
        )
    for i in range(max(0, tiles - BUFFERS), tiles):
        stores.append(store(i))
    return p


def functional_check(log: OpLog, elements: int) -> int:
    """Apply the kernel tile by tile in simulated order; count wrong elements."""
    rng = np.random.default_rng(0)
    x = rng.integers(-100, 100, size=elements).astype(np.float64)
    a, b = 3.0, -7.0
    y = np.full(elements, np.nan)
    vector = log.stage == log.stages.index("vector")
    for tile in log.tile[vector][np.argsort(log.start[vector], kind="stable")]:
        s = slice(int(tile) * TILE_ELEMENTS, (int(tile) + 1) * TILE_ELEMENTS)
        y[s] = a * x[s] + b
    return int(np.count_nonzero(y != a * x + b))


def run(params: dict[str, Any]) -> Result:
    elements = params["elements"]
    log = build(elements).simulate()
    latency_ns = log.makespan_ps / 1000
    dma = (log.stage == log.stages.index("dma_in")) | (log.stage == log.stages.index("dma_out"))
    hbm_bytes = int(log.nbytes[dma].sum())
    wrong = functional_check(log, elements)
    return Result(
        metrics={
            "latency_ns": latency_ns,
            "achieved_gbs": hbm_bytes / latency_ns,
            "hbm_bytes": hbm_bytes,
        },
        ok=wrong == 0,
        message=f"{wrong} of {elements} elements wrong" if wrong else "",
    )


BENCH = Bench(
    name="elementwise",
    sweep={"elements": [2**16, 2**20]},
    run=run,
    metrics={
        "latency_ns": Metric("ns", "lower", tolerance=0.001),
        "achieved_gbs": Metric("GB/s", "higher", gate=False),
        "hbm_bytes": Metric("B", "lower", gate=False),
    },
    config_id=lambda p: f"{p['elements']}el",
    fingerprint=lambda: TOPOLOGY.fingerprint,
)
