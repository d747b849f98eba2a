"""nccl-tests / rccl-tests tables: read as printed (every header variant, in-place N/A, any
whitespace), bad input as one error naming file and line, and written back as printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.calibrate.nccltests import (
    Measurement,
    bus_factor,
    collective_name,
    format_table,
    format_time_us,
    parse_table,
    read_table,
    simulated_row,
)
from sim.errors import InputError

PUBLISHED = Path(__file__).resolve().parents[1] / "data" / "published"
MI300X = PUBLISHED / "mi300x-rccl-all_reduce_perf.txt"

# nccl-tests 2.13-style output, padded as printed (trailing spaces too), 2 ranks by MPI (1 GPU
# per process), an NCCL INFO line between its rows
PADDED = (Path(__file__).resolve().parents[1] / "data" / "nccltests" / "padded-mpi.txt").read_text()


def _table(header: str, rows: list[str], before: str = "") -> str:
    return before + f"# {header}\n" + "".join(r + "\n" for r in rows)


def test_reads_the_published_mi300x_table_as_printed() -> None:
    """31 sizes 8 B .. 8 GiB, 8 ranks (the Rank lines), allreduce (from the file name:
    the text names no binary), both halves of a row; the guide's collapsed spaces."""
    table = read_table(MI300X)
    assert (table.collective, table.ranks, len(table.rows)) == ("allreduce", 8, 31)
    assert [r.size for r in table.rows] == [8 << i for i in range(31)]
    first, odd, last = table.rows[0], table.rows[4], table.rows[-1]
    assert (first.count, first.type, first.redop, first.root) == (2, "float", "sum", -1)
    assert first.out_of_place == Measurement(34.13, 0.0, 0.0, 0)
    assert odd.in_place is not None and odd.in_place.time_us == 182.4  # the outlier
    assert last.out_of_place == Measurement(47488, 180.88, 316.55, 0)
    assert last.in_place == Measurement(47594, 180.48, 315.84, 0)
    assert (
        last.line
        == MI300X.read_text()
        .splitlines()
        .index("8589934592 2147483648 float sum -1 47488 180.88 316.55 0 47594 180.48 315.84 0")
        + 1
    )


def test_padded_output_with_log_lines_and_mpi_ranks() -> None:
    """Padding, an NCCL INFO line between rows, nGpus 1 per process but two Rank lines: 2."""
    table = parse_table(PADDED, "run.log", collective="all_reduce")
    assert table.ranks == 2
    assert [(r.size, r.line) for r in table.rows] == [(8, 10), (1024, 12)]
    assert table.rows[1].in_place == Measurement(12345.6, 0.0, 0.0, 0)


@pytest.mark.parametrize(
    ("header", "row", "redop", "root"),
    [
        (
            "size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
            "1024 256 float sum -1 20.5 0.05 0.09 0 21.5 0.05 0.08 0",
            "sum",
            -1,
        ),
        (  # older: no root column
            "size count type redop time algbw busbw #wrong time algbw busbw #wrong",
            "1024 256 float sum 20.5 0.05 0.09 0 21.5 0.05 0.08 0",
            "sum",
            None,
        ),
        (  # older all_gather: no redop either
            "size count type time algbw busbw #wrong time algbw busbw #wrong",
            "1024 256 float 20.5 0.05 0.09 0 21.5 0.05 0.08 0",
            None,
            None,
        ),
        (  # the oldest: a max error instead of #wrong
            "size count type redop time algbw busbw error time algbw busbw error",
            "1024 256 float sum 20.5 0.05 0.09 0e+00 21.5 0.05 0.08 0e+00",
            "sum",
            None,
        ),
    ],
)
def test_header_variants(header: str, row: str, redop: str | None, root: int | None) -> None:
    table = parse_table(_table(header, [row]), "t.txt", collective="allreduce")
    (r,) = table.rows
    assert (r.size, r.count, r.type, r.redop, r.root) == (1024, 256, "float", redop, root)
    assert r.out_of_place == Measurement(20.5, 0.05, 0.09, 0)
    assert r.in_place == Measurement(21.5, 0.05, 0.08, 0)


def test_in_place_not_available() -> None:
    """In-place printed N/A, in-place absent, and #wrong N/A (no validation) all read."""
    header = "size count type redop root time algbw busbw #wrong time algbw busbw #wrong"
    rows = [
        "8 2 float sum -1 10.0 0.00 0.00 N/A N/A N/A N/A N/A",
        "16 4 float sum -1 11.0 0.00 0.00 0",
        "32 8 float sum -1 12.0 0.00 0.00 N/A 13.0 0.00 0.00 N/A",
    ]
    table = parse_table(_table(header, rows), "t.txt", collective="allreduce")
    assert [r.in_place for r in table.rows[:2]] == [None, None]
    assert table.rows[0].out_of_place == Measurement(10.0, 0.0, 0.0, None)
    assert table.rows[2].in_place == Measurement(13.0, 0.0, 0.0, None)


def test_per_iteration_and_timestamp_columns() -> None:
    header = "size count type redop root time algbw busbw #wrong time algbw busbw #wrong timestamp"
    row = "8 2 float sum -1 10.0 0.00 0.00 0 11.0 0.00 0.00 0 2025-01-01 10:00:00"
    (r,) = parse_table(_table(header, [row]), "t.txt", collective="allreduce").rows
    assert r.in_place == Measurement(11.0, 0.0, 0.0, 0)


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("# Collective test starting: all_gather_perf\n", "x.txt", "all_gather"),
        ("mpirun -np 8 ./build/reduce_scatter_perf -b 8 -e 128M -f 2\n", "x.txt", "reduce_scatter"),
        ("", "logs/alltoall_perf-8gpu.txt", "alltoall"),
        ("", "sendrecv_perf.log", "sendrecv"),
        ("", "broadcast_perf.log", "broadcast"),
        ("", "reduce_perf.log", "reduce"),
    ],
)
def test_the_collective_from_the_text_or_the_file_name(text: str, name: str, expected: str) -> None:
    header = "size count type redop root time algbw busbw #wrong time algbw busbw #wrong"
    table = parse_table(_table(header, ["64 16 float sum -1 1 0 0 0 1 0 0 0"], text), name)
    assert table.collective == expected


def test_collective_names_either_spelling_and_the_bus_factors() -> None:
    assert collective_name("all_reduce_perf") == collective_name("allreduce") == "allreduce"
    assert bus_factor("allreduce", 8) == 2 * 7 / 8
    assert bus_factor("all_gather", 8) == bus_factor("alltoall", 8) == 7 / 8
    assert bus_factor("broadcast", 8) == bus_factor("sendrecv", 8) == 1.0
    with pytest.raises(InputError, match=r"allgather.*not a collective"):
        collective_name("allgather")


def _error(text: str, name: str = "bad.txt", collective: str | None = "allreduce") -> str:
    with pytest.raises(InputError) as info:
        parse_table(text, name, collective)
    return str(info.value)


HEADER = "size count type redop root time algbw busbw #wrong time algbw busbw #wrong"


def test_bad_input_is_one_error_naming_file_line_and_problem() -> None:
    assert "bad.txt: not an nccl-tests table: no column header" in _error("hello\n1 2 3\n")
    msg = _error(_table(HEADER, ["8 2 float sum -1 1 0 0 0 1 0 0 0", "1e3 2 float sum -1 1 0 0 0"]))
    assert msg.startswith("bad.txt: line 3: size '1e3' is not a whole number of bytes")
    msg = _error(_table(HEADER, ["8 2 float sum -1 1 0 0 0 1 0 0"]))
    assert msg.startswith("bad.txt: line 2: 12 columns, but the header (line 1) has 13")
    msg = _error(_table(HEADER, ["8 2 float sum -1 fast 0 0 0 1 0 0 0"]))
    assert msg.startswith("bad.txt: line 2: time 'fast' is not a number")
    assert "has no result rows" in _error(_table(HEADER, []))
    huge = _table(HEADER, ["9" * 5000 + " 2 float sum -1 1 0 0 0 1 0 0 0"])
    assert "line 2: size '999" in _error(huge) and "is too large" in _error(huge)
    assert "time '1e400' is not a number" in _error(_table(HEADER, ["8 2 f s -1 1e400 0 0 0"]))
    twice = _table(HEADER, ["8 2 float sum -1 1 0 0 0 1 0 0 0"] * 2)
    assert "line 3: size 8 is given twice (first at line 2)" in _error(twice)
    second = _table(HEADER, ["8 2 float sum -1 1 0 0 0 1 0 0 0", f"# {HEADER}"])
    assert "line 3: a second table starts here" in _error(second)
    assert "cannot tell which collective" in _error(
        _table(HEADER, ["8 2 f s -1 1 0 0 0"]), collective=None
    )
    both = "all_gather_perf then all_reduce_perf\n"
    assert "several nccl-tests binaries" in _error(
        _table(HEADER, ["8 2 f s -1 1 0 0 0"], both), collective=None
    )
    assert "gather_perf is not a collective" in _error(
        _table(HEADER, ["8 2 f s -1 1 0 0 0"]), "gather_perf.txt", None
    )


def test_a_file_that_is_not_text_or_not_there(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such nccl-tests table"):
        read_table(tmp_path / "missing.txt")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match=r"bin\.txt"):
        read_table(tmp_path / "bin.txt")


def test_time_formats_follow_nccl_tests() -> None:
    """Classic (rccl-tests, nccl-tests <= 2.13): 2 decimals under 100 us, 1 under 10000, none
    above; current (getFloatStr): as many as fit 7 characters."""
    assert [format_time_us(t) for t in (34.126, 182.44, 1546.46, 11938.4)] == [
        "  34.13",
        "  182.4",
        " 1546.5",
        "  11938",
    ]
    assert [format_time_us(t, "current") for t in (34.126, 1546.456, 11938.44, 123456.7)] == [
        "  34.13",
        "1546.46",
        "11938.4",
        " 123457",
    ]


@pytest.mark.parametrize("style", ["classic", "current"])
@pytest.mark.parametrize("collective", ["allreduce", "all_gather", "broadcast"])
def test_write_then_read_gives_the_values_back(style: str, collective: str) -> None:
    """Every size and time survives the round trip within the printed precision; count is
    per rank for all_gather; the header names the collective and the rank count."""
    sizes = [8 << (2 * i) for i in range(16)]  # 8 B .. 8 GiB
    times = [3.14159 * 1.9**i for i in range(16)]  # 3 us .. 50 ms: every format
    rows = [simulated_row(collective, s, t, 8, 2) for s, t in zip(sizes, times, strict=True)]
    text = format_table(collective, 8, rows, comments=["simulated"], style=style)  # type: ignore[arg-type]
    back = parse_table(text, "written.txt")
    assert (back.collective, back.ranks) == (collective, 8)
    assert [r.size for r in back.rows] == sizes
    per_rank = 8 if collective == "all_gather" else 1
    assert [r.count for r in back.rows] == [s // 2 // per_rank for s in sizes]
    for wrote, read in zip(rows, back.rows, strict=True):
        for half in ("out_of_place", "in_place"):
            w, r = getattr(wrote, half), getattr(read, half)
            precision = 0.005 if w.time_us < 100 else 0.05 if w.time_us < 1e4 else 0.5
            assert abs(r.time_us - w.time_us) <= precision * (1.0001 if style == "classic" else 1)
            assert abs(r.algbw_gbs - w.algbw_gbs) <= 0.0051
            assert abs(r.busbw_gbs - w.busbw_gbs) <= 0.0051
            assert r.wrong == 0


def test_a_written_row_computes_bandwidth_as_nccl_tests() -> None:
    """1 GiB allreduce in 10 ms on 8 ranks: algbw = bytes / time (1e9 B per GB), busbw x 14/8."""
    row = simulated_row("allreduce", 1 << 30, 10_000.0, 8, 2)
    assert row.out_of_place is not None
    assert row.out_of_place.algbw_gbs == pytest.approx((1 << 30) / 1e9 / 0.01)
    assert row.out_of_place.busbw_gbs == pytest.approx((1 << 30) / 1e9 / 0.01 * 14 / 8)
    assert (row.count, row.type, row.redop, row.root) == (1 << 29, "bfloat16", "sum", -1)
