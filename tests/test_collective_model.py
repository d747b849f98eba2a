"""The alpha-beta-gamma models: textbook formulas, the chunk pipeline, and the contention terms.

Expected values are written out from the formulas with the YAML's constants (alpha, beta,
gamma read from the topology), not taken from the model's output.
"""

from __future__ import annotations

import math

import pytest

from sim import load_topology
from sim.collective_model import lower_bounds_ps, model, textbook_ps
from sim.kernels.allreduce import CollectiveError
from sim.topology import Topology

BASE = load_topology()
KIB, MIB = 1024, 1024 * 1024
A = float(BASE.chips.link_latency_ps)  # ps per hop
B = 1000 / float(BASE.chips.link_bw)  # ps per byte on a link
G = 1000 / float(BASE.chips.reduce_bw)  # ps per byte reduced
CHUNK = BASE.chips.chunk_bytes


def _topo(kind: str, p: int, **chips: object) -> Topology:
    dims = (2, p // 2) if p % 2 == 0 and p > 2 else (1, p)
    return BASE.replace_chips(count=p, topology=kind, torus_dims=dims, **chips)


@pytest.mark.parametrize(("kind", "hops"), [("ring", 1), ("fully_connected", 1), ("switch", 2)])
def test_textbook_ring_formula(kind: str, hops: int) -> None:
    """Ring: 2(p-1) h a + 2((p-1)/p) n b + ((p-1)/p) n g, h = hops between ring neighbours."""
    p, n = 8, 3 * MIB
    want = 2 * (p - 1) * hops * A + 2 * (p - 1) / p * n * B + (p - 1) / p * n * G
    assert textbook_ps(_topo(kind, p), "ring", n) == pytest.approx(want, rel=1e-12)


def test_textbook_rabenseifner_counts_hops_per_step() -> None:
    """Halving-doubling on an 8-ring: partners 1, 2 and 4 hops apart, each way twice:
    2(1+2+4) a + 2(7/8) n b + (7/8) n g."""
    n = 5 * MIB
    want = 2 * 7 * A + 2 * 7 / 8 * n * B + 7 / 8 * n * G
    assert textbook_ps(_topo("ring", 8), "halving_doubling", n) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("algorithm", ["ring", "direct", "halving_doubling", "tree"])
@pytest.mark.parametrize("n", [2 * KIB, 64 * KIB, 1 * MIB])
def test_pipeline_is_the_textbook_formula_below_one_chunk(algorithm: str, n: int) -> None:
    """When every message fits one chunk and no link is shared (fully connected), the
    chunk pipeline adds nothing: it equals the textbook formula."""
    topo = _topo("fully_connected", 8)
    got = model(topo, algorithm, n, contention=False)
    assert got.time_ps == pytest.approx(textbook_ps(topo, algorithm, n), rel=1e-12)


def test_torus2d_model_is_the_textbook_formula_below_one_chunk() -> None:
    """2-D on a 2x4 torus: row reduce-scatter 3 (a + n/4 b + n/4 g), column allreduce on
    n/4 over 2 chips 2 (a + n/8 b) + n/8 g, row all-gather 3 (a + n/4 b)."""
    n = 512 * KIB
    want = 3 * (A + n / 4 * (B + G)) + 2 * (A + n / 8 * B) + n / 8 * G + 3 * (A + n / 4 * B)
    topo = _topo("torus2d", 8)
    assert textbook_ps(topo, "torus2d", n) == pytest.approx(want, rel=1e-12)
    assert model(topo, "torus2d", n).time_ps == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("p", [4, 8, 16])
def test_ring_pipeline_pays_alpha_per_chunk_and_hides_the_reduction(p: int) -> None:
    """With k >= 2 chunks per segment the ring keeps every link busy: 2(p-1)(k a + n/p b),
    no gamma term (each reduction overlaps the next chunk's transfer)."""
    n = 256 * MIB
    k = n // p // CHUNK
    want = 2 * (p - 1) * (k * A + n / p * B)
    assert model(_topo("ring", p), "ring", n).time_ps == pytest.approx(want, rel=1e-12)


def test_model_reads_the_link_bandwidth_from_the_topology() -> None:
    """Doubling link_bw_gbs in the topology halves the beta term and nothing else."""
    n, p = 64 * MIB, 8
    k = n // p // CHUNK
    fast = _topo("ring", p, link_bw_gbs=2 * BASE.chips.link_bw_gbs)
    want = 2 * (p - 1) * (k * A + n / p * B / 2)
    assert model(fast, "ring", n).time_ps == pytest.approx(want, rel=1e-12)


def test_busiest_link_term_counts_flows_per_link() -> None:
    """One-shot on a switch: each chip's one port to the switch carries p-1 copies of the
    vector, k chunks each, so that port is busy (p-1) k (a + c b)."""
    p, n = 8, 16 * MIB
    k = n // CHUNK
    got = model(_topo("switch", p), "direct", n)
    assert got.busiest_link_ps == pytest.approx((p - 1) * k * (A + CHUNK * B), rel=1e-12)
    assert got.time_ps >= got.busiest_link_ps


def test_busiest_engine_term_counts_reductions_per_chip() -> None:
    """One-shot on a fully connected system: every chip reduces p-1 vectors, (p-1) n g."""
    p, n = 8, 16 * MIB
    got = model(_topo("fully_connected", p), "direct", n)
    assert got.busiest_engine_ps == pytest.approx((p - 1) * n * G, rel=1e-12)


def test_contention_terms_matter_only_where_links_are_shared() -> None:
    """Halving-doubling on a ring shares links (the model with contention is slower than
    without); on a switch it shares none (both are the same)."""
    n = 64 * MIB
    ring, switch = _topo("ring", 8), _topo("switch", 8)
    assert (
        model(ring, "halving_doubling", n).time_ps
        > 1.2 * model(ring, "halving_doubling", n, contention=False).time_ps
    )
    assert (
        model(switch, "halving_doubling", n).time_ps
        == model(switch, "halving_doubling", n, contention=False).time_ps
    )


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_reduce_scatter_and_all_gather_are_half_a_ring(collective: str) -> None:
    """Either half alone: (p-1)(a + n/p b), plus (p-1)/p n g when reducing."""
    p, n = 8, 512 * KIB
    want = (p - 1) * (A + n / p * B) + (
        (p - 1) / p * n * G if collective == "reduce_scatter" else 0
    )
    got = model(_topo("ring", p), "ring", n, collective)
    assert got.time_ps == pytest.approx(want, rel=1e-12)
    assert got.textbook_ps == pytest.approx(want, rel=1e-12)


def test_one_chip_or_nothing_to_send_costs_nothing() -> None:
    """p = 1 or n = 0: no steps, zero time."""
    assert model(_topo("ring", 1), "ring", MIB).time_ps == 0
    assert model(_topo("ring", 8), "tree", 0).time_ps == 0


def test_non_power_of_two_halving_doubling_adds_the_fold_steps() -> None:
    """MPICH's fallback on 6 chips: two chips fold into neighbours (a + n b + n g) and get
    the result back (a + n b) around a 4-chip Rabenseifner."""
    n = 256 * KIB
    inner = 2 * 2 * A + 2 * 3 / 4 * n * B + 3 / 4 * n * G
    want = inner + 2 * (A + n * B) + n * G
    assert textbook_ps(_topo("fully_connected", 6), "halving_doubling", n) == pytest.approx(
        want, rel=1e-12
    )
    assert math.isclose(
        model(_topo("fully_connected", 6), "halving_doubling", n).time_ps, want, rel_tol=1e-12
    )


@pytest.mark.parametrize(
    ("algorithm", "collective", "match"),
    [
        ("butterfly", "allreduce", "unknown algorithm"),
        ("ring", "alltoall", "unknown collective"),
        ("tree", "all_gather", "ring' only"),
        ("torus2d", "allreduce", "needs a torus2d topology"),
    ],
)
def test_model_rejects_what_it_cannot_model(algorithm: str, collective: str, match: str) -> None:
    """Unknown names and invalid combinations are CollectiveError with the rule."""
    with pytest.raises(CollectiveError, match=match):
        model(_topo("ring", 4), algorithm, MIB, collective)


@pytest.mark.parametrize(
    ("kind", "p", "latency_hops", "links_out"),
    [
        ("switch", 8, 3, 1),  # one port: ceil(lg 8) = 3 rounds (more than the 2-hop diameter)
        ("ring", 8, 4, 2),  # diameter 4 beats ceil(log3 8) = 2 rounds
        ("fully_connected", 8, 1, 7),  # one hop, one round: one-shot can reach everyone
        ("torus2d", 16, 4, 4),  # 4x4 torus: diameter 2 + 2
    ],
)
def test_lower_bounds(kind: str, p: int, latency_hops: int, links_out: int) -> None:
    """Bandwidth bound 2((p-1)/p) n / (links out x link_bw); latency bound
    max(diameter, ceil(log_{d+1} p)) hops of alpha (ceil(lg p) a with one port per chip)."""
    topo = BASE.replace_chips(
        count=p, topology=kind, torus_dims=(4, 4) if kind == "torus2d" else (1, p)
    )
    n = 8 * MIB
    bandwidth, latency = lower_bounds_ps(topo, n)
    assert bandwidth == pytest.approx(2 * (p - 1) / p * n * B / links_out, rel=1e-12)
    assert latency == latency_hops * A
