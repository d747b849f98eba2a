"""Allreduce schedules on the simulated network: correctness, byte counts, timing validation.

Expected numbers come from the semantics (latency + bytes / bw per link, cut-through hops,
reduce at reduce_gbs) and from the algorithms' textbook properties, computed here with
exact integer or Fraction arithmetic, never from the simulator's own output.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import load_topology
from sim.collective_model import model
from sim.kernels.allreduce import (
    CollectiveError,
    Message,
    algorithms_for,
    all_gather,
    allreduce,
    build_schedule,
    collective_metrics,
    count_wrong,
    input_coefficients,
    reduce_scatter,
    run_collective,
    run_schedule,
)
from sim.link import build_network
from sim.topology import Topology

BASE = load_topology()
KIB, MIB = 1024, 1024 * 1024
SWEEP = [KIB * 4**i for i in range(10)]  # 1 KiB .. 256 MiB by x4, as the ccl bench
ALPHA = BASE.chips.link_latency_ps
BPE = BASE.bpe
CHUNK = BASE.chips.chunk_bytes


def _topo(kind: str, p: int) -> Topology:
    dims = (2, p // 2) if p % 2 == 0 and p > 2 else (1, p)
    return BASE.replace_chips(count=p, topology=kind, torus_dims=dims)


def _link_ps(nbytes: int | Fraction) -> int:
    """One link's hold time for nbytes, from the YAML's constants: latency + bytes / bw."""
    exact = Fraction(nbytes) * 1000 / BASE.chips.link_bw
    return ALPHA + math.ceil(exact)


def _reduce_ps(nbytes: int | Fraction) -> int:
    return math.ceil(Fraction(nbytes) * 1000 / BASE.chips.reduce_bw)


def _segments(count: int, p: int) -> list[tuple[int, int]]:
    """Element ranges of p near-equal segments, the first count % p one element longer."""
    out, lo = [], 0
    for i in range(p):
        size = count // p + (i < count % p)
        out.append((lo, lo + size))
        lo += size
    return out


def _inputs(p: int, count: int) -> np.ndarray:
    """Every chip's input vector, materialised: x_c[e] = a_c + b_c * e."""
    a, b = input_coefficients(p)
    return a[:, None] + b[:, None] * np.arange(count, dtype=np.int64)[None, :]


# --- functional ------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(["ring", "fully_connected", "switch", "torus2d"]),
    p=st.integers(1, 8),
    count=st.integers(0, 400),
    chunk_elems=st.integers(1, 40),
    pick=st.integers(0, 4),
)
def test_allreduce_sums_every_element(
    kind: str, p: int, count: int, chunk_elems: int, pick: int
) -> None:
    """Any algorithm, topology, chip count (1, 2, odd, non powers of two), size (also not
    divisible by p) and chunking leaves every chip with the element-wise sum of all inputs,
    moving at most one chunk per transfer."""
    topo = _topo(kind, p)
    algos = algorithms_for(kind)
    run = allreduce(topo, count * BPE, algos[pick % len(algos)], chunk_bytes=chunk_elems * BPE)
    assert run.wrong == 0
    assert int(run.log.nbytes.max(initial=0)) <= chunk_elems * BPE, "a transfer exceeds a chunk"
    want = _inputs(p, count).sum(axis=0)
    for chip in range(p):
        np.testing.assert_array_equal(run.values(chip), want)


@pytest.mark.parametrize("kind", ["ring", "fully_connected", "switch", "torus2d"])
@pytest.mark.parametrize("p", [2, 3, 5, 6, 8])
def test_every_algorithm_on_every_topology_is_exact(kind: str, p: int) -> None:
    """Each valid algorithm, at a size not divisible by p and cut into several chunks per
    segment, ends with #wrong = 0 and the materialised sum on every chip."""
    topo = _topo(kind, p)
    count = 1009
    want = _inputs(p, count).sum(axis=0)
    for algorithm in algorithms_for(kind):
        run = allreduce(topo, count * BPE, algorithm, chunk_bytes=50 * BPE)
        assert run.wrong == 0, algorithm
        for chip in range(p):
            np.testing.assert_array_equal(run.values(chip), want, err_msg=algorithm)


@pytest.mark.parametrize("p", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("count", [0, 1, 7, 1000, 1027])
def test_reduce_scatter_and_all_gather_alone(p: int, count: int) -> None:
    """Ring reduce-scatter leaves chip c with segment c summed; all-gather gives every chip
    every chip's segment c (element ranges computed independently)."""
    topo = _topo("ring", p)
    inputs = _inputs(p, count)
    rs = reduce_scatter(topo, count * BPE, chunk_bytes=64)
    ag = all_gather(topo, count * BPE, chunk_bytes=64)
    assert rs.wrong == 0 and ag.wrong == 0
    gathered = np.concatenate([inputs[c, lo:hi] for c, (lo, hi) in enumerate(_segments(count, p))])
    for chip, (lo, hi) in enumerate(_segments(count, p)):
        np.testing.assert_array_equal(rs.values(chip)[lo:hi], inputs[:, lo:hi].sum(axis=0))
        np.testing.assert_array_equal(ag.values(chip), gathered)


def test_wrong_counts_double_counted_elements() -> None:
    """A duplicated message makes its receiver count one input twice: exactly those
    elements are wrong, as nccl-tests' #wrong would report."""
    topo = _topo("fully_connected", 3)
    sched = build_schedule(topo, 300 * BPE, "direct", chunk_bytes=64)
    extra = Message(0, 1, 0, sched.pieces, True)
    bad = dataclasses.replace(sched, steps=((*sched.steps[0], extra),))
    assert run_schedule(bad, build_network(topo)).wrong == 300


def test_wrong_counts_a_missing_last_step() -> None:
    """Dropping the ring's last all-gather step leaves each chip one segment short: every
    element of it is wrong (partial sums miss inputs with b_c >= 1)."""
    topo = _topo("ring", 5)
    sched = build_schedule(topo, 1003 * BPE, "ring", chunk_bytes=256)
    bad = dataclasses.replace(sched, steps=sched.steps[:-1])
    assert run_schedule(bad, build_network(topo)).wrong == 1003


def test_count_wrong_matches_dense_comparison() -> None:
    """The exact per-piece count agrees with materialising the values element by element,
    including a piece where one element happens to be right."""
    topo = _topo("ring", 2)
    run = allreduce(topo, 40 * BPE, "ring", chunk_bytes=10 * BPE)
    sched = run.schedule
    a, b = run.final_a.copy(), run.final_b.copy()
    lo = sched.bounds[1]
    a[0, 1] -= 3 * (lo + 2)  # A + 3e: right only at e = lo + 2
    b[0, 1] += 3
    a[1, 2] += 5  # B right, A wrong: the whole piece is wrong
    dense = 0
    want = _inputs(2, 40).sum(axis=0)
    for chip in range(2):
        piece = np.repeat(np.arange(sched.pieces), np.diff(sched.bounds))
        got = a[chip, piece] + b[chip, piece] * np.arange(40)
        dense += int(np.count_nonzero(got != want))
    assert (
        count_wrong(sched, a, b)
        == dense
        == (sched.bounds[2] - lo - 1) + (sched.bounds[3] - sched.bounds[2])
    )


def test_one_chip_takes_no_time() -> None:
    """With p = 1 there is nothing to send: time 0, no records, nothing wrong."""
    run = allreduce(_topo("ring", 1), 4096, "ring")
    assert run.time_ps == 0 and len(run.log) == 0 and run.wrong == 0
    assert collective_metrics(run)["algbw_gbs"] == 0.0


def test_same_inputs_same_log() -> None:
    """Two runs of one config give identical op logs, record for record."""
    topo = _topo("switch", 6)
    a = allreduce(topo, 3 * MIB + 6, "tree")
    b = allreduce(topo, 3 * MIB + 6, "tree")
    assert a.log.equals(b.log), a.log.first_difference(b.log)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"nbytes": 1001}, "whole number of 2-byte elements"),
        ({"algorithm": "butterfly"}, "unknown algorithm"),
        ({"algorithm": "torus2d"}, "needs chips.topology torus2d"),
        ({"collective": "reduce_scatter", "algorithm": "tree"}, "ring schedule only"),
        ({"chunk_bytes": 1}, "smaller than one element"),
    ],
)
def test_bad_requests_are_clear_errors(kwargs: dict[str, object], match: str) -> None:
    """Impossible requests raise CollectiveError naming the value and the fix."""
    args: dict[str, object] = {"nbytes": 4096, "algorithm": "ring", "collective": "allreduce"}
    args.update(kwargs)
    with pytest.raises(CollectiveError, match=match):
        run_collective(_topo("ring", 4), **args)  # type: ignore[arg-type]


# --- byte counts -------------------------------------------------------------------------------


def _injected(run: object) -> np.ndarray:
    log = run.log  # type: ignore[attr-defined]
    sends = log.stage == log.stages.index("send")
    return np.bincount(log.chip[sends], weights=log.nbytes[sends], minlength=run.chips)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kind", "algorithm", "per_chip"),
    [
        ("ring", "ring", lambda n, p: 2 * (p - 1) * n // p),
        ("switch", "halving_doubling", lambda n, p: 2 * (p - 1) * n // p),
        ("fully_connected", "direct", lambda n, p: (p - 1) * n),
        ("torus2d", "torus2d", lambda n, p: 2 * (p - 1) * n // p),
    ],
)
def test_bytes_injected_per_chip_match_the_algorithm(kind: str, algorithm: str, per_chip) -> None:  # type: ignore[no-untyped-def]
    """Every chip injects the algorithm's textbook count: ring and Rabenseifner 2(p-1)/p n,
    one-shot (p-1) n, 2-D torus 2(p-1)/p n too (rows: 2(c-1)/c n, columns 2(r-1)/(rc) n)."""
    n, p = 3 * MIB, 8
    run = allreduce(_topo(kind, p), n, algorithm)
    assert _injected(run).tolist() == [per_chip(n, p)] * p


def test_tree_moves_the_vector_once_each_way_per_edge() -> None:
    """A tree of p chips has p-1 edges, each carrying n up and n down: 2(p-1) n in all; the
    root (no parent, two children) injects 2n and every chip injects a whole multiple of n."""
    n, p = 2 * MIB, 8
    got = _injected(allreduce(_topo("ring", p), n, "tree"))
    assert got.sum() == 2 * (p - 1) * n
    assert all(x % n == 0 and 1 <= x // n <= 3 for x in got)
    assert got[p // 2] == 2 * n  # the in-order tree's root is the middle chip


@pytest.mark.parametrize("count", [1001, 4099, 777_777])
def test_ring_bytes_with_uneven_segments(count: int) -> None:
    """Sizes not divisible by p: every segment still crosses p-1 links in each phase, so
    the chips inject 2(p-1) n bytes in total, and reduce-scatter / all-gather half of it."""
    p, n = 7, count * BPE
    topo = _topo("ring", p)
    assert _injected(allreduce(topo, n, "ring")).sum() == 2 * (p - 1) * n
    assert _injected(reduce_scatter(topo, n)).sum() == (p - 1) * n
    assert _injected(all_gather(topo, n)).sum() == (p - 1) * n


def test_large_messages_are_cut_into_chunks() -> None:
    """A ring step moves one segment of n/p bytes as ceil(n/p / chunk) transfers."""
    p, n = 8, 64 * MIB
    k = math.ceil(n / p / CHUNK)
    m = collective_metrics(allreduce(_topo("ring", p), n, "ring"))
    assert m["transfers"] == 2 * (p - 1) * p * k
    assert m["link_bytes_max"] == 2 * (p - 1) * n // p  # each ring link carries one flow


# --- timing against formulas -------------------------------------------------------------------


def _ring_closed_form(n: int, p: int) -> int:
    """Ring on a ring of p chips, segments of k equal chunks of c bytes (n divisible):
    each step costs max(one chunk's chain D_s, the step's k chunk times), last step k L.
    D_s = L + R while the data being passed on was just reduced, L in the all-gather."""
    m = n // p
    k = max(1, math.ceil(m / CHUNK))
    c = Fraction(m, k)
    assert c.denominator == 1 and c % BPE == 0
    L, R = _link_ps(c), _reduce_ps(c)
    steps = 2 * (p - 1)
    chain = [L + R if s < p - 1 else L for s in range(steps - 1)]
    return sum(max(d, k * L) for d in chain) + k * L


@pytest.mark.parametrize("p", [2, 4, 8])
def test_ring_on_ring_equals_alpha_beta_exactly(p: int) -> None:
    """Ring on a ring (one flow per link, no contention) matches the alpha-beta-gamma
    formula to the picosecond at every size from 1 KiB to 256 MiB; below one chunk per
    segment it is the textbook 2(p-1)(a + n/p b) + (p-1)/p n g."""
    topo = _topo("ring", p)
    for n in SWEEP:
        got = allreduce(topo, n, "ring").time_ps
        assert got == _ring_closed_form(n, p), n
        if n // p <= CHUNK:
            assert got == 2 * (p - 1) * _link_ps(n // p) + (p - 1) * _reduce_ps(n // p)


@pytest.mark.parametrize("p", [3, 5, 6, 7])
def test_ring_on_ring_within_one_percent_for_any_size(p: int) -> None:
    """With uneven segments (sizes not divisible by p) ring stays within 1 % of the model."""
    topo = _topo("ring", p)
    for n in [1002, 40_006, 3 * MIB + 10, 37 * MIB + 2]:
        ratio = allreduce(topo, n, "ring").time_ps / model(topo, "ring", n).time_ps
        assert abs(ratio - 1) < 0.01, (n, ratio)


def _hd_switch_textbook(n: int, p: int) -> int:
    """Rabenseifner on a switch, one transfer per step (n/2 <= chunk): each step is two
    hops (a + L(m_s)), reduce-scatter steps also reduce m_s; sizes n/2, n/4, .. and back."""
    levels = p.bit_length() - 1
    sizes = [n // 2 ** (s + 1) for s in range(levels)]
    rs = sum(ALPHA + _link_ps(m) + _reduce_ps(m) for m in sizes)
    ag = sum(ALPHA + _link_ps(m) for m in sizes)
    return rs + ag


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_halving_doubling_on_switch_matches_its_formula(p: int) -> None:
    """On a switch every partner is two hops away and no link is shared: halving-doubling
    equals its textbook formula while a step fits one chunk, and the model within 1 % at
    every size up to 256 MiB."""
    topo = _topo("switch", p)
    for n in SWEEP:
        got = allreduce(topo, n, "halving_doubling").time_ps
        if n // 2 <= CHUNK:
            assert got == _hd_switch_textbook(n, p), n
        ratio = got / model(topo, "halving_doubling", n).time_ps
        assert abs(ratio - 1) < 0.01, (n, ratio)


def _sources_per_link_and_step(run: object) -> int:
    """The most distinct source chips whose transfers cross one link within one step."""
    log = run.log  # type: ignore[attr-defined]
    sends = log.stage == log.stages.index("send")
    src_of = dict(zip(log.op[sends].tolist(), log.chip[sends].tolist(), strict=True))
    links = log.stage != log.stages.index("reduce")
    seen: dict[tuple[int, int], set[int]] = {}
    for op, eng, step in zip(log.op[links], log.engine[links], log.tile[links], strict=True):
        seen.setdefault((int(step), int(eng)), set()).add(src_of[int(op)])
    return max(len(v) for v in seen.values())


def test_halving_doubling_on_ring_is_slower_than_its_formula() -> None:
    """On a ring, partners 2 and 4 apart route over shared links: halving-doubling runs
    well above its contention-free formula (with hop counts) and a link carries several
    chips' flows in one step; on a switch it stays at its formula and one flow per link."""
    p, n = 8, 64 * MIB
    ring = allreduce(_topo("ring", p), n, "halving_doubling")
    switch = allreduce(_topo("switch", p), n, "halving_doubling")
    ring_formula = model(_topo("ring", p), "halving_doubling", n, contention=False)
    assert ring.time_ps > 1.15 * ring_formula.time_ps
    assert ring.time_ps > 1.15 * ring_formula.textbook_ps
    assert _sources_per_link_and_step(ring) >= 2
    switch_formula = model(_topo("switch", p), "halving_doubling", n, contention=False)
    assert abs(switch.time_ps / switch_formula.time_ps - 1) < 0.01
    assert _sources_per_link_and_step(switch) == 1


def test_reduction_overlaps_transfers() -> None:
    """The reduce engine works while the links send: some reduction on a chip runs during
    one of that chip's sends (large ring, many chunks per segment)."""
    log = allreduce(_topo("ring", 4), 16 * MIB, "ring").log
    red = log.stage == log.stages.index("reduce")
    send = log.stage == log.stages.index("send")
    overlap = False
    for chip in range(4):
        r = (log.chip == chip) & red
        s = (log.chip == chip) & send
        rs, re_ = log.start[r][:, None], log.end[r][:, None]
        overlap |= bool(np.any((rs < log.end[s][None, :]) & (log.start[s][None, :] < re_)))
    assert overlap


# --- bounds, bandwidth, crossover ----------------------------------------------------------------


def latency_floor_ps(topo: Topology) -> int:
    """No allreduce beats the network diameter in hops, nor ceil(log_{d+1} p) rounds when a
    chip has d links out (d = 1 on a switch: ceil(lg p)), each round at least one latency."""
    net = build_network(topo)
    p = net.chips
    diameter = max((net.hops(s, d) for s in range(p) for d in range(p)), default=0)
    degree = max(len(net.out_links(c)) for c in range(p))
    rounds = math.ceil(round(math.log(p, degree + 1), 9)) if p > 1 else 0
    return max(diameter, rounds) * ALPHA


@pytest.mark.parametrize("kind", ["ring", "fully_connected", "switch", "torus2d"])
def test_bounds_hold_for_every_algorithm(kind: str) -> None:
    """Every algorithm at every size up to 4 MiB on 8 chips takes at least
    2((p-1)/p) n / B_injection (B_injection = links out x link_bw) and the latency floor;
    on a switch (one link per chip) that floor is the textbook ceil(lg p) a."""
    p = 8
    topo = _topo(kind, p)
    net = build_network(topo)
    b_inj = max(len(net.out_links(c)) for c in range(p)) * BASE.chips.link_bw
    floor = latency_floor_ps(topo)
    if kind == "switch":
        assert floor >= math.ceil(math.log2(p)) * ALPHA
    for algorithm in algorithms_for(kind):
        for n in SWEEP[:7]:
            t = allreduce(topo, n, algorithm).time_ps
            assert t >= Fraction(2 * (p - 1) * n * 1000, p) / b_inj, (algorithm, n)
            assert t >= floor, (algorithm, n)


def test_ring_busbw_approaches_link_bandwidth_for_any_p() -> None:
    """At 256 MiB ring busbw is within 5 % of the link bandwidth and the same for 4, 8, 16
    chips (nccl-tests' busbw is built to be independent of p)."""
    bw = float(BASE.chips.link_bw)
    got = [
        collective_metrics(allreduce(_topo("ring", p), 256 * MIB, "ring"))["busbw_gbs"]
        for p in (4, 8, 16)
    ]
    assert all(0.95 * bw <= x <= bw for x in got), got
    assert max(got) - min(got) < 0.005 * bw, got


def _sim_crossover(topo: Topology, small: str, large: str) -> int:
    """The first sweep size from which `large` is faster than `small`, for good."""
    faster = [allreduce(topo, n, large).time_ps < allreduce(topo, n, small).time_ps for n in SWEEP]
    assert faster[-1] and not faster[0], "no crossover in the sweep"
    return SWEEP[max(i for i, f in enumerate(faster) if not f) + 1]


def test_ring_vs_tree_crossover_on_ring_matches_textbook() -> None:
    """On an 8-chip ring the tree wins small messages (fewer latencies) and ring wins large
    ones (less bytes per link). Textbook times are linear in n: ring 14a + (7/4 b + 7/8 g) n;
    the in-order tree (root 4; 2 and 6 two hops below; 1,3,5,7 one hop below those; 0 under
    1) climbs 3 levels and comes back: 2(2+1+1) a + 6 b n + (2+2+1) g n. The simulated
    crossover lies within one x4 sweep step of where the lines cross."""
    topo = _topo("ring", 8)
    a = Fraction(ALPHA)
    b, g = 1000 / BASE.chips.link_bw, 1000 / BASE.chips.reduce_bw
    ring_a, ring_b = 14 * a, Fraction(7, 4) * b + Fraction(7, 8) * g
    tree_a, tree_b = 8 * a, 6 * b + 5 * g
    analytic = (ring_a - tree_a) / (tree_b - ring_b)
    sim = _sim_crossover(topo, "tree", "ring")
    assert sim / 16 < analytic <= sim * 4, (float(analytic), sim)


def test_ring_vs_tree_crossover_on_switch_matches_the_model() -> None:
    """On a switch the tree's parents share their one port with both children; the model
    (with link loads) puts the crossover within one sweep step of the simulated one."""
    topo = _topo("switch", 8)
    fine = [KIB * 2 ** (i / 8) for i in range(8 * 18)]
    model_faster = [
        model(topo, "ring", int(n) // 2 * 2).time_ps < model(topo, "tree", int(n) // 2 * 2).time_ps
        for n in fine
    ]
    analytic = fine[model_faster.index(True)]
    sim = _sim_crossover(topo, "tree", "ring")
    assert sim / 16 < analytic <= sim * 4, (analytic, sim)
