"""What a GEMM will cost, estimated from its shape before anything is built, against the
budgets of :mod:`sim.limits` (ADR 0009)."""

from __future__ import annotations

from sim.errors import BudgetError, InputError, short_number, short_repr
from sim.limits import (
    GEMM_STATE_ENTRY_BYTES,
    INT64_MAX,
    OPLOG_RECORD_BYTES,
    OPS_BUDGET_ENV,
    ceil_div,
    check_memory,
    check_time,
    ops_budget,
    whole_text,
)
from sim.topology import as_topology
from sim.units import ps_for_bytes

__all__ = ["FAST_PATH_BLOCKS_PER_OP", "check_gemm", "check_gemm_blocks"]


def check_gemm(M: int, K: int, N: int, topo: object, *, extrapolate: bool = True) -> None:
    """Refuse a GEMM whose op log, block states or end time would exceed the budgets.

    Counts follow the tile plan (docs/adr/0006): ``Mt*Kt*Nt`` tile-ops, each at
    most two loads, a fetch and a GEMM issue, one store per output tile and one panel load per
    row; HBM traffic is at most the reference variant's (every tile-op loads its A and B tiles).
    """
    t = as_topology(topo)
    if not isinstance(extrapolate, bool):
        raise InputError(f"extrapolate = {short_repr(extrapolate)} must be True or False")
    pe, bpe = t.pe, t.bpe
    mt, kt, nt = ceil_div(M, pe.tile_m), ceil_div(K, pe.tile_k), ceil_div(N, pe.tile_n)
    tile_ops, out_tiles = mt * kt * nt, mt * nt
    ops = 4 * tile_ops + out_tiles + mt + 2
    what = f"GEMM {whole_text(M)}x{whole_text(K)}x{whole_text(N)}"
    state = t.hbm.num_pcs + min(pe.operand_slots, tile_ops) + 16
    states = out_tiles * state * GEMM_STATE_ENTRY_BYTES
    if extrapolate:
        # the fast path stores a repeating period once (a compressed op log, ADR 0011): how many
        # records it keeps is known only as it runs, so the writer checks them there
        # (check_stored_records); here only the block states are planned
        check_memory(what, states, f"block states of {short_number(out_tiles)} output tiles")
    else:
        check_memory(
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
        + tile_ops * (pe.stage_ps * (1 + pe.pipeline_stages) + ps_for_bytes(a + b, t.fetch.bw))
    )
    check_time(what, worst, f"{short_number(tile_ops)} tile-ops")
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
            f"GEMM {whole_text(M)}x{whole_text(K)}x{whole_text(N)}: {short_number(blocks)} blocks "
            "(output "
            f"tiles x K chunks) for the fast path, over its budget of {short_number(budget)} "
            f"({FAST_PATH_BLOCKS_PER_OP} x {OPS_BUDGET_ENV}); make the GEMM smaller or raise "
            f"{OPS_BUDGET_ENV}"
        )
