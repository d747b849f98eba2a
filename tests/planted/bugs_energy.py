"""Planted bugs that move energy and nothing timed (issue 29): the gate must fail on the
energy metrics and say which component moved."""

from __future__ import annotations

from typing import Any

from bugs_registry import Bug


def _gemm_fetch_reads_twice() -> None:
    """Every GEMM operand fetch reads its A and B tiles twice from SRAM (a kernel change that
    re-reads its operands, say for a second pass the PE discards), on a fetch path wide
    enough that the service time does not move: twice the SRAM read bytes, the same latency."""
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


BUGS: dict[str, Bug] = {"energy-gemm-fetch-reads-twice": _gemm_fetch_reads_twice}
