"""A layer's races from its dependency graph: every op depends on the ops that produced its data.

The data replay (:mod:`sim.tp.datacheck`) sees a race only when the run's timing makes it
show. This check is independent of timing (issue 26): from the joint program's data actions
(``_Built.actions``) it lists what every op reads and writes, per chip and buffer
(``x``, ``a``, ``h``, ``y``, in elements), and proves from the dependency graph that each
reduction, send, copy and GEMM block depends, transitively, on each op that last wrote the
elements it needs (:func:`sim.collectives.depcheck.first_race`), and that each reduction
or copy depends on the transfer whose data it lands. A failure names both ops.

Tile-granularity runs carry no data actions (their GEMM is the tile program); only their
collectives' accesses are checked there.
"""

from __future__ import annotations

from collections.abc import Hashable

from sim.collectives.depcheck import Access, first_race
from sim.tp.cosim import STAGES
from sim.tp.run import LayerRun

__all__ = ["check_layer_dependencies", "layer_accesses"]


def _widths(run: LayerRun) -> dict[str, int]:
    """Elements per token row of each buffer (the replay's shapes)."""
    cfg, p = run.cfg, run.net.chips
    h = cfg.hidden
    return {"x": h, "a": h // p if cfg.layer == "attn" else h, "h": 4 * h // p, "y": h}


def layer_accesses(run: LayerRun) -> tuple[list[Access], list[tuple[int, int, str]]]:
    """Every op's reads and writes, and the (transfer, landing op) pairs."""
    cfg, actions = run.cfg, run.built.actions
    width = _widths(run)
    src_of = {"h": "x", "y": "h" if cfg.layer == "mlp" else "a"}
    acc: list[Access] = []
    lands: list[tuple[int, int, str]] = []
    for i, (what, c, buf, lo, hi, extra) in enumerate(actions):
        if what == "gemm":  # token rows: reads its input rows, writes its output rows
            src = src_of[buf]
            acc.append(Access(i, (c, src), lo * width[src], hi * width[src], False))
            acc.append(Access(i, (c, buf), lo * width[buf], hi * width[buf], True))
        elif what == "send":
            acc.append(Access(i, (c, buf), lo, hi, False))
        elif what in ("reduce", "copy"):
            acc.append(Access(i, (c, buf), lo, hi, True))
            lands.append((extra, i, f"the data it {'reduces' if what == 'reduce' else 'copies'}"))
    return acc, lands


def check_layer_dependencies(run: LayerRun) -> str:
    """``""``, or the first op pair the layer's dependency graph leaves unordered."""
    prog, actions = run.built.prog, run.built.actions
    width = _widths(run)

    def describe(i: int) -> str:
        what, c, buf, lo, hi, _ = actions[i]
        stage = STAGES[prog.stage[i]]
        if what == "gemm":
            return f"{stage} op {i} on chip {c} (token rows {lo}..{hi} of {buf})"
        if what == "send":
            return f"send op {i} (chip {c} -> {prog.dst[i]}, {buf}[{lo}:{hi}])"
        if what in ("reduce", "copy"):
            return f"{what} op {i} on chip {c} ({buf}[{lo}:{hi}])"
        return f"{stage} op {i} on chip {c}"

    def where_name(where: Hashable, lo: int, hi: int) -> str:
        assert isinstance(where, tuple)
        c, buf = int(where[0]), str(where[1])
        w = width[buf]
        rows = f", token rows {lo // w}..{-(-hi // w)}" if w else ""
        return f"{buf}[{lo}:{hi}] on chip {c}{rows}"

    accesses, lands = layer_accesses(run)
    return first_race(prog.deps, accesses, describe, where_name, lands)
