"""What the benches share (not a bench: the name starts with ``_``): the topology they measure
on, their trace writer, the head of their ``meta()``, and figure grids whose keys cannot
collide."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pytest_npubench import ConfigResult
from sim import OpLog, Topology, write_trace
from sim.topology import topology_from_env

Params = dict[str, Any]
Key = TypeVar("Key", bound=Hashable)


def bench_topology() -> Topology:
    """The topology the benches measure on: ``$NPUBENCH_TOPOLOGY``, else npu-1h."""
    return topology_from_env()  # a bad value: one TopologyError naming the variable and file


def trace_writer(
    bench: str, config_id: Callable[[Params], str], op_log: Callable[[Params], OpLog]
) -> Callable[[Params, Path, int], Path]:
    """A bench's ``trace=``: write ``op_log(params)`` as trace-event JSON to ``path`` (merged
    above ``limit`` events), titled ``bench[config id]``."""

    def trace(params: Params, path: Path, limit: int) -> Path:
        title = f"{bench}[{config_id(params)}]"
        return write_trace(op_log(params), path, limit=limit, title=title)

    return trace


def topology_meta(topo: Topology, **extra: Any) -> dict[str, Any]:
    """A bench's ``meta()``: the topology's name and fingerprint, then the bench's own keys."""
    return {"topology": topo.name, "topology_fingerprint": topo.fingerprint, **extra}


def chips_meta(topo: Topology, **extra: Any) -> dict[str, Any]:
    """A multi-chip bench's ``meta()``: :func:`topology_meta` and the chip-to-chip links."""
    links = {"link_bw_gbs": topo.chips.link_bw_gbs, "link_latency_ns": topo.chips.link_latency_ns}
    return topology_meta(topo, **links, **extra)


def grid_by(
    results: Mapping[str, ConfigResult],
    key: Callable[[ConfigResult], Key],
    keep: Callable[[ConfigResult], bool] = lambda r: True,
) -> dict[Key, ConfigResult]:
    """The results a figure draws (``keep``), by the cell each is drawn in (``key``), in the
    order given. Two configs in one cell is an error naming both: a key that leaves out an
    axis telling configs apart would otherwise drop one of them silently."""
    grid: dict[Key, ConfigResult] = {}
    for result in results.values():
        if not keep(result):
            continue
        cell = key(result)
        if cell in grid:
            raise ValueError(
                f"bench {result.bench!r}: configs {grid[cell].config_id!r} and "
                f"{result.config_id!r} fall in one figure cell {cell!r}; the grid key must "
                "include every parameter that tells them apart"
            )
        grid[cell] = result
    return grid
