"""Every code path a bench can take has a gated config (issue 26, class 2).

The paths come from the code, not from a list: ``bench_paths`` derives each config's paths
from what the simulator decides for it (the GEMM program's mode and chunks, the dataflow of
the topology it runs on, a collective's schedule cut into chunks, its network's torus
shape, a layer's analytic times) and adds the paths the code declares (every dataflow, GEMM
mode, collective x algorithm x interconnect, layer mode). A path that only regen-only
configs reach (or none) fails here, naming it and the configs that reach it.
"""

from __future__ import annotations

import pytest
from bench_paths import BENCHES, clear_caches, gemm_paths, missing, universe

import benches.gemm as gemm
import sim.gemm.layout as layout
from sim.gemm.layout import MODES
from sim.systolic import DATAFLOWS


def _explain(bench: str, gaps: dict[tuple[object, ...], list[str]]) -> str:
    lines = [f"{bench}: {len(gaps)} paths have no gated config:"]
    for path, ids in gaps.items():
        where = f"regen-only: {', '.join(ids[:3])}" + (" ..." if len(ids) > 3 else "")
        lines.append(f"  {path}  ({where if ids else 'no config of the sweep reaches it'})")
    lines.append("gate the cheapest config of each (benches/_<bench>_paths.py)")
    return "\n".join(lines)


#: what each universe must hold (so the test cannot pass by deriving nothing): what the
#: code declares and what regen-only configs reached on main
EXPECTED: dict[str, set[tuple[object, ...]]] = {
    "gemm": {("pe", "systolic", df) for df in DATAFLOWS}
    | {("mode", m) for m in MODES}
    | {("chunked K", m) for m in ("load_ref", "double_buffer", "prefetch", "panel")}
    | {("data replay", False), ("fast path jumps", "rows")},
    "ccl": {
        ("torus", "rect", "allreduce", "torus2d"),
        ("torus ring order", "transposed snake"),
        ("chunking", "many chunks", "uneven"),
        ("time", "past 2^32 ps"),
        *(("chips", k, "allreduce", "halving_doubling", "ring") for k in ("pow2", "even", "odd")),
    },
    "tp_layer": {
        ("tp", "2", "mlp", "ag_rs", "switch"),
        ("bound", "compute-bound", "mlp", "ag_rs"),
        ("bound", "link-bound", "attn", "gemm_ar"),
    },
}


@pytest.mark.parametrize("bench", list(BENCHES))
def test_every_path_has_a_gated_config(bench: str) -> None:
    """The universe holds what it must (not vacuous), and every path of it is gated."""
    assert EXPECTED[bench] <= universe(bench), sorted(EXPECTED[bench] - universe(bench), key=repr)
    gaps = missing(bench)
    assert not gaps, _explain(bench, gaps)


def test_without_the_path_configs_the_gaps_come_back() -> None:
    """The configs added for issue 26 close the gaps found on main: gated without them, the
    test above fails and names the systolic ws/is, the streaming chunked-K paths and the
    compute-bound replays of double_buffer and panel (reached by no config at all)."""
    added = {c.config_id for c in gemm.BENCH.configs if "dataflow" in c.params}
    added |= {c.config_id for c in gemm.BENCH.configs if tuple(c.params["shape"]) == (32, 2112, 32)}
    gated = {c.config_id for c in gemm.BENCH.configs if not c.regen_only} - added
    gaps = missing("gemm", gated)
    assert ("pe", "systolic", "ws") in gaps and ("pe", "systolic", "is") in gaps
    # what this test found missing next: no replayed compute-bound run of double_buffer
    # (every tile-PE one is DMA-bound) or of resident's panels (HBM-bound) anywhere in the
    # sweep; only the configs added for it reach them
    for mode in ("double_buffer", "panel"):
        reach = gaps[("compute-bound, data replayed", mode)]
        assert reach and set(reach) <= added, (mode, reach)
    assert gaps.get(("chunked K", "prefetch"))  # regen-only


def test_a_path_follows_the_simulator_not_the_config_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut K into chunks of 8 tile-ops instead of 32 (``CHUNK_MIN``): 128x1024x128 (16
    tile-ops per output tile, one chunk before) is derived as chunked K, short last chunk
    not; nothing about the config changed but the program it builds."""
    params = {"shape": (128, 1024, 128), "variant": "load_ref", "pe": "tile"}
    clear_caches()
    assert ("chunked K", "load_ref") not in gemm_paths(params)
    monkeypatch.setattr(layout, "CHUNK_MIN", 8)
    clear_caches()
    try:
        paths = gemm_paths(params)
    finally:
        clear_caches()
    assert ("chunked K", "load_ref") in paths
    assert ("chunked K, short last chunk", True) not in paths  # 16 = 2 x 8
