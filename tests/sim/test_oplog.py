"""The op log container: validation, comparison and record access."""

from __future__ import annotations

import numpy as np
import pytest

from sim.oplog import OpLog


def _log(start: list[int], end: list[int]) -> OpLog:
    n = len(start)
    return OpLog.from_columns(
        ["dma0", "pe"],
        ["dma_in", "gemm"],
        {"engine": [0] * n, "stage": [0] * n, "op": list(range(n)), "start": start, "end": end},
    )


def test_records_resolve_names_and_missing_columns_default_to_zero() -> None:
    """A record carries engine and stage names; columns not given are zeros."""
    log = _log([0, 5], [5, 9])
    rec = log.record(1)
    assert (rec.engine, rec.stage, rec.start_ps, rec.end_ps, rec.macs) == (
        "dma0",
        "dma_in",
        5,
        9,
        0,
    )
    assert log.makespan_ps == 9 and len(log) == 2


def test_a_record_that_ends_before_it_starts_is_rejected() -> None:
    """Negative durations are a simulator bug and are refused at construction."""
    with pytest.raises(ValueError, match="ends before it starts"):
        _log([0, 5], [5, 4])


def test_wrong_dtype_or_length_is_rejected() -> None:
    """Columns must have the declared dtype and a common length."""
    log = _log([0], [1])
    with pytest.raises(ValueError, match="must be int64"):
        OpLog(
            log.engines,
            log.stages,
            log.chip,
            log.engine,
            log.stage,
            log.op,
            log.start.astype(np.float64),
            log.end,
            log.nbytes,
            log.macs,
            log.tile,
        )  # type: ignore[arg-type]


def test_equals_and_first_difference_point_at_the_differing_record() -> None:
    """Equal logs compare equal; different ones say which record and column differ."""
    a, b = _log([0, 5], [5, 9]), _log([0, 5], [5, 10])
    assert a.equals(_log([0, 5], [5, 9]))
    assert not a.equals(b)
    assert "record 1 differs in end" in a.first_difference(b)


def test_a_compressed_log_expands_its_periods_on_first_use() -> None:
    """Stored [a, b, c] with b repeated twice (shift 10 ps, 1 op, 4 tiles) is a, b, b', b'', c."""
    import dataclasses

    from sim.oplog import Repeat

    cols = {
        "start": np.array([0, 5, 40], np.int64),
        "end": np.array([3, 7, 41], np.int64),
        "op": np.array([0, 1, 4], np.int64),
        "tile": np.array([-1, 2, -1], np.int64),
        "nbytes": np.array([1, 2, 3], np.int64),
    }
    log = OpLog.from_columns(("e",), ("s",), cols, repeats=[Repeat(1, 2, 2, 10, 1, 4)])
    assert log.compressed and len(log) == 5 and log.makespan_ps == 41
    assert log.start.tolist() == [0, 5, 15, 25, 40]
    assert log.end.tolist() == [3, 7, 17, 27, 41]
    assert log.op.tolist() == [0, 1, 2, 3, 4]
    assert log.tile.tolist() == [-1, 2, 6, 10, -1]
    assert log.nbytes.tolist() == [1, 2, 2, 2, 3]
    flat = log.expanded()
    assert not flat.compressed and flat.equals(log) and log.equals(flat)
    moved = dataclasses.replace(log, start=log.start - 1)  # full columns, no repeats
    assert len(moved) == 5 and moved.start.tolist() == [-1, 4, 14, 24, 39]


def test_a_repeat_outside_the_stored_records_is_refused() -> None:
    """A period must lie inside the stored records, with a positive shift."""
    from sim.oplog import Repeat

    cols = {"start": np.array([0], np.int64), "end": np.array([1], np.int64), "op": [0]}
    with pytest.raises(ValueError, match="not a period"):
        OpLog.from_columns(("e",), ("s",), cols, repeats=[Repeat(0, 2, 1, 5, 1, 0)])
    with pytest.raises(ValueError, match="not a period"):
        OpLog.from_columns(("e",), ("s",), cols, repeats=[Repeat(0, 1, 1, 0, 1, 0)])
