"""The op log: one record per engine operation, as numpy columns.

Times are integer picoseconds (int64). Engines and stages are small integer codes into
the log's ``engines`` and ``stages`` name tuples, so a million-record log stays compact.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = ["COLUMNS", "DTYPES", "OpLog", "OpRecord"]

I64 = npt.NDArray[np.int64]
COLUMNS = ("chip", "engine", "stage", "op", "start", "end", "nbytes", "macs", "tile")
SMALL = ("chip", "engine", "stage")  # int16 codes; the rest int64
DTYPES: dict[str, type[np.signedinteger[Any]]] = {
    name: (np.int16 if name in SMALL else np.int64) for name in COLUMNS
}


class OpRecord(NamedTuple):
    """One operation, with names resolved (for tests, traces and humans)."""

    chip: int
    engine: str
    stage: str
    op: int
    start_ps: int
    end_ps: int
    nbytes: int
    macs: int
    tile: int


@dataclass(frozen=True, eq=False)
class OpLog:
    """Columns of equal length; ``op`` is the program-order id, ``tile`` the tile-op or -1."""

    engines: tuple[str, ...]
    stages: tuple[str, ...]
    chip: npt.NDArray[np.int16]
    engine: npt.NDArray[np.int16]
    stage: npt.NDArray[np.int16]
    op: I64
    start: I64
    end: I64
    nbytes: I64
    macs: I64
    tile: I64
    meta: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.op)
        for name in COLUMNS:
            col = getattr(self, name)
            if col.dtype != DTYPES[name] or col.shape != (n,):
                raise ValueError(f"OpLog column {name!r} must be {DTYPES[name].__name__}[{n}]")
        if n and bool(np.any(self.end < self.start)):
            bad = int(np.argmax(self.end < self.start))
            raise ValueError(f"OpLog record {bad} ends before it starts: {self.record(bad)}")

    def __len__(self) -> int:
        return len(self.op)

    @classmethod
    def from_columns(
        cls,
        engines: Sequence[str],
        stages: Sequence[str],
        columns: Mapping[str, Sequence[int] | npt.NDArray[Any]],
        meta: dict[str, int] | None = None,
    ) -> OpLog:
        n = len(columns["op"])
        cols = {
            name: np.asarray(columns[name], dtype=DTYPES[name])
            if name in columns
            else np.zeros(n, DTYPES[name])
            for name in COLUMNS
        }
        return cls(tuple(engines), tuple(stages), meta=dict(meta or {}), **cols)

    def record(self, i: int) -> OpRecord:
        return OpRecord(
            int(self.chip[i]),
            self.engines[int(self.engine[i])],
            self.stages[int(self.stage[i])],
            int(self.op[i]),
            int(self.start[i]),
            int(self.end[i]),
            int(self.nbytes[i]),
            int(self.macs[i]),
            int(self.tile[i]),
        )

    def records(self) -> Iterator[OpRecord]:
        for i in range(len(self)):
            yield self.record(i)

    def equals(self, other: OpLog) -> bool:
        """Identical names and identical columns, record for record."""
        return (
            self.engines == other.engines
            and self.stages == other.stages
            and all(np.array_equal(getattr(self, c), getattr(other, c)) for c in COLUMNS)
        )

    def first_difference(self, other: OpLog) -> str:
        """A readable description of where two logs part (for assertion messages)."""
        if (self.engines, self.stages) != (other.engines, other.stages):
            return f"names differ: {self.engines, self.stages} vs {other.engines, other.stages}"
        if len(self) != len(other):
            return f"lengths differ: {len(self)} vs {len(other)}"
        for c in COLUMNS:
            diff = np.flatnonzero(getattr(self, c) != getattr(other, c))
            if len(diff):
                i = int(diff[0])
                return f"record {i} differs in {c}: {self.record(i)} vs {other.record(i)}"
        return "identical"

    def mask(self, *, stage: str | None = None, engine: str | None = None) -> npt.NDArray[np.bool_]:
        m = np.ones(len(self), dtype=bool)
        if stage is not None:
            m &= self.stage == self.stages.index(stage) if stage in self.stages else False
        if engine is not None:
            m &= self.engine == self.engines.index(engine) if engine in self.engines else False
        return m

    @property
    def makespan_ps(self) -> int:
        return int(self.end.max()) if len(self) else 0
