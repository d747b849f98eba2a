"""Planted bugs that double the GEMM's SRAM reads and move nothing timed (issue 29)."""

from __future__ import annotations

from typing import Any

from bugs_registry import Bug


def _gemm_fetch_reads_twice() -> None:
    """Every operand fetch reads its A and B tiles twice from SRAM (a kernel change that
    re-reads its operands), its service time unchanged: twice the SRAM read bytes in the op
    log, the same latency. The per-record check of issue 26 (bytes / fetch_gbs) sees it."""
    import sim.gemm.blocks as blocks
    from sim.core import SERVE

    original = blocks.BlockBuilder._block

    def patched(self: Any, b: int, ops: list[Any], acc: Any) -> None:
        first = len(ops)
        original(self, b, ops, acc)
        for i in range(first, len(ops)):
            if ops[i].kind == SERVE:
                ops[i] = ops[i]._replace(nbytes=2 * ops[i].nbytes)

    blocks.BlockBuilder._block = patched  # type: ignore[method-assign]


def _gemm_fetch_bytes_doubled() -> None:
    """The GEMM's operand fetches count twice their bytes (a fetch path that moves each
    operand twice, as wide, so no record's time moves): only the counts the energy reads
    change, so only the energy metrics (and the byte counters beside them) can fail."""
    import sim
    import sim.gemm.metrics as m

    original = m.gemm_metrics

    def patched(*args: Any, **kwargs: Any) -> dict[str, float]:
        out = dict(original(*args, **kwargs))
        out["fetch_bytes"] = 2 * out["fetch_bytes"]
        return out

    m.gemm_metrics = patched  # type: ignore[assignment]
    sim.gemm_metrics = patched  # type: ignore[attr-defined]


BUGS: dict[str, Bug] = {
    "energy-gemm-fetch-reads-twice": _gemm_fetch_reads_twice,
    "energy-gemm-fetch-bytes-doubled": _gemm_fetch_bytes_doubled,
}
