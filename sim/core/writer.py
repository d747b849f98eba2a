"""The op log as the engine writes it: records appended per block, periods stored once."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import numpy as np

from sim.core.ops import SimulationError
from sim.limits import check_stored_records  # one definition of the int64-ps ceiling
from sim.oplog import DTYPES, OpLog, Repeat


class Writer:
    """Stored record columns in chunks; Python lists for the live segment; the periods.

    A period found by the fast path is stored once with a :class:`~sim.oplog.Repeat`
    (its copies are never written out: the op log is compressed, docs/adr/0011).
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self.chunks: list[list[list[int]]] = []
        self.pos = 0  # stored records flushed
        self.logical = 0  # records of the full log flushed (copies included)
        self.repeats: list[Repeat] = []
        self.reset()

    def reset(self) -> None:
        self.engine: list[int] = []
        self.stage: list[int] = []
        self.op: list[int] = []
        self.start: list[int] = []
        self.end: list[int] = []
        self.nbytes: list[int] = []
        self.macs: list[int] = []
        self.tile: list[int] = []

    @property
    def count(self) -> int:
        """Stored records so far (where a period found now would start)."""
        return self.pos + len(self.op)

    def flush(self) -> None:
        n = len(self.op)
        if self.logical + n > self.total:
            raise SimulationError("the program emitted more operations than it declared")
        if n:
            if (self.pos + n) // _GUARD_EVERY != self.pos // _GUARD_EVERY:
                check_stored_records(self.pos + n, "a fast-path op log that found no period")
            self.chunks.append([getattr(self, name) for name in _WRITTEN])
        self.pos += n
        self.logical += n
        self.reset()

    def repeat(self, rec0: int, n: int, lam: int, ops_shift: int, tiles_shift: int) -> None:
        """Records ``[rec0, count)`` are followed by ``n`` copies, copy k shifted by k periods."""
        self.flush()
        length = self.pos - rec0
        if self.logical + n * length > self.total:
            raise SimulationError("the program emitted more operations than it declared")
        self.repeats.append(Repeat(rec0, self.pos, n, lam, ops_shift, tiles_shift))
        self.logical += n * length

    def oplog(self, engines: Sequence[str], stages: Sequence[str], meta: dict[str, int]) -> OpLog:
        self.flush()
        if self.logical != self.total:
            raise SimulationError(
                f"the program declared {self.total} operations but emitted {self.logical}"
            )
        cols: dict[str, np.ndarray] = {  # one pass over each column's chunks
            name: np.fromiter(
                chain.from_iterable(chunk[c] for chunk in self.chunks), DTYPES[name], self.pos
            )
            for c, name in enumerate(_WRITTEN)
        }
        cols["chip"] = np.zeros(self.pos, DTYPES["chip"])
        return OpLog.from_columns(engines, stages, cols, meta, repeats=self.repeats)


_WRITTEN = ("engine", "stage", "op", "start", "end", "nbytes", "macs", "tile")
_GUARD_EVERY = 1 << 16  # stored records between memory-budget checks (check_stored_records)
