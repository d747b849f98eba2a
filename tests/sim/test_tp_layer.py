"""Tensor-parallel layers on the joint engine: exact data, bounds, sums, granularity, repeats."""

from __future__ import annotations

import pytest

import sim.tp.build as tp
import sim.tp.curve as curve
from sim import load_topology
from sim.fabric import build_network
from sim.gemm.run import run_gemm
from sim.gemm.shape import GemmShape
from sim.topology import Topology
from sim.tp.config import LAYERS, MODES, LayerConfig, LayerError
from sim.tp.cosim import BLOCK, COPY, TRANSFER, JointError, JointProgram, simulate_joint
from sim.tp.curve import gemm_curve
from sim.tp.datacheck import check_layer_data
from sim.tp.metrics import layer_metrics
from sim.tp.run import run_layer

BASE = load_topology("npu-1h")
TOPOLOGIES = ("ring", "switch", "fully_connected")


def topo_of(p: int, kind: str = "ring", **chips: object) -> Topology:
    return BASE.replace_chips(count=p, topology=kind, torus_dims=(1, p), **chips)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layer", LAYERS)
def test_every_chip_ends_with_the_unsharded_product(layer: str, mode: str) -> None:
    """Replaying the joint op log on integer matrices gives X @ W1 @ W2 (A @ Wo) exactly on
    every chip (ag_rs: each chip's token block), on every topology and TP degree 2, 4, 8."""
    for kind in TOPOLOGIES:
        for p in (2, 4, 8):
            run = run_layer(LayerConfig(layer, 64, 128, mode, chunks=2), topo_of(p, kind))
            wrong, why = check_layer_data(run, seed=p)
            assert wrong == 0, f"{kind} p={p}: {why}"


def test_a_collective_that_does_not_wait_for_its_gemm_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planted bug: the allreduce no longer waits for the GEMM that writes its rows. The
    replay then reads rows before they exist, and the check says which chip is wrong."""
    real = tp._Builder.rows_ready

    def forgetful(self: tp._Builder, chip: int, stage: str, r0: int, r1: int) -> list[int]:
        return [] if stage == "gemm2" else real(self, chip, stage, r0, r1)

    monkeypatch.setattr(tp._Builder, "rows_ready", forgetful)
    run = run_layer(LayerConfig("attn", 64, 128, "gemm_ar", chunks=2), topo_of(4))
    wrong, why = check_layer_data(run)
    assert wrong > 0 and "chip" in why


def _grid() -> list[tuple[Topology, LayerConfig]]:
    out = []
    for kind in TOPOLOGIES:
        for p in (2, 4, 8):
            for layer in LAYERS:
                for t, h in ((128, 256), (512, 1024))[: 2 if kind == "ring" else 1]:
                    for mode in MODES:
                        out.append((topo_of(p, kind), LayerConfig(layer, t, h, mode)))
    return out


@pytest.fixture(scope="module")
def grid_metrics() -> dict[tuple[str, int, str, int, int, str], dict[str, float]]:
    return {
        (topo.chips.topology, topo.chips.count, cfg.layer, cfg.tokens, cfg.hidden, cfg.mode): (
            layer_metrics(run_layer(cfg, topo))
        )
        for topo, cfg in _grid()
    }


def test_no_mode_beats_the_bound(grid_metrics: dict[tuple, dict[str, float]]) -> None:  # type: ignore[type-arg]
    """Every mode's latency >= max(compute alone, communication alone)."""
    for key, m in grid_metrics.items():
        assert m["latency_ns"] >= m["bound_ns"], key


def test_serial_is_compute_plus_communication(grid_metrics: dict[tuple, dict[str, float]]) -> None:  # type: ignore[type-arg]
    """Serial runs the allreduce after the GEMMs: its latency is the two alone, within 1 %."""
    for key, m in grid_metrics.items():
        if key[-1] == "serial":
            assert abs(m["latency_ns"] - m["serial_sum_ns"]) <= 0.01 * m["latency_ns"], key


def test_overlap_is_never_slower_than_serial(grid_metrics: dict[tuple, dict[str, float]]) -> None:  # type: ignore[type-arg]
    """gemm_ar and ag_rs are never more than 1 % slower than serial on the same layer."""
    for key, m in grid_metrics.items():
        if key[-1] != "serial":
            serial = grid_metrics[(*key[:-1], "serial")]
            assert m["latency_ns"] <= 1.01 * serial["latency_ns"], (key, m, serial)


def test_overlap_hides_communication_where_it_is_comparable() -> None:
    """With links 16x slower (a what-if where communication matches compute), both overlap
    modes hide most of the smaller part, and serial hides nothing."""
    topo = topo_of(4, link_bw_gbs=3.125)
    eff = {}
    for mode in MODES:
        m = layer_metrics(run_layer(LayerConfig("attn", 2048, 1024, mode, chunks=8), topo))
        eff[mode] = m["overlap_eff"]
    assert abs(eff["serial"]) < 0.01
    assert eff["gemm_ar"] > 0.5 and eff["ag_rs"] > 0.5, eff


@pytest.mark.parametrize("variant", ["resident", "prefetch", "double_buffer"])
def test_the_tile_level_gemm_alone_is_the_gemm_simulator(variant: str) -> None:
    """Tile-level GEMM ops in the joint engine, run alone, take exactly run_gemm's time."""
    topo = topo_of(2)
    for t, h in ((128, 256), (96, 640)):
        cfg = LayerConfig("attn", t, h, "serial", chunks=1, variant=variant, granularity="tile")
        run = run_layer(cfg, topo)
        assert run.compute_log.makespan_ps == run_gemm((t, h // 2, h), variant, topo).latency_ps


@pytest.mark.parametrize("variant", ["resident", "prefetch"])
def test_coarse_groups_agree_with_the_tile_level_joint_run(variant: str) -> None:
    """Coarse GEMM groups (time and HBM bytes from the GEMM run alone) give the latency of the
    tile-level joint run within 3 % (serial: within 0.1 %), with the collectives contending."""
    for p in (2, 4):
        for layer in LAYERS:
            for t, h in ((128, 256), (256, 512))[: 2 if variant == "resident" else 1]:
                for mode in ("serial", "gemm_ar"):
                    lat = {
                        g: run_layer(
                            LayerConfig(layer, t, h, mode, variant=variant, granularity=g),
                            topo_of(p),
                        ).latency_ps
                        for g in ("coarse", "tile")
                    }
                    tol = 0.001 if mode == "serial" else 0.03
                    assert abs(lat["coarse"] / lat["tile"] - 1) <= tol, (p, layer, t, h, mode, lat)


@pytest.mark.parametrize(
    ("shape", "variant"),
    [
        (GemmShape(512, 512, 512), "prefetch"),
        (GemmShape(512, 4096, 128), "resident"),  # panel staging, A panels prefetched ahead
        (GemmShape(1024, 2048, 1024), "resident"),
    ],
)
def test_a_probed_curve_matches_the_whole_run(
    monkeypatch: pytest.MonkeyPatch, shape: GemmShape, variant: str
) -> None:
    """A long shard is probed (4 tile rows simulated, the steady row repeated): its total
    time and bytes match the whole simulation within 1 % (streaming and panel staging)."""
    topo = topo_of(2)
    whole = gemm_curve(shape, variant, topo)
    monkeypatch.setattr(curve, "FULL_TILE_OPS", 10)
    gemm_curve.cache_clear()
    probed = gemm_curve(shape, variant, topo)
    gemm_curve.cache_clear()
    assert probed.probed and not whole.probed
    assert abs(probed.done[-1] / whole.done[-1] - 1) < 0.01
    assert abs(probed.hbm_bytes / whole.hbm_bytes - 1) < 0.01


def test_runs_are_deterministic() -> None:
    """The same config twice gives identical op logs."""
    cfg, topo = LayerConfig("mlp", 128, 256, "ag_rs"), topo_of(4, "switch")
    a, b = run_layer(cfg, topo), run_layer(cfg, topo)
    assert a.log.equals(b.log), a.log.first_difference(b.log)


def test_bad_configs_say_what_to_change() -> None:
    """Unknown modes, shapes the TP degree does not divide, a single chip: one clear error."""
    with pytest.raises(LayerError, match="unknown mode 'fused'"):
        LayerConfig("mlp", 128, 256, "fused")
    with pytest.raises(LayerError, match="divisible by 16"):
        run_layer(LayerConfig("mlp", 120, 256, "ag_rs"), topo_of(8))
    with pytest.raises(LayerError, match="at least 2 chips"):
        run_layer(LayerConfig("mlp", 128, 256, "serial"), topo_of(1))


# --- the joint engine itself ----------------------------------------------------------------------


def test_a_link_pipelines_latency_and_serialises_bytes() -> None:
    """Two transfers on one link: the first arrives at a + n b, the second at a + 2 n b."""
    topo = topo_of(2)
    net = build_network(topo)
    prog = JointProgram()
    n = 1 << 20
    for _ in range(2):
        prog.add(TRANSFER, 0, stage="send", dst=1, nbytes=n)
    _, ends = simulate_joint(topo, net, prog)
    a, nb = net.latency_ps, net.link_ps(n)
    assert ends == [a + nb, a + 2 * nb]


def test_collective_traffic_slows_a_gemm_through_hbm() -> None:
    """A GEMM block that needs all of HBM's bandwidth ends later when a copy on the same
    chip takes the channels first; on another chip it does not."""
    topo = topo_of(2)
    net = build_network(topo)
    n = 1 << 20
    hbm_ps = net.hbm_ps(n)

    def block_end(copy_chip: int | None) -> int:
        prog = JointProgram()
        if copy_chip is not None:
            prog.add(COPY, copy_chip, stage="copy", nbytes=n, hbm=n)
        i = prog.add(BLOCK, 0, stage="gemm2", res=topo.dma.engines + 1, dur=hbm_ps, hbm=n)
        return simulate_joint(topo, net, prog)[1][i]

    assert block_end(None) == hbm_ps
    assert block_end(1) == hbm_ps
    assert block_end(0) == 2 * hbm_ps


def test_a_dependency_on_a_later_op_is_refused() -> None:
    topo = topo_of(2)
    prog = JointProgram()
    prog.add(COPY, 0, (1,), stage="copy", nbytes=4, hbm=4)
    prog.add(COPY, 0, stage="copy", nbytes=4, hbm=4)
    with pytest.raises(JointError, match="must be earlier ops"):
        simulate_joint(topo, build_network(topo), prog)
