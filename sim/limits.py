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
from fractions import Fraction
from typing import TYPE_CHECKING, NamedTuple

from sim.errors import BudgetError, InputError, NpuSimError, short_number, short_repr
from sim.units import ps_for_bytes

if TYPE_CHECKING:
    from sim.topology import Topology

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
    "CollectiveEstimate",
    "check_collective",
    "check_gemm",
    "check_systolic_layers",
    "check_systolic_work",
    "estimate_collective",
    "memory_budget_bytes",
    "ops_budget",
    "shape_dims",
    "whole_number",
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


def _check_memory(what: str, estimate: float, parts: str) -> None:
    budget = memory_budget_bytes()
    if estimate > budget:
        need = math.ceil(estimate / (1 << 20)) if estimate < 1e30 else "<more MiB>"
        raise BudgetError(
            f"{what}: needs about {_size(estimate)} of memory ({parts}), over the budget of "
            f"{_size(budget)}; refused before allocating. Make the run smaller, or raise "
            f"the budget: {MEMORY_BUDGET_ENV}={need}"
        )


def _check_time(what: str, worst_ps: int, parts: str) -> None:
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


def _topology(topo: object) -> Topology:
    from sim.topology import Topology

    if not isinstance(topo, Topology):
        raise InputError(
            f"topo = {short_repr(topo)} must be a sim.Topology; "
            "get one from sim.load_topology('npu-1h') or a .yaml path"
        )
    return topo


def check_gemm(M: int, K: int, N: int, topo: object, *, extrapolate: bool = True) -> None:
    """Refuse a GEMM whose op log, block states or end time would exceed the budgets.

    Counts follow the tile plan (DESIGN.md): ``Mt*Kt*Nt`` tile-ops, each at most two loads,
    a fetch and a GEMM issue, one store per output tile and one panel load per row; HBM
    traffic is at most the reference variant's (every tile-op loads its A and B tiles).
    """
    t = _topology(topo)
    if not isinstance(extrapolate, bool):
        raise InputError(f"extrapolate = {short_repr(extrapolate)} must be True or False")
    pe, bpe = t.pe, t.bpe
    mt, kt, nt = _ceil_div(M, pe.tile_m), _ceil_div(K, pe.tile_k), _ceil_div(N, pe.tile_n)
    tile_ops, out_tiles = mt * kt * nt, mt * nt
    ops = 4 * tile_ops + out_tiles + mt + 2
    what = f"GEMM {_text(M)}x{_text(K)}x{_text(N)}"
    state = t.hbm.num_pcs + min(pe.operand_slots, tile_ops) + 16
    states = out_tiles * state * GEMM_STATE_ENTRY_BYTES
    if extrapolate:
        # the fast path stores a repeating period once (a compressed op log, ADR 0011): how many
        # records it keeps is known only as it runs, so the writer checks them there
        # (check_stored_records); here only the block states are planned
        _check_memory(what, states, f"block states of {short_number(out_tiles)} output tiles")
    else:
        _check_memory(
            what,
            ops * OPLOG_RECORD_BYTES + states,
            f"{short_number(ops)} op-log records for {short_number(tile_ops)} tile-ops "
            f"on {t.source}",
        )
    if not extrapolate and ops > ops_budget():
        raise BudgetError(
            f"{what}: {short_number(ops)} operations to simulate one by one "
            f"(extrapolate=False), over the budget of {ops_budget()}; use extrapolate=True "
            f"or raise {OPS_BUDGET_ENV}"
        )
    a, b, c = pe.tile_m * pe.tile_k * bpe, pe.tile_k * pe.tile_n * bpe, pe.tile_m * pe.tile_n * bpe
    hbm = t.hbm
    bursts = (tile_ops * (a + b) + out_tiles * c) // hbm.burst_bytes + ops
    worst = (
        ops * (t.dma.setup_ps + hbm.latency_ps)
        + bursts * hbm.burst_ps
        + tile_ops * (pe.stage_ps * (1 + pe.pipeline_stages) + _ps(a + b, t.fetch.bw))
    )
    _check_time(what, worst, f"{short_number(tile_ops)} tile-ops")
    if tile_ops * pe.tile_macs > INT64_MAX:
        raise BudgetError(
            f"{what}: {short_number(tile_ops * pe.tile_macs)} padded MACs do not fit the "
            "op log's int64 MAC counts; make the GEMM smaller"
        )


#: the fast path's work grows with its blocks (an output tile, or a chunk of a deep one), not
#: its records (about 0.3-0.5 us a block): the fast path may walk this many blocks per unit
#: of the ops budget
FAST_PATH_BLOCKS_PER_OP = 4


def check_gemm_blocks(M: int, K: int, N: int, blocks: int) -> None:
    """Refuse a GEMM whose fast path would walk more than ``4 x ops budget`` blocks (8 M by
    default, a few seconds): a periodic giant stores little but still visits every block."""
    budget = FAST_PATH_BLOCKS_PER_OP * ops_budget()
    if blocks > budget:
        raise BudgetError(
            f"GEMM {_text(M)}x{_text(K)}x{_text(N)}: {short_number(blocks)} blocks (output "
            f"tiles x K chunks) for the fast path, over its budget of {short_number(budget)} "
            f"({FAST_PATH_BLOCKS_PER_OP} x {OPS_BUDGET_ENV}); make the GEMM smaller or raise "
            f"{OPS_BUDGET_ENV}"
        )


def check_stored_records(records: int, what: str) -> None:
    """Refuse to hold ``records`` op-log records in memory (``what`` says where they come
    from: a fast path that found no period, or a compressed log being written out)."""
    _check_memory(what, records * OPLOG_RECORD_BYTES, f"{short_number(records)} op-log records")


def _text(x: int) -> str:
    """An integer for a message: in full, unless it is too long to print."""
    return str(x) if x.bit_length() <= 256 else short_number(x)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _ps(nbytes: int, gbs: Fraction) -> int:
    return ps_for_bytes(nbytes, gbs)


def _collective_transfers(p: int, pieces_per_segment: int, algorithm: str) -> int:
    """Transfers a collective will issue: ring-like algorithms move every segment ``2(p-1)``
    times; ``direct`` sends the whole vector to every other chip. Every transfer has one
    consumer on its receiver (a reduction or a copy), so a program holds twice as many ops."""
    k = pieces_per_segment
    if algorithm == "direct":
        return p * (p - 1) * p * k
    return 2 * (p - 1) * p * k


class CollectiveEstimate(NamedTuple):
    """A collective's cost, estimated before anything is built (:func:`estimate_collective`)."""

    ops: int  #: transfers and the reductions or copies that consume them
    records: int  #: op-log records: a transfer has one per hop it takes, a consumer one
    hops: int  #: link indices of the network's route table
    memory_bytes: int
    staging_bound: bool  #: the staging buffers, not the chunk size, set the number of chunks


def _diameter(t: Topology) -> int:
    p, kind = t.chips.count, t.chips.topology
    if kind == "ring":
        return p // 2
    if kind == "torus2d":
        rows, cols = t.chips.torus_dims
        return rows // 2 + cols // 2
    return 2 if kind == "switch" else 1


def estimate_collective(
    topo: object, nbytes: int, algorithm: str, chunk_bytes: int | None
) -> CollectiveEstimate:
    """The ops, records, route hops and memory of a collective, from its sizes alone.

    A message is cut into chunks of at most ``chunk`` bytes, and into at least
    ``chips.staging_buffers / 2`` of them (rounded up to a power of two) while it has
    elements (``sim.collectives.compile.chunks``): a ring-like segment is two messages (one per
    ring direction), a ``direct`` message is the whole vector (``p`` segments).
    """
    t = _topology(topo)
    p, kind = t.chips.count, t.chips.topology
    diameter = _diameter(t)
    hops = p * p * max(1, (diameter + 1) // 2)
    bpe = t.bpe
    per_chunk = max(bpe, (t.chips.chunk_bytes if chunk_bytes is None else chunk_bytes) // bpe * bpe)
    count = nbytes // bpe
    segment = _ceil_div(count, p)
    k = max(1, _ceil_div(segment * bpe, per_chunk))
    depth = 1 << (max(1, t.chips.staging_buffers // 2) - 1).bit_length()
    staged = _ceil_div(min(depth, count), p) if algorithm == "direct" else min(2 * depth, segment)
    transfers = _collective_transfers(p, max(k, staged), algorithm)
    near = algorithm in ("ring", "torus2d")
    records = transfers * ((2 if kind == "switch" else 1) if near else diameter) + transfers
    ops = 2 * transfers
    memory = ops * FABRIC_OP_BYTES + (records - ops) * OPLOG_RECORD_BYTES + hops * ROUTE_HOP_BYTES
    return CollectiveEstimate(ops, records, hops, memory, staged > k)


def check_collective(
    topo: object, nbytes: object, algorithm: object, chunk_bytes: object
) -> tuple[int, int | None]:
    """Validate a collective's arguments and refuse it over budget; returns (nbytes, chunk).

    ``nbytes`` and ``chunk_bytes`` may be numpy integers (returned as ints). The estimate
    (:func:`estimate_collective`) covers the network's route table (built first) and the
    schedule's transfers, their consumers and the chunks the staging buffers add.
    """
    t = _topology(topo)
    size = whole_number(nbytes, "message size nbytes")
    chunk = None if chunk_bytes is None else whole_number(chunk_bytes, "chunk_bytes", minimum=1)
    if not isinstance(algorithm, str):
        raise InputError(f"algorithm = {short_repr(algorithm)} must be a string, e.g. 'ring'")
    p, kind = t.chips.count, t.chips.topology
    est = estimate_collective(t, size, algorithm, chunk)
    records, hops = est.records, est.hops
    what = f"{short_repr(algorithm)} collective of {_text(size)} bytes on {p} chips ({kind})"
    parts = f"{short_number(records)} transfers/reductions, {short_number(hops)} route hops"
    fix = "use fewer chips, a smaller message or a larger chips.chunk_kib"
    if est.staging_bound:
        buffers = t.chips.staging_buffers
        parts += (
            f"; chips.staging_buffers = {buffers} cuts every message into >= {buffers // 2} chunks"
        )
        fix = "use fewer chips.staging_buffers (NCCL uses 8) or fewer chips"
    _check_memory(what, est.memory_bytes, parts)
    if records + hops > ops_budget():
        raise BudgetError(
            f"{what}: about {short_number(records + hops)} operations to simulate ({parts}), "
            f"over the budget of {ops_budget()}; {fix}, or raise the budget: "
            f"{OPS_BUDGET_ENV}={records + hops}"
        )
    bpe = t.bpe
    per_chunk = max(bpe, (t.chips.chunk_bytes if chunk is None else chunk) // bpe * bpe)
    net = t.chips
    per_transfer = max(bpe, min(per_chunk, size))  # a transfer carries at most one chunk
    link = _ps(per_transfer, net.link_bw) + net.link_latency_ps
    worst = records * max(link, _ps(per_transfer, net.reduce_bw))
    _check_time(what, worst, parts)
    return size, chunk


def check_systolic_layers(layers: int, what: str) -> None:
    """Refuse to build ``layers`` SCALE-Sim layers over the ops or memory budget (before any
    is built: a depth-wise row makes one layer per channel)."""
    _check_memory(what, layers * SYSTOLIC_LAYER_BYTES, f"{short_number(layers)} layers")
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
