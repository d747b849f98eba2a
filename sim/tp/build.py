"""Build a layer's joint program: each chip's GEMM shards and the collectives on one clock."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import lru_cache

from sim.collectives import Compiled, build_schedule, fabric_program
from sim.core import DMA as CORE_DMA
from sim.core import PIPE as CORE_PIPE
from sim.core import SERVE as CORE_SERVE
from sim.core import program_ops
from sim.fabric import COPY as FAB_COPY
from sim.fabric import REDUCTION as FAB_REDUCTION
from sim.fabric import Network, hbm_default
from sim.gemm.program import GemmProgram
from sim.gemm.shape import GemmShape
from sim.topology import Topology
from sim.tp.config import LayerConfig, LayerError, gemm_shapes
from sim.tp.cosim import BLOCK, COPY, DMA, PIPE, REDUCE, SERVE, STAGES, TRANSFER, JointProgram
from sim.tp.curve import gemm_curve

__all__ = ["ALGORITHM", "Action"]

#: the allreduce algorithm of serial and gemm_ar (two counter-rotating rings, as NCCL)
ALGORITHM = "ring"


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
