"""nccl-tests / rccl-tests result tables: read them as printed, write them as printed.

**Reading** (:func:`parse_table`, :func:`read_table`): the standard output of any
``*_perf`` binary (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``alltoall``,
``broadcast``, ``reduce``, ``sendrecv``): comment lines, the column header in its variants
(``# size count type redop root time algbw busbw #wrong time algbw busbw #wrong``; older
versions lack ``root``, some lack ``redop``, the oldest print ``error`` instead of
``#wrong``; newer ones may add per-iteration columns or a ``timestamp``), out-of-place and
in-place columns (in-place ``N/A`` or absent, ``#wrong`` ``N/A`` without validation), any
whitespace (documents collapse the padding), ``mpirun --tag-output`` prefixes and
``NCCL INFO`` log lines between rows. The collective comes from the caller, else the
``# Collective test starting:`` line, else a ``*_perf`` binary name in the text or the file
name; the rank count from the ``# Rank`` lines, else ``nThread x nGpus``.

**Writing** (:func:`format_table`): the same table from simulated times, with nccl-tests'
columns and number formats, so ``diff`` against a real run lines up.

Every problem is one :class:`InputError` naming the file, the line and what is wrong.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from sim.errors import InputError, short_repr
from sim.inputfile import read_text

__all__ = [
    "MAX_TABLE_BYTES",
    "NCCL_NAMES",
    "Measurement",
    "Row",
    "Table",
    "bus_factor",
    "collective_name",
    "element_count",
    "format_table",
    "format_time_us",
    "parse_table",
    "read_table",
    "simulated_row",
]

MAX_TABLE_BYTES = 16 << 20  # a 31-size table is ~5 KiB, a verbose NCCL_DEBUG log a few MiB

#: nccl-tests' binary stem -> the simulator's collective name
NCCL_NAMES = {
    "all_reduce": "allreduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "alltoall": "alltoall",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "sendrecv": "sendrecv",
}
_SIM_NAMES = {sim: nccl for nccl, sim in NCCL_NAMES.items()}
#: collectives whose printed ``count`` is per rank (the size column is the whole vector)
_PER_RANK_COUNT = {"all_gather", "reduce_scatter", "alltoall"}
_OTHER_PERF = ("gather", "scatter", "hypercube", "alltoallv")

_RANK = re.compile(r"^#\s*Rank\s+(\d+)\b")
_THREADS = re.compile(r"\bnThread\s+(\d+)\s+nGpus\s+(\d+)")
_STARTING = re.compile(r"Collective test starting:\s*(\S+)")
_BINARY = re.compile(
    r"(?<![A-Za-z0-9_])(" + "|".join([*NCCL_NAMES, *_OTHER_PERF]) + r")_perf(?![A-Za-z0-9])"
)
_TAG_PREFIX = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s?")
_LOG_LINE = re.compile(r"\b[NR]CCL (?:INFO|WARN|TRACE|ERROR)\b")
_WHOLE = re.compile(r"^[0-9]+$")
_PREAMBLE = ("size", "count", "type", "redop", "root")
_TIME = ("time", "cputime")
_WRONG = ("#wrong", "wrong", "error")


def collective_name(name: str, where: str = "--collective") -> str:
    """The simulator's name for a collective given either way (``all_reduce``,
    ``all_reduce_perf`` or ``allreduce``)."""
    stem = name.strip().lower().removesuffix("_perf")
    if stem in NCCL_NAMES:
        return NCCL_NAMES[stem]
    if stem in _SIM_NAMES:
        return stem
    known = ", ".join(NCCL_NAMES)
    raise InputError(f"{where}: {short_repr(name)} is not a collective nccl-tests runs ({known})")


def bus_factor(collective: str, ranks: int) -> float:
    """nccl-tests' busbw / algbw for ``collective`` (a simulator name) on ``ranks`` ranks:
    allreduce ``2(p-1)/p``; all_gather, reduce_scatter, alltoall ``(p-1)/p``; the rest 1."""
    if collective == "allreduce":
        return 2 * (ranks - 1) / ranks
    if collective in _PER_RANK_COUNT:
        return (ranks - 1) / ranks
    return 1.0


def element_count(collective: str, size: int, ranks: int, element_bytes: int) -> int:
    """The ``count`` nccl-tests prints for a ``size``-byte row (per rank for the gathers)."""
    count = size // element_bytes
    return count // ranks if collective in _PER_RANK_COUNT else count


@dataclass(frozen=True)
class Measurement:
    """One half of a row (out-of-place or in-place): time (us), algbw and busbw (GB/s, 1e9
    bytes), and ``#wrong`` (None when printed ``N/A``; the oldest versions' max error)."""

    time_us: float
    algbw_gbs: float
    busbw_gbs: float
    wrong: float | None


@dataclass(frozen=True)
class Row:
    """One size of a table; ``line`` is its line number in the file (0: not from a file)."""

    line: int
    size: int
    count: int
    type: str
    redop: str | None
    root: int | None
    out_of_place: Measurement | None
    in_place: Measurement | None

    def measured(self, inplace: bool = False) -> Measurement | None:
        return self.in_place if inplace else self.out_of_place


@dataclass(frozen=True)
class Table:
    """A parsed table: where it came from, its collective (the simulator's name), its rank
    count (None when the text does not say) and its rows in file order."""

    source: str
    collective: str
    ranks: int | None
    rows: tuple[Row, ...]

    @property
    def nccl_name(self) -> str:
        return _SIM_NAMES.get(self.collective, self.collective)


# --- reading -------------------------------------------------------------------------------


class _Columns:
    """The header's layout: the preamble columns, then one group per half (time first)."""

    def __init__(self, source: str, line: int, tokens: list[str]) -> None:
        at = next((i for i, t in enumerate(tokens) if t in _TIME), None)
        where = f"{source}: line {line}"
        if at is None:
            raise InputError(f"{where}: the column header has no 'time' column")
        self.preamble = tokens[:at]
        unknown = [t for t in self.preamble if t not in _PREAMBLE]
        if unknown or "count" not in self.preamble:
            raise InputError(
                f"{where}: the column header starts {' '.join(self.preamble)!r}; nccl-tests "
                f"prints 'size count [type] [redop] [root]' before the times"
            )
        self.groups: list[list[str]] = []
        for token in tokens[at:]:
            if token in _TIME:
                self.groups.append([])
            self.groups[-1].append(token)
        if len(self.groups) > 2 or any(not {"algbw", "busbw"} <= set(g) for g in self.groups):
            raise InputError(
                f"{where}: expected one or two groups of 'time algbw busbw #wrong' "
                f"(out-of-place, in-place), got {' '.join(tokens[at:])!r}"
            )
        self.line = line

    @staticmethod
    def width(group: list[str]) -> int:
        return len(group) + (1 if "timestamp" in group else 0)  # a date and a time

    @property
    def full(self) -> int:
        return len(self.preamble) + sum(self.width(g) for g in self.groups)

    def names(self) -> str:
        return " ".join(self.preamble + [t for g in self.groups for t in g])


def _number(where: str, name: str, token: str) -> float:
    try:
        value = float(token)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise InputError(f"{where}: {name} {short_repr(token)} is not a number")
    return value


def _whole(where: str, name: str, token: str, unit: str) -> int:
    if not _WHOLE.match(token):
        raise InputError(f"{where}: {name} {short_repr(token)} is not a whole number of {unit}")
    if len(token) > 19:  # past 2**63: no run measures it, and int() of 5000 digits raises
        raise InputError(f"{where}: {name} {short_repr(token)} is too large (over 19 digits)")
    return int(token)


def _half(where: str, group: list[str], tokens: list[str]) -> Measurement | None:
    values = dict(zip(group, tokens, strict=False))  # a timestamp's second token is unnamed
    main = [values[g] for g in group if g in (*_TIME, "algbw", "busbw")]
    if all(t == "N/A" for t in main):
        return None
    time_key = next(g for g in group if g in _TIME)
    wrong_key = next((g for g in group if g in _WRONG), None)
    wrong_text = values.get(wrong_key, "N/A") if wrong_key else "N/A"
    time_us = _number(where, time_key, values[time_key])
    if time_us < 0:
        raise InputError(f"{where}: {time_key} {short_repr(values[time_key])} is negative")
    return Measurement(
        time_us=time_us,
        algbw_gbs=_number(where, "algbw", values["algbw"]),
        busbw_gbs=_number(where, "busbw", values["busbw"]),
        wrong=None if wrong_text == "N/A" else _number(where, wrong_key or "#wrong", wrong_text),
    )


def _row(source: str, line: int, cols: _Columns, tokens: list[str]) -> Row:
    where = f"{source}: line {line}"
    p = len(cols.preamble)
    first = cols.width(cols.groups[0])
    if len(tokens) != cols.full and not (len(cols.groups) == 2 and len(tokens) == p + first):
        raise InputError(
            f"{where}: {len(tokens)} columns, but the header (line {cols.line}) has "
            f"{cols.full}: {cols.names()}"
        )
    head = dict(zip(cols.preamble, tokens, strict=False))
    size = _whole(where, "size", head["size"], "bytes")
    count = _whole(where, "count", head["count"], "elements")
    root = None
    if "root" in head:
        try:
            root = int(head["root"])
        except ValueError:
            raise InputError(
                f"{where}: root {short_repr(head['root'])} is not an integer"
            ) from None
    out = _half(where, cols.groups[0], tokens[p : p + first])
    inp = None
    if len(cols.groups) == 2 and len(tokens) == cols.full:
        inp = _half(where, cols.groups[1], tokens[p + first :])
    return Row(line, size, count, head.get("type", ""), head.get("redop"), root, out, inp)


def _infer_collective(source: str, lines: Sequence[str]) -> str:
    for text in lines:
        m = _STARTING.search(text)
        if m:
            return collective_name(m.group(1), f"{source}: 'Collective test starting'")
    found = sorted({m.group(1) for text in lines for m in _BINARY.finditer(text)})
    if not found:
        found = sorted({m.group(1) for m in _BINARY.finditer(os.path.basename(source))})
    if len(found) > 1:
        raise InputError(
            f"{source}: names several nccl-tests binaries "
            f"({', '.join(f'{f}_perf' for f in found)}); say which table this is with --collective"
        )
    if found and found[0] in NCCL_NAMES:
        return NCCL_NAMES[found[0]]
    if found:
        raise InputError(
            f"{source}: {found[0]}_perf is not a collective the simulator runs "
            f"({', '.join(NCCL_NAMES)})"
        )
    raise InputError(
        f"{source}: cannot tell which collective this table measures (no '# Collective test "
        "starting:' line, no *_perf binary name in the text or the file name); pass "
        "--collective, e.g. --collective all_reduce"
    )


def _ranks(lines: Sequence[str]) -> int | None:
    ranks = {int(m.group(1)) for text in lines if (m := _RANK.match(text))}
    if ranks:
        return len(ranks)
    for text in lines:
        m = _THREADS.search(text)
        if m:
            return int(m.group(1)) * int(m.group(2))
    return None


def parse_table(text: str, source: str = "<text>", collective: str | None = None) -> Table:
    """The table in ``text`` (``source`` names it in messages); ``collective`` overrides the
    one the text names (either spelling: ``all_reduce`` or ``allreduce``)."""
    lines = [_TAG_PREFIX.sub("", raw) for raw in text.splitlines()]
    cols: _Columns | None = None
    rows: list[Row] = []
    seen: dict[int, int] = {}
    for number, text_line in enumerate(lines, start=1):
        stripped = text_line.strip()
        if stripped.startswith("#"):
            tokens = stripped.lstrip("#").split()
            if tokens[:1] == ["size"] and "busbw" in tokens:
                if cols is not None:
                    raise InputError(
                        f"{source}: line {number}: a second table starts here (the first at "
                        f"line {cols.line}); give one table per file"
                    )
                cols = _Columns(source, number, tokens)
            continue
        if not stripped or cols is None or _LOG_LINE.search(stripped):
            continue  # prose and version lines before the header, NCCL log lines between rows
        row = _row(source, number, cols, stripped.split())
        if row.size in seen:
            raise InputError(
                f"{source}: line {number}: size {row.size} is given twice (first at line "
                f"{seen[row.size]}); give one table per file"
            )
        seen[row.size] = number
        rows.append(row)
    if cols is None:
        raise InputError(
            f"{source}: not an nccl-tests table: no column header line "
            "('# size count type redop root time algbw busbw #wrong ...') in "
            f"{len(lines)} lines"
        )
    if not rows:
        raise InputError(f"{source}: the table (header at line {cols.line}) has no result rows")
    name = collective_name(collective) if collective else _infer_collective(source, lines)
    return Table(source, name, _ranks(lines), tuple(rows))


def read_table(path: str | os.PathLike[str], collective: str | None = None) -> Table:
    """The table in the file ``path`` (a regular UTF-8 file of at most 16 MiB)."""
    text = read_text(path, what="nccl-tests table", limit=MAX_TABLE_BYTES, error=InputError)
    return parse_table(text, os.fspath(path), collective)


# --- writing -------------------------------------------------------------------------------

Style = Literal["classic", "current"]


def _float_str(value: float, width: int) -> str:
    """nccl-tests >= 2.14's ``getFloatStr``: as many decimals as fit ``width``."""
    power = 0
    bound = 1
    while value >= bound:
        power += 1
        bound *= 10
    if power < width - 2:
        return f"{value:{width}.2f}"
    if power < width - 1:
        return f"{value:{width}.1f}"
    if power < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.0e}" if width < 7 else f"{value:{width}.1e}"


def format_time_us(time_us: float, style: Style = "classic") -> str:
    """A time as nccl-tests prints it: classic (rccl-tests, nccl-tests <= 2.13) 2 decimals below
    100 us, 1 below 10000 us, else none; ``current`` as many decimals as fit 7 characters."""
    if style == "current":
        return _float_str(time_us, 7)
    if time_us >= 10000.0:
        return f"{time_us:7.0f}"
    return f"{time_us:7.1f}" if time_us >= 100.0 else f"{time_us:7.2f}"


def _body(m: Measurement | None, style: Style) -> str:
    if m is None:
        return f"  {'N/A':>7}  {'N/A':>6}  {'N/A':>6}  {'N/A':>6}"
    wrong = "N/A" if m.wrong is None else f"{m.wrong:g}"
    time = format_time_us(m.time_us, style)
    if style == "current":
        return f"  {time}  {_float_str(m.algbw_gbs, 6)}  {_float_str(m.busbw_gbs, 6)}  {wrong:>6}"
    return f"  {time}  {m.algbw_gbs:6.2f}  {m.busbw_gbs:6.2f}  {wrong:>5}"


_WIDTHS = (10, 12, 8, 6, 6, 7, 6, 6, 6, 7, 6, 6, 6)  # nccl-tests' header: "# %10s  %12s  ..."
_NAMES = ("time", "algbw", "busbw", "#wrong")
_UNITS = ("(us)", "(GB/s)", "(GB/s)", "")


def _columns(names: Sequence[str]) -> str:
    return "# " + "  ".join(f"{n:>{w}}" for n, w in zip(names, _WIDTHS, strict=False))


def simulated_row(
    collective: str, size: int, time_us: float, ranks: int, element_bytes: int, wrong: float = 0
) -> Row:
    """A row of simulated results: algbw = size / time (GB = 1e9 B), busbw by the collective's
    factor; the simulator does not tell in-place from out-of-place, so both halves are one run."""
    algbw = size / (time_us * 1e3) if time_us > 0 else 0.0
    half = Measurement(time_us, algbw, algbw * bus_factor(collective, ranks), wrong)
    type_name = {1: "int8", 2: "bfloat16", 4: "float", 8: "double"}.get(element_bytes, "bytes")
    count = element_count(collective, size, ranks, element_bytes)
    redop = "sum" if collective in ("allreduce", "reduce_scatter", "reduce") else "none"
    root = 0 if collective in ("broadcast", "reduce") else -1
    return Row(0, size, count, type_name, redop, root, half, half)


def format_table(
    collective: str,
    ranks: int,
    rows: Iterable[Row],
    *,
    comments: Sequence[str] = (),
    device: str = "simulated",
    style: Style = "classic",
) -> str:
    """An nccl-tests table of ``rows`` (``collective`` a simulator name) with its header:
    ``comments`` first (each line prefixed ``# ``), the ``nThread`` line, one ``# Rank`` line
    per rank (``device`` as the device name), the columns, the rows, the footer."""
    rows = list(rows)
    nccl = _SIM_NAMES.get(collective, collective)
    sizes = [r.size for r in rows] or [0]
    step = sizes[1] // sizes[0] if len(sizes) > 1 and sizes[0] and sizes[1] % sizes[0] == 0 else 0
    out = [f"# {c}".rstrip() for c in comments]
    out.append(f"# Collective test starting: {nccl}_perf")
    out.append(
        f"# nThread 1 nGpus {ranks} minBytes {min(sizes)} maxBytes {max(sizes)} step: "
        f"{step}(factor) warmup iters: 0 iters: 1 agg iters: 1 validation: 1 graph: 0"
    )
    out += ["#", "# Using devices"]
    out += [
        f"#  Rank {r:2d} Group  0 Pid      0 on  simulator device {r:2d} [0000:00:00] {device}"
        for r in range(ranks)
    ]
    out.append("#")
    out.append(
        _columns(("", "", "", "", "")) + "           out-of-place                       in-place"
    )
    out.append(_columns(("size", "count", "type", "redop", "root", *_NAMES * 2)))
    out.append(_columns(("(B)", "(elements)", "", "", "", *_UNITS * 2)))
    for r in rows:
        root = -1 if r.root is None else r.root
        head = f"{r.size:12d}  {r.count:12d}  {r.type:>8}  {r.redop or 'none':>6}  {root:6d}"
        out.append(head + _body(r.out_of_place, style) + _body(r.in_place, style))
    busbw = [r.out_of_place.busbw_gbs for r in rows if r.out_of_place is not None]
    wrong = sum(
        1 for r in rows for m in (r.out_of_place, r.in_place) if m is not None and (m.wrong or 0)
    )
    out.append(f"# Out of bounds values : {wrong} {'FAILED' if wrong else 'OK'}")
    out.append(f"# Avg bus bandwidth    : {sum(busbw) / len(busbw) if busbw else 0:g} ")
    out.append("#")
    return "\n".join(out) + "\n"
