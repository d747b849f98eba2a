"""What the simulator can represent, and the budgets a run must fit before it starts.

None of these is a hardware constant (those live only in ``sim/topologies/*.yaml``): they
follow from the simulator's number formats, or they are budgets a user can raise.

* **int64 picoseconds.** Times are int64 ps (``sim.oplog``). A run whose worst-case end
  time (the sum of every operation's duration: no schedule can end later) reaches
  :data:`MAX_TIME_PS` is refused. One operation derived from one topology value (a stage,
  a latency, a burst, one tile fetched, one chunk sent or reduced) may last at most
  :data:`MAX_OP_PS`, so that 2**22 of them in a row still fit: the per-key bounds of the
  topology come from there.
* **int16 codes.** Engine and chip codes are int16 columns of the op log, so DMA engines,
  chips and links are bounded by :data:`MAX_CODE`.
* **Budgets.** Before allocating, a run estimates its memory (the op log, the network's
  route table, the collective's program) and, for the all-Python collective engine, its
  operation count; above :func:`memory_budget_bytes` (``NPUBENCH_MEMORY_BUDGET_MIB``) or
  :func:`ops_budget` (``NPUBENCH_OPS_BUDGET``) it raises :class:`sim.errors.BudgetError`
  with the estimate and the variable to raise.
"""

from __future__ import annotations

import math
import operator
import os
import re

from sim.errors import BudgetError, InputError, NpuSimError, short_number, short_repr

__all__ = [
    "DEFAULT_MEMORY_BUDGET_MIB",
    "DEFAULT_OPS_BUDGET",
    "MAX_CODE",
    "MAX_INT_KEY",
    "MAX_OP_PS",
    "MAX_SCALESIM_CFG_BYTES",
    "MAX_SCALESIM_TOPOLOGY_BYTES",
    "MAX_TIME_PS",
    "MAX_TOPOLOGY_FILE_BYTES",
    "MEMORY_BUDGET_ENV",
    "OPS_BUDGET_ENV",
    "ceil_div",
    "check_memory",
    "check_stored_records",
    "check_systolic_layers",
    "check_systolic_work",
    "check_time",
    "memory_budget_bytes",
    "ops_budget",
    "shape_dims",
    "whole_number",
    "whole_text",
]

INT64_MAX = 2**63 - 1
MAX_TIME_PS = 1 << 62  # any end time; the sum of two still fits in int64
MAX_OP_PS = 1 << 40  # one operation (~1.1 s simulated): 2**22 in a row stay below MAX_TIME_PS
MAX_CODE = 2**15 - 1  # engine / chip codes are int16 in the op log
MAX_INT_KEY = 2**31 - 1  # any integer key: a product of two stays far inside int64
MAX_TOPOLOGY_FILE_BYTES = 1 << 20  # a topology is ~1.5 KiB; larger is not a topology
MAX_SCALESIM_CFG_BYTES = 1 << 20  # SCALE-Sim's cfgs are ~1 KiB
MAX_SCALESIM_TOPOLOGY_BYTES = 4 << 20  # its topology CSVs ~40 bytes a layer: ~100,000 layers

MEMORY_BUDGET_ENV = "NPUBENCH_MEMORY_BUDGET_MIB"
DEFAULT_MEMORY_BUDGET_MIB = 2048
OPS_BUDGET_ENV = "NPUBENCH_OPS_BUDGET"
DEFAULT_OPS_BUDGET = 2_000_000  # collective ops + route hops: ~20 s of the Python engine

# estimated bytes per item, measured with tracemalloc on the shipped kernels
OPLOG_RECORD_BYTES = 54  # 3 int16 + 6 int64 columns
GEMM_STATE_ENTRY_BYTES = 8  # one int of a block's machine state (extrapolation keys)
FABRIC_OP_BYTES = 1024  # one collective op (a transfer, or the reduction or copy consuming it):
# program lists, event records, OpLog, replay; tracemalloc's peak is 800-1000 B an op (2026)
# one SCALE-Sim layer read, simulated and printed takes about as long as 5 collective ops
# (measured: ~130 us a layer through `python -m sim scalesim`, ~25 us a collective op)
SYSTOLIC_LAYER_OPS = 5
SYSTOLIC_LAYER_BYTES = 2048  # its row, SystolicLayer, LayerReport and printed lines
SYSTOLIC_FOLDS_PER_OP = 2048  # fold terms summed (twice) per layer in the time of one op
ROUTE_HOP_BYTES = 24  # one link index of the network's route table


def _budget_from_env(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise BudgetError(
            f"environment variable {name}={short_repr(raw)} must be a positive integer; "
            f"unset it for the default ({default})"
        )
    return value


def memory_budget_bytes() -> int:
    """The memory a single run may plan to use (``NPUBENCH_MEMORY_BUDGET_MIB``, MiB)."""
    return _budget_from_env(MEMORY_BUDGET_ENV, DEFAULT_MEMORY_BUDGET_MIB) << 20


def ops_budget() -> int:
    """Operations a collective may plan to simulate (``NPUBENCH_OPS_BUDGET``)."""
    return _budget_from_env(OPS_BUDGET_ENV, DEFAULT_OPS_BUDGET)


def _size(nbytes: float) -> str:
    if isinstance(nbytes, int) and nbytes.bit_length() > 80:
        return f"{short_number(nbytes)} B"
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):.1f} {unit}"
    return f"{nbytes:.0f} B"


def check_memory(what: str, estimate: float, parts: str) -> None:
    """Refuse a run whose planned memory ``estimate`` (bytes; ``parts`` says of what) is over
    the budget."""
    budget = memory_budget_bytes()
    if estimate > budget:
        need = math.ceil(estimate / (1 << 20)) if estimate < 1e30 else "<more MiB>"
        raise BudgetError(
            f"{what}: needs about {_size(estimate)} of memory ({parts}), over the budget of "
            f"{_size(budget)}; refused before allocating. Make the run smaller, or raise "
            f"the budget: {MEMORY_BUDGET_ENV}={need}"
        )


def check_time(what: str, worst_ps: int, parts: str) -> None:
    """Refuse a run whose worst-case end time would not fit the int64 picosecond clock."""
    if worst_ps >= MAX_TIME_PS:
        raise BudgetError(
            f"{what}: could last up to {short_number(worst_ps)} ps ({parts}), beyond the "
            f"simulator's int64 picosecond clock (limit {short_number(MAX_TIME_PS)} ps); "
            "make the run smaller or the topology's times shorter"
        )


def whole_number(
    value: object, what: str, *, minimum: int = 0, error: type[NpuSimError] = InputError
) -> int:
    """``value`` as a Python int (ints and numpy integers; not bools, floats or strings)."""
    if isinstance(value, (bool, float)):
        ok = False
    else:
        try:
            value = operator.index(value)  # type: ignore[arg-type]
            ok = True
        except TypeError:
            ok = False
    if not ok:
        raise error(
            f"{what} = {short_repr(value)} must be a whole number (an int), "
            f"not {type(value).__name__}"
        )
    assert isinstance(value, int)
    if value < minimum:
        raise error(f"{what} = {short_repr(value)} must be at least {minimum}")
    return value


_SHAPE = re.compile(r"\s*([0-9]{1,18})\s*[xX]\s*([0-9]{1,18})\s*[xX]\s*([0-9]{1,18})\s*")


def shape_dims(shape: object, error: type[NpuSimError] = InputError) -> tuple[int, int, int]:
    """``(M, K, N)`` from ``"MxKxN"`` text (ASCII digits) or a sequence of three whole numbers."""
    if isinstance(shape, str):
        match = _SHAPE.fullmatch(shape)
        if match is None:
            raise error(f"shape {short_repr(shape)} must look like MxKxN, e.g. 512x512x512")
        m, k, n = (int(g) for g in match.groups())
        return m, k, n
    if isinstance(shape, (tuple, list)) and len(shape) == 3:
        m, k, n = (
            whole_number(v, f"GEMM dimension {d}", error=error)
            for d, v in zip("MKN", shape, strict=True)
        )
        return m, k, n
    raise error(
        f"shape {short_repr(shape)} must be a GemmShape, 'MxKxN' text or an (M, K, N) tuple"
    )


def check_stored_records(records: int, what: str) -> None:
    """Refuse to hold ``records`` op-log records in memory (``what`` says where they come
    from: a fast path that found no period, or a compressed log being written out)."""
    check_memory(what, records * OPLOG_RECORD_BYTES, f"{short_number(records)} op-log records")


def whole_text(x: int) -> str:
    """An integer for a message: in full, unless it is too long to print."""
    return str(x) if x.bit_length() <= 256 else short_number(x)


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for integers, exactly."""
    return -(-a // b)


def check_systolic_layers(layers: int, what: str) -> None:
    """Refuse to build ``layers`` SCALE-Sim layers over the ops or memory budget (before any
    is built: a depth-wise row makes one layer per channel)."""
    check_memory(what, layers * SYSTOLIC_LAYER_BYTES, f"{short_number(layers)} layers")
    ops = layers * SYSTOLIC_LAYER_OPS
    if ops > ops_budget():
        raise BudgetError(
            f"{what}: {short_number(layers)} layers to read and simulate, about "
            f"{short_number(ops)} operations ({SYSTOLIC_LAYER_OPS} a layer), over the budget of "
            f"{ops_budget()}; split the topology, or raise the budget: {OPS_BUDGET_ENV}={ops}"
        )


def check_systolic_work(layers: int, folds: int, what: str) -> None:
    """Refuse to simulate ``layers`` SCALE-Sim layers whose fold means sum ``folds`` terms."""
    ops = layers * SYSTOLIC_LAYER_OPS + folds // SYSTOLIC_FOLDS_PER_OP
    if ops > ops_budget():
        raise BudgetError(
            f"{what}: {short_number(folds)} folds to average over, about {short_number(ops)} "
            f"operations, over the budget of {ops_budget()}; use a larger array or fewer "
            f"layers, or raise the budget: {OPS_BUDGET_ENV}={ops}"
        )
