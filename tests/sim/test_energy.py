"""Energy from the exact counters (docs/adr/0027): a one-tile GEMM and a 2-chip allreduce
computed by hand from npu-1h.yaml's constants and counts derived by hand equal what the code
reports, in integer femtojoules; the fast paths' counts equal the full program's."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
import yaml

import sim.collectives.run as run_module
from sim import GemmShape, collective_metrics, gemm_metrics, load_topology, run_gemm
from sim.collectives import allreduce, run_collective
from sim.collectives.fast import SymmetricRun
from sim.energy import (
    AccessCounts,
    collective_counts,
    energy_metrics,
    energy_of,
    gemm_counts,
)
from sim.energy.counts import link_dimensions
from sim.topology import TOPOLOGY_DIR

YAML = yaml.safe_load((TOPOLOGY_DIR / "npu-1h.yaml").read_text())["energy"]
KIB = 1024


def fj(pj: Any) -> Fraction:
    """A YAML pJ value as exact femtojoules."""
    return Fraction(str(pj)) * 1000


def test_one_tile_gemm_by_hand() -> None:
    """C[32,32] = A[32,64] @ B[64,32] is one tile-op of npu-1h's 32x64x32 PE (bf16, 2 B).
    Counts: 32*64*32 = 65536 MACs; HBM reads A + B = 4096 + 4096 B; HBM write C = 2048 B; the
    fetch moves A + B = 8192 B; SRAM reads = fetch + C read by the DMA out = 10240 B; SRAM
    writes = A + B landed + C written once = 10240 B. Time, by hand from npu-1h.yaml: DMA in
    setup 32 ns + A's and B's 16 bursts each on the same 16 channels, 2 x 16 ns + 120 ns
    latency = 184; fetch 8192 B / 512 GB/s = 16; PE issue-to-retire 3 x 16 = 48; DMA out 32 +
    8 bursts in parallel 16 + 120 = 168: 416 ns. Static 2 W x 416 ns."""
    topo = load_topology("npu-1h")
    run = run_gemm(GemmShape(32, 64, 32), "load_ref", topo)
    got = energy_of(gemm_counts(run, gemm_metrics(run)), topo.energy)  # type: ignore[arg-type]
    assert run.log.makespan_ps == 416_000
    hand = {
        "mac": 65536 * fj(YAML["mac_pj"]["bf16"]),
        "hbm_read": 8192 * fj(YAML["hbm_read_pj_per_byte"]),
        "hbm_write": 2048 * fj(YAML["hbm_write_pj_per_byte"]),
        "sram_read": 10240 * fj(YAML["sram_read_pj_per_byte"]),
        "sram_write": 10240 * fj(YAML["sram_write_pj_per_byte"]),
        "fetch": 8192 * fj(YAML["fetch_pj_per_byte"]),
        "link": 0,
        "reduce": 0,
        "static": Fraction(str(YAML["static_w"])) * 1000 * 416_000,  # mW x ps = fJ
    }
    assert dict(got.fj) == hand
    assert (
        got.total_fj == 1_198_759_936
    )  # 32.768 + 255.5904 + 63.8976 + 6.4 + 6.4 + 1.703936 + 832 nJ
    m = energy_metrics(got)
    assert m["energy_uj"] == 1_198_759_936 / 1e9
    assert m["power_w"] == pytest.approx(1_198_759_936 / 416_000 / 1000)


def test_two_chip_allreduce_by_hand() -> None:
    """A ring allreduce of 1 MiB on 2 chips: two counter-rotating rings of 512 KiB each, each
    a reduce-scatter step and an all-gather step of 256 KiB per chip. Per ring and chip: the
    reduce-scatter send reads 256 KiB from HBM, the receiver reduces 256 KiB (reads its own
    256 KiB, writes the 256 KiB sum), the all-gather send streams the sum just reduced (no
    HBM read) and the receiver writes 256 KiB. Over 2 chips x 2 rings: link 2 x 2 x 2 x
    256 KiB = 2 MiB (one hop each), reduced 1 MiB, HBM reads 1 + 1 MiB, HBM writes 1 + 1 MiB.
    Static: 2 chips x 2 W over the run's time (timing is the fabric's tests' business)."""
    topo = load_topology("npu-1h").replace_chips(count=2)
    run = allreduce(topo, 1 << 20, "ring")
    m = collective_metrics(run)
    got = energy_of(collective_counts(run, topo, m, False), topo.energy)  # type: ignore[arg-type]
    mib = 1 << 20
    hand = {
        "mac": 0,
        "hbm_read": 2 * mib * fj(YAML["hbm_read_pj_per_byte"]),
        "hbm_write": 2 * mib * fj(YAML["hbm_write_pj_per_byte"]),
        "sram_read": 0,
        "sram_write": 0,
        "fetch": 0,
        "link": 2 * mib * fj(YAML["link_pj_per_byte"]),
        "reduce": mib * fj(YAML["reduce_pj_per_byte"]),
        "static": 2 * Fraction(str(YAML["static_w"])) * 1000 * run.time_ps,
    }
    assert dict(got.fj) == hand


@pytest.mark.parametrize(
    ("chips", "algorithm", "collective"),
    [(8, "ring", "allreduce"), (8, "direct", "allreduce"), (4, "ring", "all_gather")],
)
def test_the_fast_paths_count_what_the_full_program_does(
    monkeypatch: pytest.MonkeyPatch, chips: int, algorithm: str, collective: str
) -> None:
    """A symmetric run stores one chip's (or its representatives') ops; its counts times the
    chips equal the full program's, op by op."""
    topo = load_topology("npu-1h").replace_chips(count=chips)
    size = 64 * KIB
    fast = run_collective(topo, size, algorithm, collective)
    assert isinstance(fast, SymmetricRun)
    monkeypatch.setattr(run_module, "FAST_PATHS", [])
    full = run_collective(topo, size, algorithm, collective)
    assert not isinstance(full, SymmetricRun)
    counts = [collective_counts(r, topo, collective_metrics(r), False) for r in (fast, full)]
    assert counts[0] == counts[1]


def test_link_bytes_split_by_dimension_add_up() -> None:
    """On two dimensions with different link energies the link bytes split by dimension (every
    link belongs to one) and add up to the total; the inner dimension carries the node-local
    part."""
    topo = load_topology("h100-sxm-8x4")
    run = run_collective(topo, 1 << 20, "ring", "allreduce")
    m = collective_metrics(run)
    counts = collective_counts(run, topo, m, True)
    assert len(counts.link) == 2 and sum(counts.link) == int(m["link_bytes_total"])
    assert all(b > 0 for b in counts.link)
    dims = link_dimensions(run.network, topo)
    assert set(dims) == {0, 1} and len(dims) == len(run.network.links)


def test_counts_refuse_what_is_not_a_count() -> None:
    with pytest.raises(ValueError, match=r"AccessCounts\.macs = -1"):
        AccessCounts(macs=-1)


@pytest.mark.parametrize("shape", [(32, 64, 32), (64, 128, 64), (128, 256, 96)])
def test_scalesim_counts_give_our_energy_where_the_counts_agree(
    shape: tuple[int, int, int],
) -> None:
    """SCALE-Sim's own access counts (``sim.systolic``: SRAM operand reads, DRAM reads and
    writes, MACs) priced with the same per-access energies equal our components, for GEMM
    layers on the systolic PE (os, one 32 x 32 array = the tile's M x N) staged once
    (``resident``): MACs, HBM read = DRAM reads, HBM write = DRAM writes, operand fetch =
    IFMAP + filter SRAM reads. Its OFMAP SRAM writes count ``rows + cols`` more per fold
    (SCALE-Sim's drain, ADR 0008), so that component differs by exactly that."""
    from sim.systolic import ArrayConfig, SramSizes, SystolicLayer, dram_accesses, simulate_layer

    m, k, n = shape
    base = load_topology("npu-1h")
    topo = base.with_systolic_pe(base.pe.tile_m, base.pe.tile_n, "os")
    e, bpe = topo.energy, topo.bpe
    assert e is not None
    run = run_gemm(GemmShape(m, k, n), "resident", topo)
    metrics = gemm_metrics(run)
    ours = dict(energy_of(gemm_counts(run, metrics), e).fj)
    layer = SystolicLayer.gemm("l", m, n, k)
    array = ArrayConfig(topo.pe.rows, topo.pe.cols, "os")
    rep = simulate_layer(layer, array)
    ifmap, filt, ofmap = dram_accesses(layer, array, SramSizes(4096, 4096, 4096))
    assert None not in (ifmap, filt, ofmap)
    theirs = {
        "mac": layer.macs * e.mac_fj,
        "hbm_read": (ifmap + filt) * bpe * e.hbm_read_fj,  # type: ignore[operator]
        "hbm_write": ofmap * bpe * e.hbm_write_fj,  # type: ignore[operator]
        "fetch": (rep.ifmap_sram_reads + rep.filter_sram_reads) * bpe * e.fetch_fj,
    }
    assert {c: ours[c] for c in theirs} == theirs
    c_written = ours["sram_write"] - int(metrics["hbm_read_bytes"]) * e.sram_write_fj  # C only
    drain = rep.folds * (array.rows + array.cols)
    assert (
        rep.ofmap_sram_writes * bpe * e.sram_write_fj - c_written == drain * bpe * e.sram_write_fj
    )


@pytest.mark.parametrize(
    ("algorithm", "collective"),
    [("ring", "allreduce"), ("ring", "all_gather"), ("direct", "reduce_scatter")],
)
def test_the_orbit_path_on_two_levels_counts_what_the_full_program_does(
    monkeypatch: pytest.MonkeyPatch, algorithm: str, collective: str
) -> None:
    """The flat ring and direct on switch x switch are timed from one node's ops
    (sim.collectives.fast_orbit); their counts equal the full program's."""
    link = {"link_bw_gbs": 50, "link_latency_ns": 1000}
    topo = load_topology("npu-1h").replace_dimensions(
        [{"shape": "switch", "size": 4, **link}, {"shape": "switch", "size": 4, **link}]
    )
    size = 64 * KIB
    fast = run_collective(topo, size, algorithm, collective)
    assert type(fast).__name__ == "OrbitRun"
    monkeypatch.setattr(run_module, "FAST_PATHS", [])
    full = run_collective(topo, size, algorithm, collective)
    assert not isinstance(full, SymmetricRun)
    counts = [collective_counts(r, topo, collective_metrics(r), False) for r in (fast, full)]
    assert counts[0] == counts[1]
