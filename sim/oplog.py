"""The op log: one record per engine operation, as numpy columns, optionally periodic.

Times are integer picoseconds (int64). Engines and stages are small integer codes into
the log's ``engines`` and ``stages`` name tuples, so a million-record log stays compact.

A log from the fast simulator is **compressed** (docs/adr/0011): where the simulation
found a period, the log stores the period's records once plus a :class:`Repeat` (how
many copies follow it, and the time / op-id / tile-op shift of each). The column
attributes (``log.start`` ...) are the full, expanded columns, built on first use and
then kept; consumers that can work on the period (``sim.gemm.metrics``,
``check_coverage``) read :attr:`OpLog.stored` and :attr:`OpLog.repeats` instead and never
expand a long log.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from sim.limits import check_stored_records

__all__ = ["COLUMNS", "DTYPES", "OpLog", "OpRecord", "Repeat"]

I64 = npt.NDArray[np.int64]
I16 = npt.NDArray[np.int16]
COLUMNS = ("chip", "engine", "stage", "op", "start", "end", "nbytes", "macs", "tile")
SMALL = ("chip", "engine", "stage")  # int16 codes; the rest int64
DTYPES: dict[str, type[np.signedinteger[Any]]] = {
    name: (np.int16 if name in SMALL else np.int64) for name in COLUMNS
}
SHIFTED = ("start", "end", "op", "tile")  # the columns a copy shifts (tile only where >= 0)


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


class Repeat(NamedTuple):
    """Stored records ``[lo, hi)`` are followed by ``n`` copies; copy k (1-based) has
    ``start``/``end`` + k ``shift_ps``, ``op`` + k ``ops_shift`` and (where >= 0) ``tile``
    + k ``tiles_shift``; every other column is the same."""

    lo: int
    hi: int
    n: int
    shift_ps: int
    ops_shift: int
    tiles_shift: int


def copies(
    name: str, src: npt.NDArray[Any], rep: Repeat, first: int, last: int
) -> npt.NDArray[Any]:
    """Column ``name`` of copies ``first..last`` (1-based, inclusive) of ``src`` (one period)."""
    k = np.arange(first, last + 1, dtype=np.int64)[:, None]
    if name in ("start", "end"):
        out = src[None, :] + k * rep.shift_ps
    elif name == "op":
        out = src[None, :] + k * rep.ops_shift
    elif name == "tile":
        out = src[None, :] + np.where(src >= 0, rep.tiles_shift, 0)[None, :] * k
    else:
        out = np.broadcast_to(src[None, :], (len(k), len(src)))
    return np.ascontiguousarray(out, dtype=src.dtype).reshape(-1)


@dataclass(frozen=True, eq=False, init=False, repr=False)
class OpLog:
    """Columns of equal length; ``op`` is the program-order id, ``tile`` the tile-op or -1.

    ``OpLog(engines, stages, chip, engine, stage, op, start, end, nbytes, macs, tile,
    meta=..., repeats=...)``: the columns are the *stored* records; ``repeats`` (sorted,
    disjoint :class:`Repeat` s over them) expand them to the full log. The column
    attributes are the full columns; ``dataclasses.replace(log, start=...)`` builds an
    uncompressed log from the full columns.
    """

    engines: tuple[str, ...]
    stages: tuple[str, ...]
    chip: I16
    engine: I16
    stage: I16
    op: I64
    start: I64
    end: I64
    nbytes: I64
    macs: I64
    tile: I64
    meta: dict[str, int]
    repeats: tuple[Repeat, ...] = field(init=False)
    stored: dict[str, npt.NDArray[Any]] = field(init=False)  # the stored records' columns

    def __init__(
        self,
        engines: Sequence[str],
        stages: Sequence[str],
        chip: I16,
        engine: I16,
        stage: I16,
        op: I64,
        start: I64,
        end: I64,
        nbytes: I64,
        macs: I64,
        tile: I64,
        meta: dict[str, int] | None = None,
        repeats: Sequence[Repeat] = (),
    ) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "engines", tuple(engines))
        setattr_(self, "stages", tuple(stages))
        setattr_(self, "meta", dict(meta or {}))
        cols: dict[str, npt.NDArray[Any]] = dict(
            zip(COLUMNS, (chip, engine, stage, op, start, end, nbytes, macs, tile), strict=True)
        )
        n = len(op)
        for name in COLUMNS:
            col = cols[name]
            if col.dtype != DTYPES[name] or col.shape != (n,):
                raise ValueError(f"OpLog column {name!r} must be {DTYPES[name].__name__}[{n}]")
        setattr_(self, "stored", cols)
        setattr_(self, "repeats", tuple(Repeat(*r) for r in repeats))
        prev = 0
        for r in self.repeats:
            if not (prev <= r.lo < r.hi <= n and r.n >= 1 and r.shift_ps > 0):
                raise ValueError(f"OpLog repeat {r} is not a period of the stored records")
            prev = r.hi
        setattr_(self, "_len", n + sum(r.n * (r.hi - r.lo) for r in self.repeats))
        setattr_(self, "_full", {} if self.repeats else dict(cols))
        if n and bool(np.any(end < start)):
            bad = int(np.argmax(end < start))
            rec = self._stored_record(bad)
            raise ValueError(f"OpLog record {bad} ends before it starts: {rec}")

    def __len__(self) -> int:
        return int(self._len)  # type: ignore[attr-defined]

    @property
    def compressed(self) -> bool:
        return bool(self.repeats)

    # the full columns (expanded on first use) ---------------------------------------------
    def column(self, name: str) -> npt.NDArray[Any]:
        """Column ``name`` of the full log (expanded from the periods once, then kept)."""
        full: dict[str, npt.NDArray[Any]] = self._full  # type: ignore[attr-defined]
        col = full.get(name)
        if col is None:
            if self.repeats and not full:
                check_stored_records(len(self), "writing out a compressed op log's columns")
            src = self.stored[name]
            parts: list[npt.NDArray[Any]] = []
            pos = 0
            for r in self.repeats:
                parts.append(src[pos : r.hi])
                parts.append(copies(name, src[r.lo : r.hi], r, 1, r.n))
                pos = r.hi
            parts.append(src[pos:])
            col = full[name] = np.concatenate(parts)
        return col

    def expanded(self) -> OpLog:
        """The same log with every period written out (no repeats)."""
        if not self.repeats:
            return self
        return _build(self.engines, self.stages, {c: self.column(c) for c in COLUMNS}, self.meta)

    @classmethod
    def from_columns(
        cls,
        engines: Sequence[str],
        stages: Sequence[str],
        columns: Mapping[str, Sequence[int] | npt.NDArray[Any]],
        meta: dict[str, int] | None = None,
        repeats: Sequence[Repeat] = (),
    ) -> OpLog:
        n = len(columns["op"])
        cols = {
            name: np.asarray(columns[name], dtype=DTYPES[name])
            if name in columns
            else np.zeros(n, DTYPES[name])
            for name in COLUMNS
        }
        return _build(engines, stages, cols, meta, repeats)

    def _stored_record(self, i: int) -> OpRecord:
        c = self.stored
        return self._make(*(int(c[name][i]) for name in COLUMNS))

    def _make(self, chip: int, eng: int, stage: int, *rest: int) -> OpRecord:
        return OpRecord(chip, self.engines[eng], self.stages[stage], *rest)

    def record(self, i: int) -> OpRecord:
        if not self.repeats:
            return self._stored_record(i)
        return self._make(*(int(self.column(name)[i]) for name in COLUMNS))

    def records(self) -> Iterator[OpRecord]:
        for i in range(len(self)):
            yield self.record(i)

    def equals(self, other: OpLog) -> bool:
        """Identical names and identical columns, record for record."""
        return (
            self.engines == other.engines
            and self.stages == other.stages
            and len(self) == len(other)
            and all(np.array_equal(self.column(c), other.column(c)) for c in COLUMNS)
        )

    def first_difference(self, other: OpLog) -> str:
        """A readable description of where two logs part (for assertion messages)."""
        if (self.engines, self.stages) != (other.engines, other.stages):
            return f"names differ: {self.engines, self.stages} vs {other.engines, other.stages}"
        if len(self) != len(other):
            return f"lengths differ: {len(self)} vs {len(other)}"
        for c in COLUMNS:
            diff = np.flatnonzero(self.column(c) != other.column(c))
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
        """Last end (the copies of a period end later than the period, by their shift)."""
        if not len(self):
            return 0
        end = self.stored["end"]
        best = int(end.max()) if len(end) else 0
        for r in self.repeats:
            best = max(best, int(end[r.lo : r.hi].max()) + r.n * r.shift_ps)
        return best


def _build(
    engines: Sequence[str],
    stages: Sequence[str],
    c: Mapping[str, npt.NDArray[Any]],
    meta: dict[str, int] | None,
    repeats: Sequence[Repeat] = (),
) -> OpLog:
    return OpLog(
        engines,
        stages,
        c["chip"],
        c["engine"],
        c["stage"],
        c["op"],
        c["start"],
        c["end"],
        c["nbytes"],
        c["macs"],
        c["tile"],
        meta=meta,
        repeats=repeats,
    )


def _column_property(name: str) -> property:
    return property(lambda self: self.column(name), doc=f"The full {name!r} column.")


for _name in COLUMNS:  # the full columns; the dataclass fields above declare their types
    setattr(OpLog, _name, _column_property(_name))
