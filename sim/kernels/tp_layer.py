"""Tensor-parallel transformer layers: each chip's GEMM shards and the collectives on one clock.

Layers (Megatron-LM, Shoeybi et al. 2019), ``T`` tokens, hidden ``h``, ``p`` chips:

* ``mlp``: ``Y = (X @ W1) @ W2``; W1 ``[h, 4h]`` column parallel (chip c holds ``4h/p``
  columns, so gemm1 is ``T x h x 4h/p``), W2 ``[4h, h]`` row parallel (gemm2 ``T x 4h/p x h``)
  whose partial outputs must be summed over the chips. The activation is left out: it is
  element-wise and moves nothing between chips (and integer data stays exact).
* ``attn``: the attention output projection ``Y = A @ Wo`` with ``A`` already split by heads
  (chip c holds ``h/p`` columns): one row-parallel gemm2 ``T x h/p x h``.

Modes:

* ``serial``: the GEMMs, then a ring allreduce of ``Y`` (``sim.kernels.allreduce``).
* ``gemm_ar``: gemm2 is cut into ``chunks`` groups of token rows; the allreduce of each
  group starts on a chip as soon as that chip has finished the group (FLUX's and
  Triton-distributed's ``gemm_ar``), while the GEMM goes on.
* ``ag_rs`` (sequence parallelism, Korthikanti et al. 2022; PyTorch async TP): the input
  ``X`` is split by tokens; gemm1 runs in ``p`` steps, step ``s`` on the block received in
  step ``s-1`` while the next block travels (all-gather as ``p`` steps of peer-to-peer
  transfers to both ring neighbours, each carrying half of a block); gemm2 runs in ``p``
  steps whose partial outputs are accumulated around both rings (reduce-scatter): the chip
  at ring position ``q`` ends with its own token block of ``Y``, summed. ``attn`` has no
  all-gather (its input is the attention output, already split by heads).

Granularity (docs/adr/0014-tensor-parallel-layer.md): ``coarse`` runs one op per group of
output tiles (rows), its PE time taken from the real GEMM simulator run alone
(:func:`gemm_curve`) and its HBM bytes streamed over its duration; ``tile`` runs the GEMM's
own tile-level program (``sim.kernels.gemm.GemmProgram``) inside the joint engine.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import numpy as np
import numpy.typing as npt

from sim.collectives import Compiled, build_schedule, fabric_program
from sim.core import DMA as CORE_DMA
from sim.core import PIPE as CORE_PIPE
from sim.core import SERVE as CORE_SERVE
from sim.core import program_ops, simulate
from sim.cosim import (
    BLOCK,
    COPY,
    DMA,
    PIPE,
    REDUCE,
    SERVE,
    STAGES,
    TRANSFER,
    JointProgram,
    simulate_joint,
)
from sim.errors import InputError
from sim.fabric import COPY as FAB_COPY
from sim.fabric import REDUCTION as FAB_REDUCTION
from sim.fabric import Network, build_network, hbm_default
from sim.kernels.gemm import GemmProgram, GemmShape
from sim.model import gemm_model
from sim.oplog import OpLog
from sim.topology import Topology, ps_for_bytes

__all__ = [
    "GRANULARITIES",
    "LAYERS",
    "MODES",
    "GemmCurve",
    "LayerConfig",
    "LayerError",
    "LayerRun",
    "check_layer_data",
    "gemm_curve",
    "layer_metrics",
    "run_layer",
]

Mode = Literal["serial", "gemm_ar", "ag_rs"]
MODES: tuple[Mode, ...] = ("serial", "gemm_ar", "ag_rs")
LAYERS = ("mlp", "attn")
GRANULARITIES = ("coarse", "tile")
#: the allreduce algorithm of serial and gemm_ar (two counter-rotating rings, as NCCL)
ALGORITHM = "ring"
#: a shard GEMM up to this many tile-ops is simulated whole for its curve; longer ones by probe
FULL_TILE_OPS = 50_000
PROBE_ROWS = 3  # tile rows a probe runs beyond twice its staging's look-ahead
I64 = npt.NDArray[np.int64]


class LayerError(InputError):
    """A layer config that cannot be built; the message says what to change."""


@dataclass(frozen=True)
class LayerConfig:
    """One tensor-parallel layer run: shapes, mode and how the GEMMs are simulated."""

    layer: str
    tokens: int
    hidden: int
    mode: str
    chunks: int = 4
    variant: str = "resident"
    granularity: str = "coarse"

    def __post_init__(self) -> None:
        for name, allowed in (
            ("layer", LAYERS),
            ("mode", MODES),
            ("granularity", GRANULARITIES),
        ):
            if getattr(self, name) not in allowed:
                raise LayerError(
                    f"unknown {name} {getattr(self, name)!r}; use one of {', '.join(allowed)}"
                )
        for name in ("tokens", "hidden", "chunks"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise LayerError(f"{name} must be an integer >= 1, got {v!r}")


def gemm_shapes(cfg: LayerConfig, p: int) -> list[tuple[str, GemmShape]]:
    """Each chip's GEMM shards, in order: (stage, shape)."""
    t, h = cfg.tokens, cfg.hidden
    for what, n in (("4 x hidden", 4 * h), ("hidden", h)):
        if n % p:
            raise LayerError(f"{what} = {n} is not divisible by the TP degree {p}")
    if cfg.mode == "ag_rs" and t % (2 * p):
        raise LayerError(
            f"ag_rs splits the {t} tokens into 2 x {p} half blocks; use tokens divisible by {2 * p}"
        )
    if cfg.mode != "ag_rs" and t % cfg.chunks:
        raise LayerError(f"tokens = {t} is not divisible by chunks = {cfg.chunks}")
    if cfg.layer == "mlp":
        return [("gemm1", GemmShape(t, h, 4 * h // p)), ("gemm2", GemmShape(t, 4 * h // p, h))]
    return [("gemm2", GemmShape(t, h // p, h))]


# --- the GEMM alone: its progress curve ---------------------------------------------------------


@dataclass(frozen=True)
class GemmCurve:
    """The GEMM run alone: when its first r tile rows are done (``done[r-1]``, ps) and how
    many HBM bytes its DMAs had landed by then (``moved[r-1]``); ``probed``: rows beyond
    :data:`PROBE_ROWS` extrapolated."""

    shape: GemmShape
    tile_m: int
    done: tuple[int, ...]
    moved: tuple[int, ...]
    probed: bool

    @property
    def hbm_bytes(self) -> int:
        return self.moved[-1]

    @staticmethod
    def _interp(curve: tuple[int, ...], rows: int, tile_m: int) -> int:
        q, rem = divmod(rows, tile_m)
        before = curve[q - 1] if q else 0
        if rem == 0:
            return before
        return before + (curve[q] - before) * rem // tile_m

    def at(self, rows: int) -> int:
        """Time to finish ``rows`` token rows (linear within a tile row)."""
        return self._interp(self.done, rows, self.tile_m)

    def bytes_at(self, rows: int) -> int:
        """HBM bytes moved by the time ``rows`` token rows are finished."""
        return self._interp(self.moved, rows, self.tile_m)


def _rows_done(prog: GemmProgram, log: OpLog) -> tuple[list[int], list[int]]:
    """Per tile row: when its last output tile has landed, and the DMA bytes landed by then
    (the last row takes every remaining byte)."""
    end = dict(zip(log.op.tolist(), log.end.tolist(), strict=True))
    done, best = [], 0
    for mi in range(prog.Mt):
        for ni in range(prog.Nt):
            best = max(best, end[prog.cout_id(mi * prog.Nt + ni)])
        done.append(best)
    dma = log.mask(stage="dma_in") | log.mask(stage="dma_out")
    order = np.argsort(log.end[dma], kind="stable")
    ends = log.end[dma][order]
    cum = np.cumsum(log.nbytes[dma][order])
    moved = [int(cum[np.searchsorted(ends, d, side="right") - 1]) for d in done]
    moved[-1] = int(cum[-1])
    return done, moved


@lru_cache(maxsize=256)
def gemm_curve(shape: GemmShape, variant: str, topo: Topology) -> GemmCurve:
    """The real GEMM simulator run alone (``sim.core.simulate``): when each tile row is done.

    A shard above :data:`FULL_TILE_OPS` tile-ops with more than ``2 x ahead + PROBE_ROWS``
    tile rows (``ahead``: rows its staging prefetches ahead; not staged ``whole``, which is
    not row-periodic) is probed: that many rows are simulated (same mode and buffers as the
    whole shard), the middle rows repeat the increments (time and bytes) of row
    ``ahead + 1``, the last rows add the probe's last increments (its drain).
    """
    whole = GemmProgram(shape, variant, topo)
    # 'whole' staging loads all of A first (not row-periodic); it only fits small shapes
    ahead = _rows_ahead(whole) if whole.mode != "whole" else whole.Mt
    if whole.N <= FULL_TILE_OPS or whole.Mt <= 2 * ahead + PROBE_ROWS:
        done, moved = _rows_done(whole, simulate(whole))
        return GemmCurve(shape, topo.pe.tile_m, tuple(done), tuple(moved), False)
    rows = 2 * ahead + PROBE_ROWS
    probe_shape = GemmShape(rows * topo.pe.tile_m, shape.K, shape.N)
    probe = GemmProgram(probe_shape, variant, topo, mode=whole.mode)
    d, b = _rows_done(probe, simulate(probe))
    m = ahead + 1  # a row whose prefetch runs as in the middle of the whole shard
    return GemmCurve(shape, topo.pe.tile_m, _extend(d, whole.Mt, m), _extend(b, whole.Mt, m), True)


def _rows_ahead(prog: GemmProgram) -> int:
    """Tile rows the program's operand staging reaches ahead (A panels, B panels, tiles)."""
    bu, per_row = prog.buffers, prog.Nt * prog.Kt
    if prog.mode == "panel":
        return max(bu.a, -(-bu.b // prog.Nt))
    return -(-prog.nbuf // per_row)


def _extend(probe: list[int], rows: int, m: int) -> tuple[int, ...]:
    """A probe's cumulative per-row values stretched to ``rows`` rows: its first ``m + 1``
    rows, then row ``m``'s increment repeated, then the probe's last rows' increments (the
    drain, where nothing is left to prefetch)."""
    steady = probe[m] - probe[m - 1]
    tail = [y - x for x, y in itertools.pairwise(probe[m:])]
    out = probe[: m + 1]
    while len(out) < rows - len(tail):
        out.append(out[-1] + steady)
    for inc in tail:
        out.append(out[-1] + inc)
    return tuple(out[:rows])


# --- building the joint program -----------------------------------------------------------------

#: a data action per op, for the replay: (what, chip, buffer, lo, hi, extra)
Action = tuple[str, int, str, int, int, int]


@dataclass
class _Built:
    prog: JointProgram = field(default_factory=JointProgram)
    actions: list[Action] = field(default_factory=list)
    consumes: dict[int, int] = field(default_factory=dict)  # reduce/copy -> its transfer


def _pieces(lo: int, hi: int, bpe: int, chunk: int) -> list[tuple[int, int]]:
    """Elements ``[lo, hi)`` cut into equal pieces (within one element) of at most ``chunk`` B."""
    k = max(1, -(-(hi - lo) * bpe // chunk))
    cuts = [lo + (hi - lo) * i // k for i in range(k + 1)]
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


class _Builder:
    def __init__(
        self,
        cfg: LayerConfig,
        topo: Topology,
        net: Network,
        *,
        gemm: bool = True,
        comm: bool = True,
    ) -> None:
        self.cfg, self.topo, self.net = cfg, topo, net
        self.p = net.chips
        self.gemm, self.comm = gemm, comm
        self.bpe = topo.bpe
        self.shapes = gemm_shapes(cfg, self.p)
        self.out = _Built()
        self.order = list(net.ring_order())
        self.pos = {c: q for q, c in enumerate(self.order)}
        self.h = cfg.hidden
        #: per (chip, stage): op ids producing token rows (lo, hi, [ids])
        self.produced: dict[tuple[int, str], list[tuple[int, int, list[int]]]] = {}
        self.prev_last: dict[int, int] = {}  # chip -> last op of the previous tile-level GEMM
        self.rows_done: dict[tuple[int, str], int] = {}  # rows of each GEMM issued so far
        self.ag_ops: dict[int, list[int]] = {}  # chip -> its all-gather copies

    # ops ---------------------------------------------------------------------------------
    def add(self, action: Action, kind: int, chip: int, deps: list[int], **kw: int | str) -> int:
        i = self.out.prog.add(kind, chip, sorted(set(deps)), **kw)  # type: ignore[arg-type]
        self.out.actions.append(action)
        return i

    def gemm_rows(
        self, chip: int, stage: str, groups: list[tuple[int, int]], deps: list[list[int]]
    ) -> None:
        """One GEMM shard on ``chip``, its token rows computed in ``groups`` order."""
        if not self.gemm:
            return
        shape = dict(self.shapes)[stage]
        dst = "h" if stage == "gemm1" else "y"  # the buffer it writes (the replay's name)
        made = self.produced.setdefault((chip, stage), [])
        if self.cfg.granularity == "tile":
            self._tile_gemm(chip, stage, shape, groups, deps)
            return
        curve = gemm_curve(shape, self.cfg.variant, self.topo)
        done = self.rows_done.get((chip, stage), 0)
        for (r0, r1), extra in zip(groups, deps, strict=True):
            rows = r1 - r0
            need = list(extra)
            if stage == "gemm2" and self.cfg.layer == "mlp":
                need += self.rows_ready(chip, "gemm1", r0, r1)
            dur = curve.at(done + rows) - curve.at(done)
            nb = curve.bytes_at(done + rows) - curve.bytes_at(done)
            i = self.add(
                ("gemm", chip, dst, r0, r1, 0),
                BLOCK,
                chip,
                need,
                stage=stage,
                res=self.topo.dma.engines + 1,
                dur=dur,
                hbm=nb,
                macs=rows * shape.K * shape.N,
                tile=r0,
            )
            made.append((r0, r1, [i]))
            done += rows
        self.rows_done[(chip, stage)] = done

    def _tile_gemm(
        self,
        chip: int,
        stage: str,
        shape: GemmShape,
        groups: list[tuple[int, int]],
        deps: list[list[int]],
    ) -> None:
        """The GEMM's own tile-level program; rows in order (only serial and gemm_ar)."""
        if [g for g in groups] != sorted(groups) or any(d for d in deps):
            raise LayerError("tile granularity runs GEMMs in row order only (serial, gemm_ar)")
        prog = GemmProgram(shape, self.cfg.variant, self.topo)
        tm = self.topo.pe.tile_m
        for r0, r1 in groups:
            if r0 % tm or (r1 % tm and r1 != shape.M):
                raise LayerError(f"tile granularity needs groups of whole tile rows ({tm} tokens)")
        base = len(self.out.prog)
        gate = self.prev_last.get(chip)
        kinds = {CORE_DMA: DMA, CORE_SERVE: SERVE, CORE_PIPE: PIPE}
        for op in program_ops(prog):
            deps_ = [base + d if d >= 0 else ~(base + ~d) for d in op.deps]
            if not deps_ and gate is not None:
                deps_ = [gate]
            self.add(
                ("none", chip, "", 0, 0, 0),
                kinds[op.kind],
                chip,
                deps_,
                stage=STAGES[op.stage],
                res=op.res,
                nbytes=op.nbytes,
                hbm=op.nbytes if op.kind == CORE_DMA else 0,
                macs=op.macs,
                tile=op.tile,
                dur=op.dur,
                lat=op.lat,
                chans=op.chans,  # type: ignore[arg-type]
            )
        made = self.produced.setdefault((chip, stage), [])
        for r0, r1 in groups:
            ids = [
                base + prog.cout_id(mi * prog.Nt + ni)
                for mi in range(r0 // tm, -(-r1 // tm))
                for ni in range(prog.Nt)
            ]
            made.append((r0, r1, ids))
        self.prev_last[chip] = base + prog.cout_id(prog.out_tiles - 1)

    def rows_ready(self, chip: int, stage: str, r0: int, r1: int) -> list[int]:
        """Ops of ``stage`` on ``chip`` that produce any of token rows ``[r0, r1)``."""
        return [
            i
            for a, b, ids in self.produced.get((chip, stage), [])
            if a < r1 and r0 < b
            for i in ids
        ]

    # collectives -------------------------------------------------------------------------
    def allreduce_rows(self, r0: int, r1: int) -> None:
        """A ring allreduce of ``Y`` rows ``[r0, r1)``; each chip's ops wait for its GEMM."""
        if not self.comm:
            return
        compiled = _compiled(self.topo, (r1 - r0) * self.h * self.bpe)
        fab = compiled.program
        base = len(self.out.prog)
        e0 = r0 * self.h
        gate = {c: self.rows_ready(c, "gemm2", r0, r1) for c in range(self.p)}
        for i in range(len(fab)):
            k, c = fab.kind[i], fab.src[i]
            lo, hi = compiled.bounds[compiled.lo[i]] + e0, compiled.bounds[compiled.hi[i]] + e0
            deps = [base + d for d in fab.deps[i]] + gate[c]
            hbm = hbm_default(k, fab.nbytes[i]) if fab.hbm[i] < 0 else fab.hbm[i]
            if k in (FAB_REDUCTION, FAB_COPY):
                what = "reduce" if k == FAB_REDUCTION else "copy"
                j = self.add(
                    (what, c, "y", lo, hi, base + fab.consumes[i]),
                    REDUCE if k == FAB_REDUCTION else COPY,
                    c,
                    deps,
                    stage=what,
                    nbytes=fab.nbytes[i],
                    hbm=hbm,
                )
                self.out.consumes[j] = base + fab.consumes[i]
            else:
                self.add(
                    ("send", c, "y", lo, hi, 0),
                    TRANSFER,
                    c,
                    deps,
                    stage="send",
                    dst=fab.dst[i],
                    nbytes=fab.nbytes[i],
                    hbm=hbm,
                )

    def half_rows(self, block: int, half: int) -> tuple[int, int]:
        b = self.cfg.tokens // self.p
        lo = block * b + half * (b // 2)
        return lo, lo + b // 2

    def ring_pass(
        self, buf: str, s: int, reduce: bool, prev: dict[tuple[int, int], list[int]]
    ) -> dict[tuple[int, int], list[int]]:
        """Step ``s`` of the peer-to-peer ring passes (both directions, half a block each).

        All-gather (``reduce`` False): position q sends half 0 of block ``q - s`` up and half
        1 of block ``q + s`` down; the receiver copies it in. Reduce-scatter: q sends its
        accumulated half 0 of block ``q - 1 - s`` up (half 1 of ``q + 1 + s`` down) and the
        receiver reduces it into its own partial. ``prev[(chip, half)]``: the ops whose
        result this chip forwards (copies / reductions of step s-1, or the GEMM ops).
        Returns the receivers' copy / reduce ops per (receiver, half), chunk by chunk.
        """
        p, chunk = self.p, self.topo.chips.chunk_bytes
        got: dict[tuple[int, int], list[int]] = {}
        for q, c in enumerate(self.order):
            for half, step in ((0, 1), (1, -1)):
                lag = 1 if reduce else 0
                block = self.order[(q - step * (lag + s)) % p]
                dst = self.order[(q + step) % p]
                r0, r1 = self.half_rows(self.pos[block], half)
                pieces = _pieces(r0 * self.h, r1 * self.h, self.bpe, chunk)
                src_ops = prev.get((c, half), [])
                fresh = s == 0  # the chip's own data: read from HBM; forwards stream on chip
                mine: list[int] = []
                for n_, (lo, hi) in enumerate(pieces):
                    nb = (hi - lo) * self.bpe
                    dep = src_ops if fresh or len(src_ops) != len(pieces) else [src_ops[n_]]
                    t = self.add(
                        ("send", c, buf, lo, hi, 0),
                        TRANSFER,
                        c,
                        list(dep),
                        stage="send",
                        dst=dst,
                        nbytes=nb,
                        hbm=nb if fresh else 0,
                    )
                    mine.append(t)
                got[(dst, half)] = mine
        return got

    def land(
        self,
        buf: str,
        sent: dict[tuple[int, int], list[int]],
        reduce: bool,
        gemm_of: dict[tuple[int, int], list[int]],
    ) -> dict[tuple[int, int], list[int]]:
        """The receivers' copies (all-gather) or reductions (reduce-scatter) of ``sent``."""
        out: dict[tuple[int, int], list[int]] = {}
        for (c, half), transfers in sent.items():
            ops = []
            for t in transfers:
                _, _, _, lo, hi, _ = self.out.actions[t]
                nb = (hi - lo) * self.bpe
                what = "reduce" if reduce else "copy"
                j = self.add(
                    (what, c, buf, lo, hi, t),
                    REDUCE if reduce else COPY,
                    c,
                    [t, *gemm_of.get((c, half), [])],
                    stage=what,
                    nbytes=nb,
                    hbm=2 * nb if reduce else nb,
                )
                self.out.consumes[j] = t
                ops.append(j)
            out[(c, half)] = ops
        return out

    # modes -------------------------------------------------------------------------------
    def build(self) -> _Built:
        cfg, t = self.cfg, self.cfg.tokens
        if cfg.mode == "ag_rs":
            self.build_ag_rs()
            return self.out
        groups = [(t * g // cfg.chunks, t * (g + 1) // cfg.chunks) for g in range(cfg.chunks)]
        for c in range(self.p):
            for stage, _ in self.shapes:
                self.gemm_rows(c, stage, groups, [[] for _ in groups])
        if cfg.mode == "serial":
            self.allreduce_rows(0, t)
        else:
            for r0, r1 in groups:
                self.allreduce_rows(r0, r1)
        return self.out

    def build_ag_rs(self) -> None:
        p, cfg = self.p, self.cfg
        if cfg.granularity == "tile":
            raise LayerError("tile granularity is built for serial and gemm_ar only")
        if cfg.layer == "mlp":
            landed: dict[tuple[int, int], list[int]] = {}
            arrived: dict[tuple[int, int, int], list[int]] = {}  # (chip, block, half) -> copies
            for s in range(p):
                if s and self.comm:
                    prev = {k: v for k, v in landed.items()} if s > 1 else {}
                    sent = self.ring_pass("x", s - 1, False, prev)
                    landed = self.land("x", sent, False, {})
                    for (c, half), ops in landed.items():
                        self.ag_ops.setdefault(c, []).extend(ops)
                        step = 1 if half == 0 else -1
                        block = self.order[(self.pos[c] - step * s) % p]
                        arrived[(c, block, half)] = ops
                for q, c in enumerate(self.order):
                    groups, deps = [], []
                    for half, step in ((0, 1), (1, -1)):
                        block = self.order[(q - step * s) % p]
                        groups.append(self.half_rows(self.pos[block], half))
                        deps.append(arrived.get((c, block, half), []))
                    self.gemm_rows(c, "gemm1", groups, deps)
        # gemm2 in p steps, its partials accumulated around both rings
        acc: dict[tuple[int, int], list[int]] = {}
        for s in range(p):
            mine: dict[tuple[int, int], list[int]] = {}
            for q, c in enumerate(self.order):
                groups = []
                for half, step in ((0, 1), (1, -1)):
                    block = self.order[(q - step * (1 + s)) % p]
                    groups.append(self.half_rows(self.pos[block], half))
                before = len(self.out.prog)
                self.gemm_rows(c, "gemm2", groups, [[], []])
                ids = list(range(before, len(self.out.prog)))
                for half in (0, 1):
                    # communication alone: the reduce-scatter follows the all-gather per chip
                    mine[(c, half)] = ids[half : half + 1] if self.gemm else self.ag_ops.get(c, [])
            if not self.comm:
                continue
            acc = self.land("y", sent, True, mine) if s else mine
            if s < p - 1:
                sent = self.ring_pass("y", s, True, acc)


@lru_cache(maxsize=64)
def _compiled(topo: Topology, nbytes: int) -> Compiled:
    """The ring allreduce of ``nbytes`` as a fabric program (equal groups share one)."""
    return fabric_program(build_schedule(topo, nbytes, ALGORITHM))


# --- run, metrics ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LayerRun:
    """A layer's joint run and the two runs alone (compute only, communication only)."""

    cfg: LayerConfig
    topo: Topology
    net: Network
    built: _Built
    log: OpLog
    compute_log: OpLog
    comm_log: OpLog

    @property
    def latency_ps(self) -> int:
        return self.log.makespan_ps


def run_layer(cfg: LayerConfig, topo: Topology) -> LayerRun:
    """Build and time the layer on ``topo.chips`` (its count is the TP degree)."""
    net = build_network(topo)
    if net.chips < 2:
        raise LayerError(f"a tensor-parallel layer needs at least 2 chips, got {net.chips}")
    built = _Builder(cfg, topo, net).build()
    log, _ = simulate_joint(topo, net, built.prog)
    comp = _Builder(cfg, topo, net, comm=False).build()
    comm = _Builder(cfg, topo, net, gemm=False).build()
    return LayerRun(
        cfg,
        topo,
        net,
        built,
        log,
        simulate_joint(topo, net, comp.prog)[0],
        simulate_joint(topo, net, comm.prog)[0],
    )


def _model(run: LayerRun) -> dict[str, float]:
    """Analytic times (ps): GEMMs from ``sim.model.gemm_model``, collectives alpha-beta."""
    cfg, topo, net = run.cfg, run.topo, run.net
    p = net.chips
    g = {st: gemm_model(sh, cfg.variant, topo).ideal_ps for st, sh in gemm_shapes(cfg, p)}
    n = cfg.tokens * cfg.hidden * topo.bpe
    hops = net.hops(run.net.ring_order()[0], run.net.ring_order()[1])
    a = hops * net.latency_ps
    pass_ps = (p - 1) * a + ps_for_bytes((p - 1) * n // (2 * p), net.link_bw)  # one ring pass
    ag = pass_ps if cfg.layer == "mlp" and cfg.mode == "ag_rs" else 0
    comm = 2 * pass_ps if cfg.mode != "ag_rs" else ag + pass_ps
    g1, g2 = g.get("gemm1", 0), g["gemm2"]
    compute = g1 + g2
    if cfg.mode == "serial":
        lat = compute + comm
    elif cfg.mode == "gemm_ar":
        k = cfg.chunks
        ar = 2 * ((p - 1) * a + ps_for_bytes((p - 1) * n // (2 * p * k), net.link_bw))
        lat = g1 + g2 // k + ar + (k - 1) * max(g2 // k, ar)
    else:
        step_ag = ag // max(1, p - 1)
        step_rs = pass_ps // (p - 1)
        lat1 = g1 // p + (p - 1) * max(g1 // p, step_ag) if g1 else 0
        lat = lat1 + g2 // p + (p - 1) * max(g2 // p, step_rs) + step_rs
    return {"compute": compute, "comm": comm, "latency": lat}


def layer_metrics(run: LayerRun) -> dict[str, float]:
    """Latency, the runs alone, exposed communication, overlap efficiency, bytes, model."""
    lat, comp, comm = run.latency_ps, run.compute_log.makespan_ps, run.comm_log.makespan_ps
    log, p = run.log, run.net.chips
    link = log.mask(stage="send") | log.mask(stage="forward")
    per_chip = np.bincount(
        log.chip[link].astype(np.int64), weights=log.nbytes[link].astype(np.float64), minlength=p
    )
    hbm = run.built.prog.hbm_bytes(p)
    small = min(comp, comm)
    hidden = comp + comm - lat
    mod = _model(run)
    return {
        "latency_ns": lat / 1000,
        "compute_ns": comp / 1000,
        "comm_ns": comm / 1000,
        "exposed_comm_ns": (lat - comp) / 1000,
        "overlap_eff": hidden / small if small else 0.0,
        "bound_ns": max(comp, comm) / 1000,
        "serial_sum_ns": (comp + comm) / 1000,
        "hbm_bytes_max": max(hbm),
        "link_bytes_max": int(per_chip.max()),
        "link_bytes_total": int(per_chip.sum()),
        "transfers": int(np.count_nonzero(log.mask(stage="send"))),
        "records": len(log),
        "model_latency_ns": mod["latency"] / 1000,
        "model_compute_ns": mod["compute"] / 1000,
        "model_comm_ns": mod["comm"] / 1000,
        "model_bound_ns": max(mod["compute"], mod["comm"]) / 1000,
        "sim_model_ratio": lat / mod["latency"] if mod["latency"] else 1.0,
    }


# --- functional check: replay the op log on integer data ------------------------------------------


def _op_times(run: LayerRun) -> tuple[dict[int, int], dict[int, int], str]:
    """Per op: when it starts reading and when its result is there, from the op log; and
    a problem when a transfer's recorded links do not lead from its sender to its receiver."""
    log, net, prog = run.log, run.net, run.built.prog
    start: dict[int, int] = {}
    end: dict[int, int] = {}
    path: dict[int, list[int]] = {}
    link_base = list(log.engines).index(net.names[0])
    lat = net.latency_ps
    for op, eng, s, e, st in zip(
        log.op.tolist(),
        log.engine.tolist(),
        log.start.tolist(),
        log.end.tolist(),
        log.stage.tolist(),
        strict=True,
    ):
        is_link = STAGES[st] in ("send", "forward")
        start[op] = min(start.get(op, s), s)
        end[op] = max(end.get(op, 0), e + (lat if is_link else 0))
        if is_link:
            path.setdefault(op, []).append(eng - link_base)
    for op, links in path.items():
        nodes = [net.links[links[0]][0]] + [net.links[lk][1] for lk in links]
        joined = all(net.links[a][1] == net.links[b][0] for a, b in itertools.pairwise(links))
        if not joined or nodes[0] != prog.chip[op] or nodes[-1] != prog.dst[op]:
            return (
                start,
                end,
                (
                    f"op {op}: transfer {prog.chip[op]}->{prog.dst[op]} crossed "
                    f"{[net.names[lk] for lk in links]}: the data skipped a link"
                ),
            )
    return start, end, ""


def _mm(a: I64, b: I64) -> I64:
    """Exact integer matrix product (einsum: numpy's integer matmul has no BLAS and is slow)."""
    out: I64 = np.einsum("ij,jk->ik", a, b)
    return out


def check_layer_data(run: LayerRun, seed: int = 0) -> tuple[int, str]:
    """Replay the joint op log on integer matrices; ``(wrong elements, first problem)``.

    Every chip starts with its shard (``serial``/``gemm_ar``: all of ``X``; ``ag_rs``: its own
    token block, the rest zero). A GEMM op reads its input rows when it starts and writes
    its output rows when it ends; a transfer copies what its sender holds when it starts;
    its reduction or copy applies that on the receiver when it ends (and must start after
    the data arrived). Every chip's ``Y`` (``ag_rs``: its token block) must equal the
    unsharded ``X @ W1 @ W2`` (``A @ Wo``) exactly.
    """
    cfg, p, prog = run.cfg, run.net.chips, run.built.prog
    if cfg.granularity != "coarse":
        raise LayerError("the data replay runs on coarse-granularity runs")
    rng = np.random.default_rng(seed)
    t, h = cfg.tokens, cfg.hidden
    x = rng.integers(-2, 3, size=(t, h), dtype=np.int64)
    if cfg.layer == "mlp":
        w1 = rng.integers(-2, 3, size=(h, 4 * h), dtype=np.int64)
        w2 = rng.integers(-2, 3, size=(4 * h, h), dtype=np.int64)
        want = _mm(_mm(x, w1), w2)
        cols = 4 * h // p
        weights = {
            c: (w1[:, c * cols : (c + 1) * cols], w2[c * cols : (c + 1) * cols]) for c in range(p)
        }
    else:
        wo = rng.integers(-2, 3, size=(h, h), dtype=np.int64)
        want = _mm(x, wo)
        cols = h // p
        weights = {c: (np.zeros((0, 0), np.int64), wo[c * cols : (c + 1) * cols]) for c in range(p)}
    order = list(run.net.ring_order())
    blk = t // p
    bufs: dict[tuple[int, str], I64] = {}
    for c in range(p):
        xc = x.copy()
        if cfg.mode == "ag_rs" and cfg.layer == "mlp":
            q = order.index(c)
            xc[:] = 0
            xc[q * blk : (q + 1) * blk] = x[q * blk : (q + 1) * blk]
        bufs[(c, "x")] = xc.reshape(-1)
        bufs[(c, "a")] = (
            x[:, c * cols : (c + 1) * cols].copy().reshape(-1)
            if cfg.layer == "attn"
            else x.reshape(-1)
        )
        bufs[(c, "h")] = np.zeros(t * (4 * h // p), np.int64)
        bufs[(c, "y")] = np.zeros(t * h, np.int64)
    start, end, problem = _op_times(run)
    if problem:
        return t * h * p, problem
    events = sorted(
        [(end[i], 0, i) for i in range(len(prog))] + [(start[i], 1, i) for i in range(len(prog))]
    )
    pending: dict[int, I64] = {}
    stash: dict[int, I64] = {}
    for _, phase, i in events:
        what, c, buf, lo, hi, extra = run.built.actions[i]
        if what == "gemm":
            w1c, w2c = weights[c]
            if phase == 1:
                if buf == "h":
                    pending[i] = bufs[(c, "x")].reshape(t, h)[lo:hi]
                    pending[i] = _mm(pending[i], w1c)
                else:
                    src = bufs[(c, "h" if cfg.layer == "mlp" else "a")].reshape(t, -1)
                    pending[i] = _mm(src[lo:hi], w2c)
            else:
                bufs[(c, buf)].reshape(t, -1)[lo:hi] = pending.pop(i)
        elif what == "send" and phase == 1:
            stash[i] = bufs[(c, buf)][lo:hi].copy()
        elif what in ("reduce", "copy") and phase == 0:
            if start[i] < end[extra]:
                return t * h * p, (
                    f"op {i} ({what} on chip {c}) starts at {start[i]} ps, before the data of "
                    f"transfer op {extra} arrived ({end[extra]} ps)"
                )
            data = stash.pop(extra)
            if what == "reduce":
                bufs[(c, buf)][lo:hi] += data
            else:
                bufs[(c, buf)][lo:hi] = data
    wrong, first = 0, ""
    for c in range(p):
        y = bufs[(c, "y")].reshape(t, h)
        if cfg.mode == "ag_rs":
            q = order.index(c)
            rows = slice(q * blk, (q + 1) * blk)
        else:
            rows = slice(0, t)
        bad = int(np.count_nonzero(y[rows] != want[rows]))
        if bad and not first:
            first = f"chip {c}: {bad} elements of Y rows {rows.start}..{rows.stop} differ"
        wrong += bad
    return wrong, first
