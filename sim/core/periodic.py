"""The fast timing: block by block in Python, whole periods at once in numpy once the machine
state at a block boundary repeats (ADR 0011)."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from sim.core.ops import DMA, SERVE, BlockProgram, Op, SimulationError
from sim.core.writer import Writer
from sim.limits import MAX_TIME_PS  # one definition of the int64-ps ceiling
from sim.oplog import OpLog

_SIG_BATCH = 512  # blocks whose signatures the first repeat probe computes at once


def _canonical(
    free: list[int],
    used: tuple[int, ...],
    ch: list[int],
    ends: dict[int, int],
    live: dict[int, tuple[int, ...]],
    floor: tuple[int, ...],
) -> tuple[int, tuple[int, ...]]:
    """The machine state relative to a floor that no future operation can start before.

    Every operation on a ``floor`` resource starts no earlier than that resource's free
    time, so ``ref`` (the least of them) bounds them; an operation on any other used
    resource depends on a later floor operation or on a live one it consumes, so it
    starts no earlier than ``min(ref, those live ends)``. Values below such a bound are
    equivalent to it. A pending end time matters only above the free time of the
    resources its consumers use.
    """
    ref = min([free[r] for r in floor])
    bound: dict[int, int] = {}
    lows: dict[tuple[int, ...], int] = {}  # consumers -> their least free time
    for consumers in set(live.values()):
        lows[consumers] = min([free[r] for r in consumers])
        for r in consumers:
            if r not in floor:
                for op_id, cons in live.items():
                    if r in cons:
                        e = ends[op_id]
                        bound[r] = e if e < bound.get(r, ref) else bound.get(r, ref)
    lo = min(bound.values(), default=ref)
    lo = lo if lo < ref else ref
    state = []
    for r in used:
        f = free[r]
        b = bound.get(r, ref)
        state.append((f if f > b else b) - ref)
    state += [(c if c > lo else lo) - ref for c in ch]
    for op_id in sorted(live):
        low = lows[live[op_id]]
        e = ends[op_id]
        state.append((e if e > low else low) - ref)
    return ref, tuple(state)


def simulate(program: BlockProgram, *, extrapolate: bool = True) -> OpLog:
    """Time ``program``; exact, and fast for long periodic programs (see module docstring)."""
    nres = len(program.engines)
    burst_ps = program.channels.burst_ps
    free = [0] * nres
    ch = [0] * program.channels.count
    ends: dict[int, int] = {}
    cols = Writer(program.num_ops())
    spread: dict[int, tuple[int, tuple[tuple[int, int], ...]]] = {}  # see _run_block
    seen: dict[Hashable, tuple[int, int, int]] = {}
    floor_of = getattr(program, "floor_resources", None)
    # a program whose blocks repeat in rows of ``outer_blocks`` (periods within a row
    # too) waits for the row period: one jump over every row instead of one per row
    outer = int(getattr(program, "outer_blocks", 0))
    outer_until = int(getattr(program, "outer_until", 3 * outer))
    unique = getattr(program, "unique_block", None) if extrapolate else None
    extrapolated_blocks = 0
    b = 0
    while b < program.num_blocks:
        first = program.first_op(b)
        if unique is not None and unique(b):  # no hit possible here: just run it (ends
            # keeps the records of such blocks until the next block prunes it to its live set)
            _run_block(program.block_ops(b), first, free, ch, ends, burst_ps, cols, spread)
            b += 1
            continue
        live = program.live(b)
        missing = [d for d in live if d not in ends]
        if missing:
            raise SimulationError(
                f"block {b} depends on op {missing[0]}, which has not been timed "
                "(a dependency on a later operation, or a program whose blocks skip ops)"
            )
        ends = {d: ends[d] for d in live}
        if extrapolate:
            used = program.resources(b)
            floor = floor_of(b) if floor_of is not None else used
            ref, state = _canonical(free, used, ch, ends, live, floor)
            key = (program.block_sig(b), state)
            hit = seen.get(key)
            if hit is None:
                seen[key] = (b, ref, cols.count)
            elif b - hit[0] < outer and b < outer_until:
                pass  # warming up for the program's outer period: no shorter jumps yet
            else:
                jump = _extrapolate(program, cols, hit, b, ref)
                if jump:
                    n_blocks, lam = jump
                    extrapolated_blocks += n_blocks
                    b += n_blocks
                    free = [f + lam for f in free]
                    ch = [c + lam for c in ch]
                    # the live ops at the new boundary play the roles of those at b, in order
                    if b >= program.num_blocks:
                        break
                    new_live = sorted(program.live(b))
                    if len(new_live) != len(ends):
                        raise SimulationError(
                            f"block {b}: live set does not repeat with the period"
                        )
                    ends = {
                        new: ends[old] + lam
                        for new, old in zip(new_live, sorted(ends), strict=True)
                    }
                    seen.clear()
                    continue
        ops = program.block_ops(b)
        _run_block(ops, first, free, ch, ends, burst_ps, cols, spread)
        b += 1
    log = cols.oplog(program.engines, program.stages, {"extrapolated_blocks": extrapolated_blocks})
    if len(log) and log.makespan_ps >= MAX_TIME_PS:
        raise SimulationError(f"runaway program: makespan {log.makespan_ps} ps exceeds the limit")
    return log


def _even_bursts(chans: tuple[tuple[int, int], ...], count: int) -> int:
    """Bursts per channel if ``chans`` puts the same number on every one of ``count``
    channels (each once), else 0."""
    if len(chans) != count or len({c for c, _ in chans}) != count:
        return 0
    cnt = chans[0][1]
    return cnt if all(n == cnt for _, n in chans) else 0


def _run_block(
    ops: list[Op],
    first: int,
    free: list[int],
    ch: list[int],
    ends: dict[int, int],
    burst_ps: int,
    cols: Writer,
    spread: dict[int, tuple[int, tuple[tuple[int, int], ...]]],
) -> None:
    """List-schedule one block in program order (the hot loop: plain ints, no numpy).

    The channel free times are held lazily as ``max(base[c] + add, low)``: a transfer
    with the same number of bursts on every channel (a whole tile: most DMAs) maps each
    channel's free time ``f`` to ``max(f, t0) + k`` -- the same max-plus map for every
    channel, which composes into ``(add, low)`` in O(1) instead of a loop over the
    channels. ``spread`` caches, per ``chans`` tuple (by identity, the tuple kept
    alive beside it), its even burst count (0: uneven). Exact integer arithmetic; ``ch``
    holds the real free times again on return.
    """
    rec_engine, rec_stage, rec_op = cols.engine.append, cols.stage.append, cols.op.append
    rec_start, rec_end = cols.start.append, cols.end.append
    rec_bytes, rec_macs, rec_tile = cols.nbytes.append, cols.macs.append, cols.tile.append
    nch = len(ch)
    base = ch  # real free time of channel c: max(base[c] + add, low) (times are >= 0)
    add = low = 0
    top = max(base, default=0)  # max(base)
    op_id = first
    for kind, res, deps, stage, nbytes, macs, tile, dur, lat, chans in ops:
        ready = 0
        for d in deps:
            try:
                e = ends[d]
            except KeyError:
                raise SimulationError(
                    f"op {op_id} depends on op {d}, which has not been timed "
                    "(dependencies must point to earlier operations)"
                ) from None
            if e > ready:
                ready = e
        f = free[res]
        start = ready if ready > f else f
        if kind == DMA:
            t0 = start + dur
            free[res] = t0
            known = spread.get(id(chans))
            if known is None or known[1] is not chans:
                known = spread[id(chans)] = (_even_bursts(chans, nch), chans)
            even = known[0]
            if even:  # every channel: f -> max(f, t0) + even x burst
                k = even * burst_ps
                add += k
                low = (low if low > t0 else t0) + k
                last = top + add
                if last < low:
                    last = low
            else:
                last = t0
                for c, cnt in chans:
                    s = base[c] + add
                    if s < low:
                        s = low
                    if s < t0:
                        s = t0
                    s += cnt * burst_ps
                    v = s - add
                    base[c] = v
                    if v > top:
                        top = v
                    if s > last:
                        last = s
            end = last + lat
            ends[~op_id] = last
        elif kind == SERVE:
            end = start + dur
            free[res] = end
        else:
            free[res] = start + dur
            end = start + lat
        ends[op_id] = end
        rec_engine(res)
        rec_stage(stage)
        rec_op(op_id)
        rec_start(start)
        rec_end(end)
        rec_bytes(nbytes)
        rec_macs(macs)
        rec_tile(tile)
        op_id += 1
    if add or low:
        ch[:] = [x + add if x + add > low else low for x in base]


def _extrapolate(
    program: BlockProgram, cols: Writer, hit: tuple[int, int, int], b: int, ref: int
) -> tuple[int, int] | None:
    """Copy blocks ``[b0, b)`` forward as many whole periods as the program repeats them."""
    b0, ref0, rec0 = hit
    q, lam = b - b0, ref - ref0
    if lam <= 0:
        return None
    most = (program.num_blocks - b) // q
    sig_array = getattr(program, "block_sig_array", None)
    if sig_array is not None:  # vectorised: a few numpy calls instead of one per block
        # doubling from _SIG_BATCH blocks (a numpy call costs about the same for one row
        # or a thousand): a hit that repeats once costs one call, a long run a few
        n, step = 0, max(1, _SIG_BATCH // q)
        period = None
        while n < most:
            m = min(step, most - n)
            lo = b + n * q
            sigs = sig_array(np.arange(b0 if period is None else lo, lo + m * q, dtype=np.int64))
            if period is None:
                period, sigs = sigs[:q], sigs[q:]
            same = np.all(sigs.reshape(m, q, -1) == period[None], axis=(1, 2))
            if not bool(same.all()):
                n += int(np.argmin(same))
                break
            n, step = n + m, 2 * step
    else:
        period_sigs = [program.block_sig(b0 + t) for t in range(q)]
        n = 0
        while n < most and all(
            program.block_sig(b + n * q + t) == period_sigs[t] for t in range(q)
        ):
            n += 1
    if n == 0:
        return None
    ops_shift = program.first_op(b) - program.first_op(b0)
    tiles_shift = program.first_tile(b) - program.first_tile(b0)
    cols.repeat(rec0, n, lam, ops_shift, tiles_shift)
    return n * q, n * lam


# --- reference: a plain event-driven simulator -------------------------------------------------
