"""A periodic program timed from a few of its periods (docs/adr/0036-periodic-programs-jump.md).

A program is **periodic** with period ``D`` where op ``i + D`` is op ``i`` again: the same
kind, chips, bytes, HBM bytes, route, staging pool and buffer, producer count, the same
transfer drained at the same distance with the same pool and route (its buffer goes back
there), and the same dependents at the same distances with the same streaming shares
(:meth:`Periodic.repeats_until`). A ring collective's quotient (:mod:`sim.collectives.fast`)
is: every step is the one before it, one step on.

The event loop (:func:`sim.fabric.events.simulate_events`) is deterministic and sees only
differences of times and op ids: what it does next depends on its state, and every rule reads
an op's static facts, never its id or the clock. So if at two **cuts** (the loop's first take
of op ``c`` since the cut before, and ``j`` periods later of op ``c + j D``; ``j`` up to
:data:`CUTS`) its whole state is the same up to shifting op ids by ``j D`` and times by
``delta``, and every op the next ``m`` runs of those periods touch is periodic, then those runs
repeat the one just run, shifted; the loop writes their records at once and resumes there.
Nothing is assumed about the machine: where the state is not the same (a pipeline filling, a
phase boundary, staging credits that bind every other step) the loop runs as it always did, and
the log is the event loop's, record for record.

The state compared at a cut (:meth:`Periodic._key`), relative to the cut's op and time: the
heap of pending events, the servers' queues and busy flags, the staging credits and the
transfers waiting for them, each chip's HBM (its free time past the cut, 0 when idle), and per
op of the **window** ``[L, H)``: how many of its producers are still due, whether it holds its
staging buffer and its HBM turn, when its first burst and last byte are in and when its hop
ended, and which of its records have started. ``L`` is the lowest op that has not started every
record or that a pending event names; ``H`` lies one longest dependency past the last op that
has started a record (the loop tracks it): only such an op has told its dependents anything, so
no op at or past ``H`` has been touched.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence
from typing import Any

import numpy as np

REL_MARK = -(1 << 62)  # a server freeing, in the compared heap (no op id is this far below c)
CUTS = 4  # the state may repeat after up to this many periods (a two-step beat, say)


class Periodic:
    """The cuts, snapshots and jumps of one run of the event loop (module docstring).

    ``state`` holds the loop's mutable containers by name, shared with the loop (changed in
    place); ``static`` the per-op facts the loop reads. :meth:`cut` is called the first time
    the loop takes the op :attr:`next_cut`, before it acts on it."""

    def __init__(
        self,
        period: int,
        n: int,
        rel: int,
        slot: Sequence[int],
        static: dict[str, Sequence[Any]],
        consumes: Sequence[int],
        edges: tuple[Sequence[int], ...],
        state: dict[str, Any],
    ) -> None:
        self.D = period
        self.n = n
        self.rel = rel
        self.slot = slot
        self.static = static
        self.consumes = consumes
        self.edges = edges
        self.s = state
        first_edge, _part, edge_j = edges[0], edges[1], edges[2]
        prod = np.repeat(np.arange(n, dtype=np.int64), np.diff(np.asarray(first_edge)))
        self.maxoff = int((np.asarray(edge_j, dtype=np.int64) - prod).max(initial=0))
        self.next_cut = 0 if 0 < period < n else -2
        self.lo = 0  # ops below have started every record
        self.hist: list[tuple[int, int, tuple[Any, ...] | None]] = []  # (cut op, time, key)
        self._bad: np.ndarray[Any, np.dtype[np.int64]] | None = None
        # (cut op, periods skipped, first and last op whose records it wrote), for the tests
        self.jumps: list[tuple[int, int, int, int]] = []

    # ----------------------------------------------------------------------------------------
    def cut(self, now: int, c: int, top: int) -> tuple[int, int, int] | None:
        """At the first take of op ``c`` (a cut) at ``now``, ``top`` the last op that has
        started a record: jump when the state is the one of ``j`` cuts before (``j`` up to
        :data:`CUTS`), shifted, and the ops ahead are periodic. Returns ``(time shift, op
        shift, records written)`` of a jump (the loop moves its taken event by both), or None.
        """
        D, n = self.D, self.n
        self.next_cut = c + D if c + D < n else -2
        r_start, slot = self.s["r_start"], self.slot
        lo = self.lo
        while lo < n and r_start[slot[lo + 1] - 1] >= 0:
            lo += 1
        self.lo = lo
        hist = self.hist
        times = [t for _c, t, _k in hist] + [now]
        last = len(times) - 1
        # the cheap test first: the last j gaps between cuts are the j before them
        repeats = [
            j
            for j in range(1, CUTS + 1)
            if last >= 2 * j
            and all(
                times[last - i] - times[last - i - 1]
                == times[last - i - j] - times[last - i - j - 1]
                for i in range(j)
            )
            and times[last] > times[last - j]
        ]
        snap = self._key(now, c, top) if repeats else None
        hist.append((c, now, snap))
        del hist[: -2 * CUTS - 1]
        if snap is None:
            return None
        for j in repeats:
            prev = hist[-1 - j][2]
            if prev is not None and prev[0] == snap[0]:
                jump = self._jump(prev, snap, now, c, now - hist[-1 - j][1], j)
                if jump:
                    return jump
        return None

    # ----------------------------------------------------------------------------------------
    def _key(self, now: int, c: int, top: int) -> tuple[Any, ...] | None:
        """The loop's state at this cut relative to op ``c`` and time ``now`` (module
        docstring), with the window's bounds and its records' started flags as absolute
        values beside it; None where the window cannot hold every touched op."""
        s, n, rel = self.s, self.n, self.rel
        heap, queue, held = s["heap"], s["queue"], s["held"]
        ops_named: list[int] = []
        norm_heap = []
        for t, key, hop in heap:
            if key == rel:
                norm_heap.append((t - now, REL_MARK, hop))
                continue
            op = key + hop * n if hop > 0 else key
            ops_named.append(op)
            norm_heap.append((t - now, op - c, hop))
        norm_heap.sort()
        queued = []
        for server in sorted(queue):
            line = queue[server]
            if line:
                queued.append((server, tuple((i - c, h) for i, h in line)))
                ops_named.extend(i for i, _ in line)
        waits = []
        for pool in sorted(held):
            line = held[pool]
            if line:
                waits.append((pool, tuple(i - c for i in line)))
                ops_named.extend(line)
        lo = min(self.lo, min(ops_named, default=self.lo))
        slot = self.slot
        r_start = s["r_start"]
        granted, hbm_got = s["granted"], s["hbm_got"]
        # every op a started op has told of itself lies below hi (only an op that has
        # started a record has told its dependents anything)
        hi = max(top + self.maxoff, max(ops_named, default=lo), lo) + 1
        if hi > n:
            return None
        a, b = slot[lo], slot[hi]
        started = [v >= 0 for v in r_start[a:b]]

        def since(vals: list[int]) -> tuple[int | None, ...]:
            return tuple(v - now if v else None for v in vals)

        key = (
            lo - c,
            hi - c,
            top - c,
            tuple(norm_heap),
            tuple(queued),
            tuple(waits),
            tuple(s["busy"]),
            tuple(s["credits"]),
            tuple(h - now if h > now else 0 for h in s["hbm_free"]),
            tuple(s["waiting"][lo:hi]),
            tuple(granted[lo:hi]),
            tuple(hbm_got[lo:hi]),
            since(s["head"][lo:hi]),
            since(s["tail"][lo:hi]),
            since(s["hop_end"][lo:hi]),
            tuple(started),
        )
        return key, c, lo, hi, started

    # ----------------------------------------------------------------------------------------
    def repeats_until(self, lo: int) -> int:
        """The first op ``i >= lo`` that op ``i + D`` does not repeat (``n - D`` where every
        op from ``lo`` on with an op a period on does): a static fact of the loop's (the
        columns of ``static``), its consumed transfer or a dependent at another distance, or
        another streaming share."""
        n, D = self.n, self.D
        end = n - D
        first = min((_first_change(col, lo, D, end) for col in self.static.values()), default=end)
        if self._bad is None:
            self._bad = self._relative_changes()
        i = int(self._bad[np.searchsorted(self._bad, lo)])
        return min(first, i)

    def _relative_changes(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        """The ops ``i`` (sorted, then ``n - D``) whose consumed transfer or dependents op
        ``i + D`` does not have at the same distances and with the same streaming shares."""
        n, D = self.n, self.D
        ops = np.arange(n, dtype=np.int64)
        first_edge, first_part, edge_j, edge_a, edge_w, edge_sub = self.edges
        fe = np.asarray(first_edge, dtype=np.int64)
        count = np.diff(fe)
        cons = np.asarray(self.consumes, dtype=np.int64)
        rel = np.where(cons >= 0, cons - ops, 0)
        plain = np.asarray(first_part, dtype=np.int64) - fe[:-1]
        cols = [rel, count, plain]
        same = np.zeros(0, dtype=bool)
        if n > D:
            same = np.ones(n - D, dtype=bool)
            for col in cols:
                same &= col[:-D] == col[D:]
        prod = np.repeat(ops, count)
        e_cols = [np.asarray(edge_j, dtype=np.int64) - prod]
        if any(edge_a) or any(edge_sub):  # streaming shares (every edge whole-op: none)
            try:
                e_cols += [np.asarray(v, dtype=np.int64) for v in (edge_a, edge_w, edge_sub)]
            except OverflowError:  # a product past int64 (events._streams): never periodic
                return np.asarray([0, max(n - D, 0)], dtype=np.int64)
        e = np.stack(e_cols, axis=1)
        idx = np.arange(len(prod), dtype=np.int64)
        ok = prod < n - D
        ok[ok] = same[prod[ok]]
        there = idx[ok] - fe[prod[ok]] + fe[prod[ok] + D]
        differs = (e[idx[ok]] != e[there]).any(axis=1)
        same[prod[ok][differs]] = False
        return np.append(np.flatnonzero(~same), max(n - D, 0)).astype(np.int64)

    # ----------------------------------------------------------------------------------------
    def _jump(
        self,
        prev: tuple[Any, ...],
        snap: tuple[Any, ...],
        now: int,
        c: int,
        delta: int,
        j: int,
    ) -> tuple[int, int, int] | None:
        """Skip ``m`` times the ``j`` periods from the cut of ``prev`` to this one (``delta``
        long), as many as the ops ahead repeat: their records, then the state shifted."""
        D, slot, s = self.D, self.slot, self.s
        _k0, c0, lo0, _hi0, started0 = prev
        _k1, _c1, lo, hi, _started1 = snap
        P = j * D
        assert c0 + P == c
        # every op the m skipped runs touch is the one P (so D, D, ...) before it
        f = self.repeats_until(lo0)
        m = (f - hi + D) // P
        if m < 1:
            return None
        r_start, r_end = s["r_start"], s["r_end"]
        a0 = slot[lo0]
        ran = [
            x
            for x in range(a0, slot[hi])
            if r_start[x] >= 0 and not (x - a0 < len(started0) and started0[x - a0])
        ]  # the records the last period started
        per = slot[c] - slot[c0]
        for run in range(1, m + 1):
            dt, dx = run * delta, run * per
            for x in ran:
                r_start[x + dx] = r_start[x] + dt
                r_end[x + dx] = r_end[x] + dt
        shift, dt = m * P, m * delta
        for name in ("waiting", "granted", "hbm_got"):
            col = s[name]
            col[lo + shift : hi + shift] = col[lo:hi]
        # 0 is "not yet set" and stays 0. One set at time 0 would shift, but it is as good as
        # 0 after the cut: a head counts only as the latest of its producers' first bursts,
        # each at least the loop's time then, and a tail only past begin + total - burst,
        # burst <= total (sim.fabric.holds)
        for name in ("head", "tail", "hop_end"):
            col = s[name]
            col[lo + shift : hi + shift] = [v + dt if v else 0 for v in col[lo:hi]]
        n, rel = self.n, self.rel
        heap = s["heap"]
        heap[:] = [(t + dt, key if key == rel else key + shift, hop) for t, key, hop in heap]
        heapq.heapify(heap)
        for line in s["queue"].values():
            moved = [(i + shift, h) for i, h in line]
            line.clear()
            line.extend(moved)
        for waits in s["held"].values():
            moved_ = [i + shift for i in waits]
            waits.clear()
            waits.extend(moved_)
        hbm = s["hbm_free"]
        hbm[:] = [(h if h > now else now) + dt for h in hbm]
        self.lo += shift
        nxt = c + shift + D
        self.next_cut = nxt if nxt < n else -2
        self.hist = []  # the cuts ahead are compared afresh
        if ran:  # the ops whose records the jump wrote
            first, last = ran[0] + per, ran[-1] + m * per
            self.jumps.append(
                (c, m, bisect.bisect_right(slot, first) - 1, bisect.bisect_right(slot, last) - 1)
            )
        return dt, shift, m * len(ran)


def _first_change(col: Sequence[Any], lo: int, D: int, end: int) -> int:
    """The first ``i`` in ``[lo, end)`` with ``col[i] != col[i + D]``, or ``end``: slices
    compared in C, halving the range that holds the first change."""
    if lo >= end or col[lo:end] == col[lo + D : end + D]:
        return end
    a, b = lo, end  # the first change is in [a, b)
    while b - a > 32:
        mid = (a + b) // 2
        if col[a:mid] == col[a + D : mid + D]:
            a = mid
        else:
            b = mid
    return next(i for i in range(a, b) if col[i] != col[i + D])
