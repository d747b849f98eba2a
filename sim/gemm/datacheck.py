"""Replay a GEMM op log on real data moved through byte-addressed HBM, SRAM and PE memory.

The functional contract (docs/architecture.md, "Data flow"; docs/adr/0006): every op carries
the data it moves (:class:`sim.core.Access`). :func:`check_gemm_data` fills HBM with
integer-valued A and B
(stored pre-tiled, as the program's address map says), then executes every op's access
against byte arrays: a DMA copies the bytes of its source range to its destination, a
fetch copies SRAM into a PE operand slot, a tile-op multiplies what its slot holds and
accumulates into its C buffer, a DMA out writes C back. The C read back from HBM must
equal ``A @ B`` exactly (small integers, exact in the element type).

Data is executed in program order, which every GEMM program keeps a valid sequential
order; the op log's times are then checked against that order, byte by byte:

* **RAW**: a read starts only after the write that produced its bytes has landed
  (``end``); reading bytes no op has written is an error too.
* **WAR**: a write starts only after every read of the bytes it overwrites has finished
  (a DMA has read its source at its *release*, ``end - latency``; a fetch or tile-op at
  its ``end``).
* **WAW**: a write starts only after the previous write of the same bytes has landed.

Tile-ops of one output tile accumulate in the PE pipeline in issue order (their
``chain``), so they are exempt from each other's C-buffer checks. Under these checks
the data seen in time order equals the data of the program-order execution, so the
final comparison is the real one. Errors name both operations: op id, engine, stage,
time, space and address range (and the buffer it lies in).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from sim.core import COPY, DMA, FETCH_COPY, HBM, MAC, PE, SPACES, SRAM, Access, Op
from sim.gemm.program import GemmProgram
from sim.gemm.run import GemmRun

__all__ = ["DataCheckError", "DataHazard", "check_gemm_data", "gemm_inputs"]

I64 = npt.NDArray[np.int64]
HOST = -2  # the writer of the initial A and B
NEVER = -1


class DataCheckError(AssertionError):
    """The replayed data is wrong: C != A @ B, or an op reads bytes nobody wrote."""


class DataHazard(DataCheckError):
    """The op log's times break a dependency: a read before its data landed (RAW), or a
    write into bytes still to be read (WAR) or still landing (WAW)."""


def _element_type(bpe: int) -> np.dtype[np.signedinteger]:
    if bpe not in (1, 2, 4, 8):
        raise ValueError(f"the data check needs 1, 2, 4 or 8 bytes per element, got {bpe}")
    return np.dtype(f"<i{bpe}")


def gemm_inputs(
    prog: GemmProgram, seed: int = 0
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Integer A and B whose products sum exactly in the element type (any K up to its range)."""
    s = prog.plan.shape
    top = int(np.iinfo(_element_type(prog.plan.bpe)).max)
    if s.K > top:
        raise ValueError(f"K={s.K} is too deep for an exact check in {prog.plan.bpe}-byte integers")
    r = max(1, min(4, math.isqrt(top // s.K)))
    rng = np.random.default_rng(seed)
    a = rng.integers(-r, r + 1, size=(s.M, s.K))
    b = rng.integers(-r, r + 1, size=(s.K, s.N))
    return a, b


class _Replay:
    def __init__(self, run: GemmRun, ops: list[Op], acc: list[Access]) -> None:
        self.run, self.prog, self.ops, self.acc = run, run.program, ops, acc
        log = run.log
        n = len(ops)
        self.start = np.full(n, -1, np.int64)
        self.end = np.full(n, -1, np.int64)
        self.engine = np.zeros(n, np.int64)
        self.start[log.op] = log.start
        self.end[log.op] = log.end
        self.engine[log.op] = log.engine
        if len(log) != n or int((self.start < 0).sum()):
            missing = int(np.argmax(self.start < 0))
            raise DataCheckError(
                f"the op log has {len(log)} records for {n} ops (op {missing} has none)"
            )
        p = self.prog.plan
        sizes = [r[2] for x in acc for r in (*x.reads, *x.writes)]
        addrs = [r[1] for x in acc for r in (*x.reads, *x.writes)]
        self.g = math.gcd(*sizes, *addrs, p.a_bytes, p.b_bytes, p.c_bytes, self.prog.c_base)
        self.extent = {
            HBM: self.prog.hbm_bytes,
            SRAM: self.prog.topo.sram.capacity_bytes,
            PE: self.prog.slots * (p.a_bytes + p.b_bytes),
        }
        self.data = {sp: np.zeros(size, np.uint8) for sp, size in self.extent.items()}
        self.dtype = _element_type(p.bpe)
        self.writer_of_c = np.full(-(-self.extent[HBM] // self.g), NEVER, np.int64)
        #: the padded tiles each tile-op should multiply ([mi, ki], [ni, ki]); wrong ones seen
        self.want_a: npt.NDArray[np.float64] | None = None
        self.want_b: npt.NDArray[np.float64] | None = None
        self.bad_a: dict[tuple[int, int], int] = {}
        self.bad_b: dict[tuple[int, int], int] = {}

    # descriptions -----------------------------------------------------------------------
    def where(self, rng: tuple[int, int, int]) -> str:
        sp, addr, n = rng
        text = f"{SPACES[sp]}[{addr:#x}, {addr + n:#x})"
        name = self.prog.buffer_name(sp, addr)
        return f"{text} ({name})" if name else text

    def who(self, op_id: int) -> str:
        if op_id == HOST:
            return "the host (initial A and B)"
        if op_id == NEVER:
            return "no op"
        op = self.ops[op_id]
        engine = self.prog.engines[int(self.engine[op_id])]
        stage = self.prog.stages[op.stage]
        tile = f", tile-op {op.tile}" if op.tile >= 0 else ""
        return (
            f"op {op_id} ({engine} {stage}{tile}, "
            f"[{int(self.start[op_id])}, {int(self.end[op_id])}) ps)"
        )

    def read_end(self, op_id: int) -> int:
        op = self.ops[op_id]
        return int(self.end[op_id]) - (op.lat if op.kind == DMA else 0)

    # hazards, all at once ----------------------------------------------------------------
    def check_hazards(self, host_bytes: int) -> None:
        """Every RAW, WAR and WAW constraint of the program order, checked on the log's times."""
        g = self.g
        ev_op, ev_write, ev_sp, ev_lo, ev_n, ev_chain, ev_rng = [], [], [], [], [], [], []
        # the host wrote A and B before time 0
        ev_op.append(HOST)
        ev_write.append(True)
        ev_sp.append(HBM)
        ev_lo.append(0)
        ev_n.append(-(-host_bytes // g))
        ev_chain.append(-1)
        ev_rng.append((HBM, 0, host_bytes))
        for op_id, a in enumerate(self.acc):
            for is_write, ranges in ((False, a.reads), (True, a.writes)):
                for rng in ranges:
                    sp, addr, n = rng
                    if addr < 0 or addr + n > self.extent[sp]:
                        raise DataCheckError(
                            f"{self.who(op_id)} accesses {self.where(rng)}, outside "
                            f"{SPACES[sp]} (size {self.extent[sp]:#x})"
                        )
                    ev_op.append(op_id)
                    ev_write.append(is_write)
                    ev_sp.append(sp)
                    ev_lo.append(addr // g)
                    ev_n.append(-(-(addr + n) // g) - addr // g)
                    ev_chain.append(a.chain if a.kind == MAC else -1)
                    ev_rng.append(rng)
        op = np.asarray(ev_op, np.int64)
        write = np.asarray(ev_write, bool)
        nrep = np.asarray(ev_n, np.int64)
        chain = np.asarray(ev_chain, np.int64)
        t0 = np.where(op >= 0, self.start[np.maximum(op, 0)], -1)
        lat = np.asarray([o.lat if o.kind == DMA else 0 for o in self.ops], np.int64)
        end = self.end[np.maximum(op, 0)]
        t1 = np.where(op >= 0, np.where(write, end, end - lat[np.maximum(op, 0)]), 0)
        # one row per (event, granule), grouped by granule in program order
        ev = np.repeat(np.arange(len(op)), nrep)
        first = np.repeat(np.cumsum(nrep) - nrep, nrep)
        cell = np.repeat(np.asarray(ev_lo, np.int64), nrep) + np.arange(len(ev)) - first
        key = np.repeat(np.asarray(ev_sp, np.int64), nrep) * (1 << 40) + cell
        order = np.argsort(key, kind="stable")
        ev, key = ev[order], key[order]
        pos = np.arange(len(ev))
        group_start = np.ones(len(ev), bool)
        group_start[1:] = key[1:] != key[:-1]
        gs = np.maximum.accumulate(np.where(group_start, pos, 0))
        is_w = write[ev]
        last_w = np.maximum.accumulate(np.where(is_w, pos, -1))
        prev_w = np.empty_like(last_w)  # the write before this row, in its granule
        prev_w[0] = -1
        prev_w[1:] = last_w[:-1]
        prev_w = np.where(prev_w >= gs, prev_w, -1)
        has_w = prev_w >= 0
        pw_ev = ev[np.maximum(prev_w, 0)]
        chained = has_w & (chain[ev] >= 0) & (chain[pw_ev] == chain[ev])
        # reads: bytes never written, or read before they landed (RAW)
        rd = ~is_w
        bad = rd & ~has_w
        if bad.any():
            e = int(ev[np.argmax(bad)])
            raise DataCheckError(
                f"{self.who(int(op[e]))} reads {self.where(ev_rng[e])}, bytes no op has written"
            )
        late = rd & has_w & ~chained & (t1[pw_ev] > t0[ev])
        if late.any():
            r = int(np.argmax(late))
            e, w = int(ev[r]), int(pw_ev[r])
            raise DataHazard(
                f"RAW hazard: {self.who(int(op[e]))} reads {self.where(ev_rng[e])} before its "
                f"data has arrived: {self.who(int(op[w]))} writes {self.where(ev_rng[w])} "
                f"until {int(t1[w])} ps"
            )
        # writes: over contents still to be read (WAR): the reads since the previous write
        seg = np.cumsum(is_w | group_start) - 1
        nseg = int(seg[-1]) + 1 if len(seg) else 0
        read_end = np.full(nseg, -1, np.int64)
        sel = rd & ~chained  # a chained read is the pipeline's own accumulation
        np.maximum.at(read_end, seg[sel], t1[ev[sel]])
        before = np.where(is_w & ~group_start, seg - 1, 0)
        war = is_w & ~group_start & (read_end[before] > t0[ev])
        war &= ~((chain[ev] >= 0) & chained)
        if war.any():
            r = int(np.argmax(war))
            e = int(ev[r])
            s = int(before[r])
            readers = np.flatnonzero(sel & (seg == s))
            k = int(readers[np.argmax(t1[ev[readers]])])
            rr = int(ev[k])
            raise DataHazard(
                f"WAR hazard: {self.who(int(op[e]))} writes {self.where(ev_rng[e])} while "
                f"its contents are still to be read: {self.who(int(op[rr]))} reads "
                f"{self.where(ev_rng[rr])} until {int(t1[rr])} ps"
            )
        # writes: over a write still landing (WAW)
        waw = is_w & has_w & ~chained & (t1[pw_ev] > t0[ev])
        if waw.any():
            r = int(np.argmax(waw))
            e, w = int(ev[r]), int(pw_ev[r])
            raise DataHazard(
                f"WAW hazard: {self.who(int(op[e]))} writes {self.where(ev_rng[e])} while "
                f"{self.who(int(op[w]))} is still writing it (until {int(t1[w])} ps)"
            )
        # who wrote each HBM granule last (for the messages about C)
        last = np.flatnonzero(is_w)  # in granule then program order: the last one wins
        hbm_rows = last[(key[last] >> 40) == HBM]
        self.writer_of_c[key[hbm_rows] & ((1 << 40) - 1)] = op[ev[hbm_rows]]

    # data, in program order ----------------------------------------------------------------
    def bytes_of(self, rng: tuple[int, int, int]) -> npt.NDArray[np.uint8]:
        sp, addr, n = rng
        return self.data[sp][addr : addr + n]

    def execute(self, op_id: int) -> None:
        a = self.acc[op_id]
        if a.kind == COPY:
            self.bytes_of(a.writes[0])[:] = self.bytes_of(a.reads[0])
        elif a.kind == FETCH_COPY:
            self.bytes_of(a.writes[0])[:] = np.concatenate([self.bytes_of(r) for r in a.reads])
        elif a.kind == MAC:
            self.mac(op_id, a)
        else:
            raise DataCheckError(f"op {op_id}: unknown access kind {a.kind}")

    def check_operands(
        self, op_id: int, at: npt.NDArray[np.float64], bt: npt.NDArray[np.float64]
    ) -> None:
        """Note the A and B tiles a tile-op multiplied that are not the ones it should have
        (tile-op ``(mi, ni, ki)`` multiplies A tile ``(mi, ki)`` by B tile ``(ki, ni)``)."""
        if self.want_a is None or self.want_b is None:
            return
        p = self.prog.plan
        t = self.ops[op_id].tile
        j, ki = divmod(t, p.Kt)
        mi, ni = divmod(j, p.Nt)
        if not np.array_equal(at, self.want_a[mi, ki]):
            self.bad_a.setdefault((mi, ki), op_id)
        if not np.array_equal(bt, self.want_b[ni, ki]):
            self.bad_b.setdefault((ki, ni), op_id)

    def mac(self, op_id: int, a: Access) -> None:
        p = self.prog.plan
        slot = self.bytes_of(a.reads[0]).view(self.dtype)
        # float64 products of small integers are exact (|sums| < 2**53), and use BLAS
        at = slot[: p.m * p.k].reshape(p.m, p.k).astype(np.float64)
        bt = slot[p.m * p.k : p.m * p.k + p.k * p.n].reshape(p.k, p.n).astype(np.float64)
        c = self.bytes_of(a.writes[0]).view(self.dtype).reshape(p.m, p.n)
        self.check_operands(op_id, at, bt)
        acc = at @ bt
        if len(a.reads) > 1:
            acc += c
        info = np.iinfo(self.dtype)
        if acc.size and (int(acc.max()) > info.max or int(acc.min()) < info.min):
            raise DataCheckError(f"{self.who(op_id)}: partial sums overflow the element type")
        c[:] = acc


def _operand_tiles(
    prog: GemmProgram, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The padded tiles of A (``[mi, ki]``, m x k) and B (``[ni, ki]``, k x n)."""
    p, s = prog.plan, prog.plan.shape
    ap = np.zeros((p.Mt * p.m, p.Kt * p.k))
    bp = np.zeros((p.Kt * p.k, p.Nt * p.n))
    ap[: s.M, : s.K], bp[: s.K, : s.N] = a, b
    at = ap.reshape(p.Mt, p.m, p.Kt, p.k).transpose(0, 2, 1, 3)
    bt = bp.reshape(p.Kt, p.k, p.Nt, p.n).transpose(2, 0, 1, 3)
    return at, bt


def _tiles_in(prog: GemmProgram, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> bytes:
    """HBM image of A (row panels of tiles) and B (column panels of tiles), padded."""
    p, s = prog.plan, prog.plan.shape
    dt = _element_type(p.bpe)
    ap = np.zeros((p.Mt * p.m, p.Kt * p.k), dt)
    bp = np.zeros((p.Kt * p.k, p.Nt * p.n), dt)
    ap[: s.M, : s.K], bp[: s.K, : s.N] = a, b
    image = np.zeros(prog.c_base, np.uint8)
    at = ap.reshape(p.Mt, p.m, p.Kt, p.k).transpose(0, 2, 1, 3)  # [mi, ki] -> m x k
    bt = bp.reshape(p.Kt, p.k, p.Nt, p.n).transpose(2, 0, 1, 3)  # [ni, ki] -> k x n
    for base, tiles in ((prog.a_base, at), (prog.b_base, bt)):
        raw = np.ascontiguousarray(tiles).view(np.uint8).ravel()
        image[base : base + len(raw)] = raw
    return image.tobytes()


def check_gemm_data(run: GemmRun, seed: int = 0) -> None:
    """Replay ``run`` on real data; raise :class:`DataCheckError` (or :class:`DataHazard`)
    naming the ops involved if any byte moves wrongly or C read back != A @ B."""
    prog = run.program
    ops: list[Op] = []
    acc: list[Access] = []
    for blk in range(prog.num_blocks):
        prog.build_block(blk, ops, acc)
    rep = _Replay(run, ops, acc)
    a, b = gemm_inputs(prog, seed)
    image = np.frombuffer(_tiles_in(prog, a, b), np.uint8)
    rep.check_hazards(len(image))
    rep.data[HBM][: len(image)] = image
    rep.want_a, rep.want_b = _operand_tiles(prog, a, b)
    for op_id in range(len(ops)):
        rep.execute(op_id)
    _compare_c(rep, (a.astype(np.float64) @ b.astype(np.float64)).astype(np.int64))


def _compare_c(rep: _Replay, want: npt.NDArray[np.int64]) -> None:
    prog = rep.prog
    p, s = prog.plan, prog.plan.shape
    nbytes = p.out_tiles * p.c_bytes
    raw = rep.data[HBM][prog.c_base : prog.c_base + nbytes].view(rep.dtype)
    tiles = raw.reshape(p.Mt, p.Nt, p.m, p.n)
    got = tiles.transpose(0, 2, 1, 3).reshape(p.Mt * p.m, p.Nt * p.n)[: s.M, : s.N]
    wrong = got != want
    if not wrong.any():
        return
    r, c = (int(x) for x in np.argwhere(wrong)[0])
    mi, ni = r // p.m, c // p.n
    j = mi * p.Nt + ni
    addr = prog.c_base + j * p.c_bytes  # where the host reads output tile j back
    rng = (HBM, addr, p.c_bytes)
    cells = rep.writer_of_c[addr // rep.g : -(-(addr + p.c_bytes) // rep.g)]
    writers = sorted({int(w) for w in cells})
    never = NEVER in writers
    by = ", ".join(rep.who(w) for w in writers if w != NEVER) or "no op"
    detail = f"written by {by}"
    if never:
        unwritten = int((cells == NEVER).sum()) * rep.g
        detail += f"; {unwritten} of its {p.c_bytes} bytes never written by any DMA out"
    raise DataCheckError(
        f"GEMM {s} {prog.variant}: C read back from HBM != A @ B in "
        f"{int(wrong.sum())} of {wrong.size} elements; first wrong: C[{r}, {c}] = "
        f"{int(got[r, c])}, expected {int(want[r, c])}, in output tile ({mi}, {ni}) at "
        f"{rep.where(rng)}, {detail}; {_which_operand(rep, wrong)}; {_channel_balance(rep)}"
    )


def _tile_list(tiles: dict[tuple[int, int], int], rep: _Replay, total: int, name: str) -> str:
    shown = ", ".join(f"{t} (first read by {rep.who(op)})" for t, op in sorted(tiles.items())[:3])
    more = f" and {len(tiles) - 3} more" if len(tiles) > 3 else ""
    return f"{name} tiles wrong at the PE: {len(tiles)} of {total}: {shown}{more}"


def _which_operand(rep: _Replay, wrong: npt.NDArray[np.bool_]) -> str:
    """Which operand's tiles were wrong: A or B as the PE multiplied them, else the C
    accumulators (the output tiles whose sums or write-back went wrong)."""
    p = rep.prog.plan
    parts = []
    if rep.bad_a:
        parts.append(_tile_list(rep.bad_a, rep, p.Mt * p.Kt, "A (mi, ki)"))
    if rep.bad_b:
        parts.append(_tile_list(rep.bad_b, rep, p.Kt * p.Nt, "B (ki, ni)"))
    if parts:
        return "; ".join(parts)
    s = p.shape
    pad = np.zeros((p.Mt * p.m, p.Nt * p.n), bool)
    pad[: s.M, : s.N] = wrong
    tiles = pad.reshape(p.Mt, p.m, p.Nt, p.n).any(axis=(1, 3))
    bad = [(int(x), int(y)) for x, y in np.argwhere(tiles)]
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    return (
        "every A and B tile reached the PE right: the C accumulators are wrong (their sums or "
        f"write-back), {len(bad)} of {p.Mt * p.Nt} output tiles (mi, ni): "
        f"{', '.join(map(str, bad[:3]))}{more}"
    )


def _channel_balance(rep: _Replay) -> str:
    """How busy the busiest HBM pseudo-channel was against the mean (every DMA's bursts)."""
    pcs = rep.prog.topo.hbm.num_pcs
    bursts = np.zeros(pcs, np.int64)
    for op in rep.ops:
        for ch, n in op.chans:
            bursts[ch] += n
    ps = rep.prog.topo.hbm.burst_ps
    mean = float(bursts.mean()) * ps
    top = int(np.argmax(bursts))
    ratio = f"{bursts[top] * ps / mean:.2f}x the mean" if mean else "no HBM traffic"
    return (
        f"busiest HBM pseudo-channel {top}: {int(bursts[top]) * ps / 1000:g} ns busy, "
        f"{ratio} ({mean / 1000:g} ns over {pcs} channels)"
    )
