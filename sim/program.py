"""Build a small kernel program op by op and time it: the way to write your own kernel.

    topo = load_topology("npu-1h")
    p = ProgramBuilder(topo, stages=("dma_in", "vector", "dma_out"))
    x = p.dma("dma0", "dma_in", addr=0, nbytes=4096)
    y = p.serve("fetch", "vector", nbytes=4096, gbs=topo.fetch.bw, deps=[x])
    p.dma("dma2", "dma_out", addr=1 << 20, nbytes=4096, deps=[y])
    log = p.simulate()

Engines are the topology's DMA engines (``dma0`` ...), ``fetch`` and ``pe``; every engine
serves its operations in the order you add them (docs/adr/0001). Programs built this way
are timed op by op (no period extrapolation), which suits kernels of up to ~10^5 ops; the
GEMM kernels implement :class:`sim.core.BlockProgram` directly to go further.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from fractions import Fraction

from sim.core import DMA, PIPE, SERVE, Channels, Op, simulate, simulate_reference
from sim.hbm import transfer_channels
from sim.oplog import OpLog
from sim.topology import Topology
from sim.units import ps_for_bytes

__all__ = ["ProgramBuilder"]


class ProgramBuilder:
    """Accumulates operations in program order; :meth:`simulate` times them."""

    def __init__(self, topo: Topology, stages: Sequence[str]) -> None:
        if not stages or len(set(stages)) != len(stages):
            raise ValueError(f"stages must be distinct names, got {list(stages)!r}")
        self.topo = topo
        self.engines: tuple[str, ...] = (
            *(f"dma{e}" for e in range(topo.dma.engines)),
            "fetch",
            "pe",
        )
        self.stages: tuple[str, ...] = tuple(stages)
        self.channels = Channels(topo.hbm.num_pcs, topo.hbm.burst_ps)
        self.ops: list[Op] = []
        self.num_blocks = 1

    def _engine(self, name: str) -> int:
        try:
            return self.engines.index(name)
        except ValueError:
            raise ValueError(
                f"unknown engine {name!r}; this topology has {', '.join(self.engines)}"
            ) from None

    def _stage(self, name: str) -> int:
        try:
            return self.stages.index(name)
        except ValueError:
            raise ValueError(
                f"unknown stage {name!r}; declared: {', '.join(self.stages)}"
            ) from None

    def _add(self, op: Op) -> int:
        for d in op.deps:
            if not 0 <= d < len(self.ops):
                raise ValueError(
                    f"dependency {d} is not an earlier operation (have {len(self.ops)})"
                )
        self.ops.append(op)
        return len(self.ops) - 1

    def dma(
        self,
        engine: str,
        stage: str,
        *,
        addr: int,
        nbytes: int,
        deps: Iterable[int] = (),
        tile: int = -1,
    ) -> int:
        """A transfer between HBM and SRAM; returns its op id."""
        chans = transfer_channels(self.topo.hbm, addr, nbytes)
        return self._add(
            Op(
                DMA,
                self._engine(engine),
                tuple(deps),
                self._stage(stage),
                nbytes,
                0,
                tile,
                self.topo.dma.setup_ps,
                self.topo.hbm.latency_ps,
                chans,
            )
        )

    def serve(
        self,
        engine: str,
        stage: str,
        *,
        nbytes: int,
        gbs: Fraction,
        deps: Iterable[int] = (),
        macs: int = 0,
        tile: int = -1,
    ) -> int:
        """An operation that holds ``engine`` while it streams ``nbytes`` at ``gbs``."""
        dur = ps_for_bytes(nbytes, gbs)
        return self._add(
            Op(
                SERVE,
                self._engine(engine),
                tuple(deps),
                self._stage(stage),
                nbytes,
                macs,
                tile,
                dur,
                0,
            )
        )

    def tile_op(self, stage: str, *, deps: Iterable[int] = (), tile: int = -1) -> int:
        """One PE tile-op: issues every T, retires D*T after issue."""
        pe = self.topo.pe
        return self._add(
            Op(
                PIPE,
                self._engine("pe"),
                tuple(deps),
                self._stage(stage),
                0,
                pe.tile_macs,
                tile,
                pe.stage_ps,
                pe.pipeline_stages * pe.stage_ps,
            )
        )

    # the BlockProgram protocol: one block holding every op
    def first_op(self, b: int) -> int:
        return 0 if b == 0 else len(self.ops)

    def num_ops(self) -> int:
        return len(self.ops)

    def first_tile(self, b: int) -> int:
        return 0

    def block_ops(self, b: int) -> list[Op]:
        return list(self.ops)

    def block_sig(self, b: int) -> Hashable:
        return b

    def live(self, b: int) -> dict[int, tuple[int, ...]]:
        return {}

    def resources(self, b: int) -> tuple[int, ...]:
        return tuple(range(len(self.engines)))

    def simulate(self) -> OpLog:
        """Time the program (exact, deterministic)."""
        if not self.ops:
            raise ValueError("the program is empty: add operations before simulating")
        return simulate(self, extrapolate=False)

    def simulate_reference(self) -> OpLog:
        """Time it with the event-driven reference (to cross-check)."""
        return simulate_reference(self.ops, self.engines, self.stages, self.channels)
