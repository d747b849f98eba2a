"""The code paths a bench config takes, read from the decisions the simulator makes for it
(issue 26, class 2: "path coverage from the code, not from a list").

Each ``*_paths(params)`` returns the set of paths one config of a bench reaches. A path is a
tuple ``(facet, value, *context)``: ``("mode", "panel")``, ``("chunked K", "prefetch")``,
``("torus", "rect", "allreduce", "ring")``. The values are never read from a config's name
or from a list of configs: the GEMM mode and chunk count come from the ``GemmProgram`` the
bench would run, the dataflow from the topology the config runs on, a collective's chunking
from its schedule's messages cut as ``sim.collectives.compile`` cuts them, the torus class
from the network's dimensions, a layer's bound from the analytic times ``sim.tp.metrics``
sets beside the run.

The universe of a bench (:func:`universe`) is every path any config of its sweep reaches,
regen-only ones included, plus the paths the code declares (``sim.systolic.DATAFLOWS``,
``sim.gemm.layout.MODES``, every collective x algorithm x interconnect, ``sim.tp`` modes);
the test (``test_path_coverage.py``) fails for every path of the universe that no gated
config reaches.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterable
from typing import Any

import benches._gemm_systolic as systolic
import benches.ccl as ccl
import benches.gemm as gemm
import benches.tp_layer as tp_layer
from sim.collectives import COLLECTIVE_ALGORITHMS
from sim.collectives.bounds_more import collective_bounds
from sim.collectives.catalog import build_schedule, collective_algorithms
from sim.collectives.compile import chunk_count
from sim.collectives.fast import ring_case
from sim.fabric import Network, build_network
from sim.gemm.layout import MODES as GEMM_MODES
from sim.gemm.layout import STREAMING
from sim.gemm.model import gemm_model
from sim.gemm.program import GemmProgram
from sim.gemm.shape import GemmShape, TilePlan
from sim.pe import PE_MODELS
from sim.systolic import DATAFLOWS
from sim.topology import Topology
from sim.tp.config import LAYERS
from sim.tp.config import MODES as TP_MODES
from sim.tp.metrics import _model as layer_model

Path = tuple[Any, ...]
Params = dict[str, Any]

#: a time past this many ps no longer fits 32 bits (the simulator keeps int64 ps; a value
#: narrowed anywhere on the way shows only past it)
U32_PS = 1 << 32


# GEMM -------------------------------------------------------------------------------------
@functools.cache
def _gemm_program(shape: tuple[int, int, int], variant: str, topo: Topology) -> GemmProgram:
    return GemmProgram(GemmShape(*shape), variant, topo)


#: the modes whose loads run ahead of the compute that reads them (``load_ref`` waits for
#: each tile-op's loads before the next): races between a load and a reader live here
OVERLAP_MODES = ("double_buffer", "prefetch", "whole", "panel")


def gemm_paths(params: Params) -> set[Path]:
    """The PE model and dataflow, the program's mode, a K cut into chunks (per mode), the
    fast path's whole-row jump, tile padding, whether the bench replays the data and, per
    overlap mode, a replayed run that is compute-bound (the analytic model's limiting
    recurrence is the PE: the loads run ahead and a load that overwrites a buffer still
    being read, or a read that waits on the wrong buffer's load, shows in the data)."""
    topo = systolic.topology_for(params, gemm.TOPOLOGY)
    shape = tuple(params["shape"])
    prog = _gemm_program(shape, params["variant"], topo)  # type: ignore[arg-type]
    pe = topo.pe
    paths: set[Path] = {
        ("pe", pe.model, pe.dataflow if pe.model == "systolic" else ""),
        ("mode", prog.mode),
        ("data replay", prog.plan.tile_ops <= gemm.FUNCTIONAL_MAX_TILE_OPS),
    }
    replayed = prog.plan.tile_ops <= gemm.FUNCTIONAL_MAX_TILE_OPS
    if replayed and prog.mode in OVERLAP_MODES:
        limiter = gemm_model(GemmShape(*shape), params["variant"], topo, program=prog).limiter
        if limiter == "pe":
            paths.add(("compute-bound, data replayed", prog.mode))
    if prog.chunks > 1:
        paths.add(("chunked K", prog.mode))
        if prog.Kt % prog.chunk:
            paths.add(("chunked K, short last chunk", prog.mode in STREAMING))
    if prog.outer_blocks:
        paths.add(("fast path jumps", "rows" if prog.mode == "panel" else "tiles"))
    plan, (m, k, n) = TilePlan.of(GemmShape(*shape), topo), shape
    if plan.under_tile:
        paths.add(("tiles", "under one tile"))
    if (m % plan.m, k % plan.k, n % plan.n) != (0, 0, 0):
        paths.add(("tiles", "padded"))
    return paths


def gemm_declared() -> set[Path]:
    """What the code says a GEMM can do: every mode, every PE model and systolic dataflow,
    a compute-bound replayed run of every overlap mode."""
    pes = {("pe", m, "") for m in PE_MODELS if m != "systolic"}
    pes |= {("pe", "systolic", df) for df in DATAFLOWS}
    races = {("compute-bound, data replayed", m) for m in OVERLAP_MODES}
    return pes | {("mode", m) for m in GEMM_MODES} | races


# ccl --------------------------------------------------------------------------------------
@functools.cache
def _ccl_machine(topology: str, chips: int) -> tuple[Topology, Network]:
    topo = ccl.topology_for({"topology": topology, "chips": chips})
    return topo, build_network(topo)


def chip_class(p: int) -> str:
    """What the algorithms branch on: two chips (both ring neighbours are one chip, no
    symmetric fast path), a power of two (no halving-doubling fold), else even or odd (the
    double binary tree mirrors or shifts its second tree)."""
    if p == 2:
        return "2"
    if p & (p - 1) == 0:
        return "pow2"
    return "even" if p % 2 == 0 else "odd"


def torus_class(net: Network) -> str:
    """A torus by its dimensions: ``square`` or ``rect``, and ``-2`` when a dimension has
    two chips (its ring has no wrap link: both neighbours are one chip)."""
    rows, cols = net.dims
    shape = "square" if rows == cols else "rect"
    return shape + ("-2" if min(rows, cols) <= 2 else "")


@functools.cache
def _u32_from(topology: str, chips: int, collective: str) -> int:
    """The least size of the sweep whose lower bound (``sim.collective_bounds``: what no
    schedule of the collective beats, whatever the algorithm) reaches 2^32 ps. The bound
    grows with the size, so the sizes are tried from the largest down."""
    topo = _ccl_machine(topology, chips)[0]
    least = 1 << 62
    for size in sorted(ccl.SIZES, reverse=True):
        if collective_bounds(topo, size, collective).time_ps < U32_PS:
            break
        least = size
    return least


_SIZES: dict[tuple[Any, ...], tuple[tuple[int, int, int], frozenset[int]]] = {}


def _message_sizes(
    topology: str, chips: int, size: int, algorithm: str, collective: str
) -> tuple[tuple[int, int, int], frozenset[int]]:
    """(bytes per element, chunk bytes, staging depth) and the element counts of the
    schedule's messages. The counts do not depend on which chip sends to which, only on the
    chip count and, on a torus, its dimensions: ring, fully connected and switch share them
    (a ring order permutes the chips, not the ranges)."""
    topo, net = _ccl_machine(topology, chips)
    key = (collective, algorithm, chips, size, net.dims)
    if key not in _SIZES:
        schedule = build_schedule(topo, size, algorithm, collective, network=net)
        cut = (schedule.bytes_per_element, schedule.chunk_bytes, schedule.depth)
        _SIZES[key] = cut, frozenset(m.hi - m.lo for step in schedule.steps for m in step)
    return _SIZES[key]


def torus_order(net: Network) -> str:
    """Which cycle ``Network.ring_order`` builds (``sim.fabric.network.torus_cycle``'s
    branches): a snake down the rows (rows even), the snake transposed (rows odd, columns
    even), or the snake with the last row spliced in through its wrap link (both odd)."""
    rows, cols = net.dims
    if rows == 1 or cols == 1:
        return "one ring"
    if rows % 2 == 0:
        return "snake"
    return "transposed snake" if cols % 2 == 0 else "snake + wrap detour"


def ccl_paths(params: Params) -> set[Path]:
    """Collective x algorithm x interconnect, its chip-count class, the torus's shape, the
    symmetric ring fast path, how the schedule's messages are chunked, and the size regime."""
    collective = params.get("collective", "allreduce")
    algorithm, topology, size = params["algorithm"], params["topology"], params["size"]
    topo, net = _ccl_machine(topology, params["chips"])
    what = (collective, algorithm, topology)
    paths: set[Path] = {("algorithm", *what), ("chips", chip_class(net.chips), *what)}
    if net.kind == "torus2d":
        paths.add(("torus", torus_class(net), collective, algorithm))
        paths.add(("torus ring order", torus_order(net)))
    fast = ring_case(topo, size, algorithm, collective, None) is not None
    paths.add(("ring fast path", fast))
    bpe, chunk, depth = _message_sizes(topology, params["chips"], size, algorithm, collective)[0]
    sizes = _message_sizes(topology, params["chips"], size, algorithm, collective)[1]
    counts = [(n, chunk_count(n, bpe, chunk, depth)) for n in sizes]
    k = max((c for _n, c in counts), default=1)
    # chunks per message: set by the staging depth, or by chips.chunk_kib (many chunks)
    regime = "one chunk" if k == 1 else ("staging depth" if k <= depth else "many chunks")
    uneven = any(n % c for n, c in counts)  # chunks one element apart
    paths.add(("chunking", regime, "uneven" if uneven else "even"))
    largest = max((n * bpe for n, _c in counts), default=0)
    bdp = topo.chips.link_bw_gbs * topo.chips.link_latency_ns  # bytes in flight on a link
    paths.add(("size", "bandwidth-bound" if largest > bdp else "latency-bound", collective))
    if size >= _u32_from(topology, params["chips"], collective):
        paths.add(("time", "past 2^32 ps"))
    return paths


def ccl_declared() -> set[Path]:
    """Every collective x algorithm x interconnect the code accepts."""
    return {
        ("algorithm", c, a, t)
        for c in COLLECTIVE_ALGORITHMS
        for t in ccl.TOPOLOGIES
        for a in collective_algorithms(c, t)
    }


# tp_layer ---------------------------------------------------------------------------------
@functools.cache
def _tp_machine(topology: str, tp: int) -> tuple[Topology, Network]:
    topo = tp_layer.topology_for({"topology": topology, "tp": tp})
    return topo, build_network(topo)


def tp_paths(params: Params) -> set[Path]:
    """Layer x mode x interconnect, the TP degree's class, and whether the layer's GEMMs or
    its collectives take longer (``sim.tp.metrics``' analytic times), per layer and mode."""
    topo, net = _tp_machine(params["topology"], params["tp"])
    cfg = tp_layer.layer_config(params)
    times = layer_model(types.SimpleNamespace(cfg=cfg, topo=topo, net=net))  # type: ignore[arg-type]
    bound = "compute-bound" if times["compute"] >= times["comm"] else "link-bound"
    what = (params["layer"], params["mode"])
    return {
        ("layer", *what, params["topology"]),
        ("tp", chip_class(net.chips), *what, params["topology"]),
        ("bound", bound, *what),
        ("data replay", tp_layer._macs(params) <= tp_layer.FUNCTIONAL_MAX_MACS, *what),
    }


def tp_declared() -> set[Path]:
    return {("layer", la, m, t) for la in LAYERS for m in TP_MODES for t in tp_layer.TOPOLOGIES}


# ------------------------------------------------------------------------------------------
BENCHES: dict[str, tuple[Any, Callable[[Params], set[Path]], Callable[[], set[Path]]]] = {
    "gemm": (gemm.BENCH, gemm_paths, gemm_declared),
    "ccl": (ccl.BENCH, ccl_paths, ccl_declared),
    "tp_layer": (tp_layer.BENCH, tp_paths, tp_declared),
}


@functools.cache
def _paths_of(bench: str, config_id: str) -> frozenset[Path]:
    b, paths_of, _declared = BENCHES[bench]
    return frozenset(paths_of(dict(b.config(config_id).params)))


def reached(bench: str, configs: Iterable[Any]) -> dict[Path, list[str]]:
    """Every path the configs reach, with the ids of the configs that reach it."""
    out: dict[Path, list[str]] = {}
    for config in configs:
        for path in _paths_of(bench, config.config_id):
            out.setdefault(path, []).append(config.config_id)
    return out


def universe(bench: str) -> set[Path]:
    """Every path of the bench: those its whole sweep reaches and those its code declares."""
    b, _paths_of, declared = BENCHES[bench]
    return set(reached(bench, b.configs)) | declared()


def missing(bench: str, gated: Iterable[str] | None = None) -> dict[Path, list[str]]:
    """Paths of the universe no gated config reaches, each with the regen-only configs that
    do reach it (none: only the code declares it). ``gated``: these config ids instead of
    the bench's gated ones."""
    b, _paths_of, _declared = BENCHES[bench]
    ids = {c.config_id for c in b.configs if not c.regen_only} if gated is None else set(gated)
    reach = reached(bench, [c for c in b.configs if c.config_id in ids])
    rest = reached(bench, [c for c in b.configs if c.config_id not in ids])
    return {p: rest.get(p, []) for p in sorted(universe(bench) - set(reach), key=repr)}


def clear_caches() -> None:
    """Forget every derived path (a test that changes the simulator derives them again)."""
    for cached in (_paths_of, _gemm_program, _ccl_machine, _tp_machine, _u32_from):
        cached.cache_clear()
    _SIZES.clear()
