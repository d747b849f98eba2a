"""Replay a layer's joint op log on integer data: every chip ends with the right ``Y``."""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt

from sim.tp.config import LayerError
from sim.tp.cosim import STAGES
from sim.tp.run import LayerRun

__all__ = ["check_layer_data"]

I64 = npt.NDArray[np.int64]


def _op_times(run: LayerRun) -> tuple[dict[int, int], dict[int, int], str]:
    """Per op: when it starts reading and when its result is there, from the op log; and
    a problem when a transfer's recorded links do not lead from its sender to its receiver."""
    log, net, prog = run.log, run.net, run.built.prog
    start: dict[int, int] = {}
    end: dict[int, int] = {}
    path: dict[int, list[int]] = {}
    link_base = list(log.engines).index(net.names[0])
    lats = net.link_latencies_ps
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
        end[op] = max(end.get(op, 0), e + (lats[eng - link_base] if is_link else 0))
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


#: float32 / float64 hold every integer below 2**24 / 2**53 exactly
_EXACT_FLOAT32, _EXACT_FLOAT = 1 << 24, 1 << 53


def _mm(a: I64, b: I64) -> I64:
    """Exact integer matrix product, through BLAS in float32 or float64 when every partial sum
    is an integer that type holds exactly (numpy's integer matmul has no BLAS and is slow)."""
    bound = int(np.abs(a).max(initial=0)) * int(np.abs(b).max(initial=0)) * a.shape[1]
    for limit, ftype in ((_EXACT_FLOAT32, np.float32), (_EXACT_FLOAT, np.float64)):
        if bound < limit:
            product: I64 = (a.astype(ftype) @ b.astype(ftype)).astype(np.int64)
            return product
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
