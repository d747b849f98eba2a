"""The simulator kernel: programs of engine operations, and two ways to time them.

Hardware semantics (docs/adr/0001-simulator-semantics.md):

* Every resource serves its operations **in program order**: a DMA engine, each HBM
  pseudo-channel, the fetch unit and the PE issue slot. An operation starts when its
  dependencies have ended and its resource has finished the previous operation.
* A DMA operation holds its engine for ``setup``; then its bursts arrive at their
  pseudo-channels, each channel serving its bursts back to back at ``burst_ps`` each,
  in program order; the transfer ends ``latency`` after its last burst. Concurrent
  transfers therefore contend channel by channel.
* A DMA operation has two times: its ``end`` (the data has landed) and its *release*
  (its last burst has been served: every byte has left its source). A dependency
  ``~d`` (``-d - 1``) waits for the release of DMA op ``d``; a plain ``d`` for its end.
  A buffer a DMA out reads is free again at the release, not when the HBM write lands.
* A SERVE operation (fetch) holds its resource for ``dur``.
* A PIPE operation (a PE tile-op) holds the issue slot for ``dur`` (T) and ends ``lat``
  (D*T) after it issued.

Because service is in program order, a schedule is a longest-path evaluation over the
program. :func:`simulate` evaluates it block by block in plain Python and, when the machine
state at a block boundary repeats (relative to a moving floor) and the program ahead
repeats too, fills whole periods at once with numpy. :func:`simulate_reference` is the
simple heap-driven event simulator that the fast path is tested against.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import NamedTuple, Protocol

import numpy as np

from sim.errors import NpuSimError
from sim.limits import MAX_TIME_PS, check_stored_records  # one definition of the int64-ps ceiling
from sim.oplog import DTYPES, OpLog, Repeat

__all__ = [
    "COPY",
    "DMA",
    "FETCH_COPY",
    "HBM",
    "MAC",
    "PE",
    "PIPE",
    "SERVE",
    "SPACES",
    "SRAM",
    "Access",
    "BlockProgram",
    "Channels",
    "Op",
    "SimulationError",
    "program_ops",
    "simulate",
    "simulate_reference",
]

DMA, SERVE, PIPE = 0, 1, 2


class SimulationError(NpuSimError, RuntimeError):
    """The program cannot be timed: a deadlock, a runaway, or a malformed program."""


#: address spaces and access kinds of :class:`Access` (what the data checker replays)
HBM, SRAM, PE = 0, 1, 2
SPACES = ("hbm", "sram", "pe")
COPY, FETCH_COPY, MAC = 0, 1, 2


class Access(NamedTuple):
    """The data one operation moves, beside its :class:`Op` (never read by the timing loop).

    ``reads`` and ``writes`` are ``(space, address, nbytes)`` ranges. ``COPY`` copies the
    bytes of its one read range to its one write range (a DMA); ``FETCH_COPY`` concatenates
    its read ranges into its write range (SRAM -> PE operand slot); ``MAC`` multiplies the
    A and B tiles of its first read range and writes (or, when it also reads the write
    range, accumulates into) its write range. Consecutive MACs with the same ``chain``
    accumulate in the PE pipeline in issue order.
    """

    kind: int
    reads: tuple[tuple[int, int, int], ...]
    writes: tuple[tuple[int, int, int], ...]
    chain: int = -1


class Op(NamedTuple):
    """One engine operation. ``deps`` are program-order ids of earlier operations
    (``~d`` for the release of DMA op ``d``, see the module docstring)."""

    kind: int
    res: int
    deps: tuple[int, ...]
    stage: int
    nbytes: int
    macs: int
    tile: int
    dur: int  # DMA: setup ps; SERVE: service ps; PIPE: issue interval ps
    lat: int  # DMA: latency after last burst; PIPE: issue-to-retire ps
    chans: tuple[tuple[int, int], ...] = ()  # DMA only: (channel, bursts)


@dataclass(frozen=True)
class Channels:
    """The HBM pseudo-channels shared by all DMA operations."""

    count: int
    burst_ps: int


class BlockProgram(Protocol):
    """A program cut into blocks that can be generated one at a time.

    ``block_sig(b)`` must determine ``block_ops(b)`` up to a shift of op ids, tile
    indices and times: two blocks with equal signatures have the same operations with
    dependencies at the same relative distances.
    A program may also define ``block_sig_array(blocks)``: the
    signatures of an array of blocks as integer rows, equal where ``block_sig`` is equal
    (the fast path then checks how far a period repeats with numpy).
    """

    engines: tuple[str, ...]
    stages: tuple[str, ...]
    channels: Channels
    num_blocks: int

    def first_op(self, b: int) -> int: ...
    def num_ops(self) -> int: ...
    def first_tile(self, b: int) -> int: ...
    def block_ops(self, b: int) -> list[Op]: ...
    def block_sig(self, b: int) -> Hashable: ...
    def live(self, b: int) -> dict[int, tuple[int, ...]]:
        """Ops before block ``b`` that later blocks depend on, with their consumers' resources."""
        ...

    def resources(self, b: int) -> tuple[int, ...]:
        """Resources that blocks ``>= b`` use (a superset is safe, only slower).

        A program may also define ``floor_resources(b)``: a subset of them such that
        every later operation on another resource depends on a later operation on one
        of them or on a live operation it consumes (default: all of ``resources(b)``).
        It lets a rarely used engine's stale free time drop out of the state.
        And ``outer_blocks``: a period (in blocks) worth waiting for; periods shorter
        than it are not filled during the first ``outer_until`` blocks (default
        ``3 * outer_blocks``; any choice
        of which repeat to fill is exact; this one fills whole rows at once).
        And ``unique_block(b)``: True when no other block has block b's signature, so
        no period can start or end there; the fast path then skips its state
        (``live``, the canonical state, the signature) and just runs it.
        """
        ...


def program_ops(program: BlockProgram) -> list[Op]:
    """Every operation of the program, in program order (for the reference and tests)."""
    ops: list[Op] = []
    for b in range(program.num_blocks):
        if program.first_op(b) != len(ops):
            raise SimulationError(
                f"block {b} should start at op {program.first_op(b)}, but {len(ops)} precede it"
            )
        ops.extend(program.block_ops(b))
    return ops


# --- fast path ----------------------------------------------------------------------------


class _Writer:
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
    cols = _Writer(program.num_ops())
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
    cols: _Writer,
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
    program: BlockProgram, cols: _Writer, hit: tuple[int, int, int], b: int, ref: int
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


def simulate_reference(
    ops: Sequence[Op],
    engines: Sequence[str],
    stages: Sequence[str],
    channels: Channels,
    *,
    max_events: int | None = None,
) -> OpLog:
    """Time ``ops`` with a heap of ``(time, seq, event)``; slow, simple, the oracle."""
    n = len(ops)
    limit = max_events if max_events is not None else 64 * n + 1024
    waiting = [len(set(op.deps)) for op in ops]
    dependents: list[list[int]] = [[] for _ in range(n)]
    on_release: list[list[int]] = [[] for _ in range(n)]
    for i, op in enumerate(ops):
        for d in set(op.deps):
            target = ~d if d < 0 else d
            if not 0 <= target < n or (d < 0 and ops[target].kind != DMA):
                raise SimulationError(f"op {i} depends on op {d}, which does not exist")
            (on_release if d < 0 else dependents)[target].append(i)
    queue: list[list[int]] = [[] for _ in engines]
    chan_queue: list[list[tuple[int, int]]] = [[] for _ in range(channels.count)]
    for i, op in enumerate(ops):
        queue[op.res].append(i)
        for c, cnt in op.chans:
            chan_queue[c].append((i, cnt))
    head = [0] * len(engines)
    chan_head = [0] * channels.count
    res_busy = [False] * len(engines)
    chan_busy = [False] * channels.count
    ready = [False] * n
    arrived = [False] * n
    bursts_left = [len(op.chans) for op in ops]
    last_burst = [0] * n
    start = [-1] * n
    end = [-1] * n
    heap: list[tuple[int, int, str, int]] = []
    seq = 0

    def at(t: int, what: str, who: int) -> None:
        nonlocal seq
        heapq.heappush(heap, (t, seq, what, who))
        seq += 1

    def try_start(r: int, now: int) -> None:
        if res_busy[r] or head[r] >= len(queue[r]):
            return
        i = queue[r][head[r]]
        if not ready[i]:
            return
        head[r] += 1
        res_busy[r] = True
        op = ops[i]
        start[i] = now
        if op.kind == DMA:
            at(now + op.dur, "free", r)
            at(now + op.dur, "arrive", i)
        elif op.kind == SERVE:
            at(now + op.dur, "free", r)
            at(now + op.dur, "done", i)
        else:
            at(now + op.dur, "free", r)
            at(now + op.lat, "done", i)

    def try_channel(c: int, now: int) -> None:
        if chan_busy[c] or chan_head[c] >= len(chan_queue[c]):
            return
        i, cnt = chan_queue[c][chan_head[c]]
        if not arrived[i]:
            return
        chan_head[c] += 1
        chan_busy[c] = True
        at(now + cnt * channels.burst_ps, "burst_done", c)

    for i in range(n):
        if waiting[i] == 0:
            at(0, "ready", i)
    events = 0
    while heap:
        now, _, what, who = heapq.heappop(heap)
        events += 1
        if events > limit or now >= MAX_TIME_PS:
            raise SimulationError(
                f"runaway simulation: {events} events, time {now} ps; pending: "
                f"{_pending(ops, end, stages)}"
            )
        if what == "ready":
            ready[who] = True
            try_start(ops[who].res, now)
        elif what == "free":
            res_busy[who] = False
            try_start(who, now)
        elif what == "arrive":
            arrived[who] = True
            for c, _cnt in ops[who].chans:
                try_channel(c, now)
        elif what == "burst_done":
            i, _cnt = chan_queue[who][chan_head[who] - 1]
            chan_busy[who] = False
            last_burst[i] = max(last_burst[i], now)
            bursts_left[i] -= 1
            if bursts_left[i] == 0:
                at(last_burst[i] + ops[i].lat, "done", i)
                at(last_burst[i], "release", i)
            try_channel(who, now)
        else:  # done, or released (the bytes have left the source)
            if what == "done":
                end[who] = now
            for j in dependents[who] if what == "done" else on_release[who]:
                waiting[j] -= 1
                if waiting[j] == 0:
                    at(now, "ready", j)
    if any(e < 0 for e in end):
        raise SimulationError(f"deadlock: operations never finished: {_pending(ops, end, stages)}")
    cols = {
        "engine": [op.res for op in ops],
        "stage": [op.stage for op in ops],
        "op": list(range(n)),
        "start": start,
        "end": end,
        "nbytes": [op.nbytes for op in ops],
        "macs": [op.macs for op in ops],
        "tile": [op.tile for op in ops],
    }
    return OpLog.from_columns(engines, stages, cols)


def _pending(ops: Sequence[Op], end: list[int], stages: Sequence[str], most: int = 5) -> str:
    left = [i for i, e in enumerate(end) if e < 0]
    shown = ", ".join(
        f"op {i} ({stages[ops[i].stage]}, waits on {list(ops[i].deps)})" for i in left[:most]
    )
    more = f" and {len(left) - most} more" if len(left) > most else ""
    return f"{len(left)} pending: {shown}{more}"
