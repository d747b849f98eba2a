"""The tp_layer bench: its gated set covers every path, its checks fail, it gates and draws."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from bench_project import copy_bench

import benches.tp_layer as tpb
import sim.tp.build as tp
from sim.tp.config import LAYERS, MODES

ROOT = Path(__file__).resolve().parents[2]
PICK = "h128 and p4 and ring"  # every layer x mode, with the data replay: 6 configs

SLOWER_LINKS = """
import sim.fabric as link

_link_ps = link.Network.link_ps


def _slower_link(self, nbytes):
    return _link_ps(self, nbytes) * 102 // 100 + 100_000  # links 2 % + 100 ns slower


link.Network.link_ps = _slower_link
"""


@pytest.fixture
def bench_dir(pytester: pytest.Pytester) -> pytest.Pytester:
    copy_bench(pytester.path, "tp_layer")
    return pytester


def test_the_gate_covers_every_layer_mode_and_topology() -> None:
    """Each (layer, mode, topology) has a gated config with the data replay (hidden 128) and
    one at a real hidden size (4096); everything else is regen-only."""
    gated = [c.params for c in tpb.BENCH.configs if not c.regen_only and c.params["hidden"] != 256]
    for hidden in (tpb.FUNCTIONAL_HIDDEN, tpb.GATED_REAL["hidden"]):
        have = {(p["layer"], p["mode"], p["topology"]) for p in gated if p["hidden"] == hidden}
        want = {(ly, m, t) for ly in LAYERS for m in MODES for t in tpb.TOPOLOGIES}
        assert have == want, hidden
    assert {p["tp"] for p in gated if p["hidden"] == tpb.FUNCTIONAL_HIDDEN} == {2, 4, 8}
    assert all(tpb._macs(p) <= tpb.FUNCTIONAL_MAX_MACS for p in gated if p["hidden"] == 128)
    assert len(gated) == 60 and len(tpb.BENCH.configs) == 488  # 48 + TP 2 off the ring
    # + issue 26's two compute-bound replayed race configs (hidden 256), gated
    extra = [c for c in tpb.BENCH.configs if c.params["hidden"] == 256]
    assert {c.params["mode"] for c in extra} == {"gemm_ar", "ag_rs"}
    assert not any(c.regen_only for c in extra)


def test_counters_are_gated_exactly_and_times_at_their_tolerance() -> None:
    for name in ("transfers", "records", "hbm_bytes_max", "link_bytes_max", "link_bytes_total"):
        assert tpb.METRICS[name].gate and tpb.METRICS[name].tolerance == 0.0, name
    for name in ("latency_ns", "compute_ns", "comm_ns"):
        assert tpb.METRICS[name].gate and tpb.METRICS[name].tolerance == 0.001, name


def test_run_checks_data_bounds_and_the_serial_sum() -> None:
    """A gated config replays its data (0 wrong), meets its bound, and serial is the sum."""
    for mode in MODES:
        params = {"layer": "mlp", "hidden": 128, "tokens": 128, "tp": 4, "topology": "switch"}
        result = tpb.run({**params, "mode": mode})
        m = result.metrics
        assert result.ok, result.message
        assert m["wrong"] == 0 and m["latency_ns"] >= m["bound_ns"]
        assert m["exposed_comm_ns"] == pytest.approx(m["latency_ns"] - m["compute_ns"])


def test_run_fails_a_layer_whose_data_arrives_too_late(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted bug: the reduce-scatter's reductions stop waiting for the transfer they
    consume; the replay sees a reduction before its data arrived and the item fails."""
    real = tp._Builder.land

    def hasty(self: tp._Builder, buf: str, sent: dict, reduce: bool, gemm_of: dict) -> dict:  # type: ignore[type-arg]
        out = real(self, buf, sent, reduce, gemm_of)
        prog = self.out.prog
        for ops in out.values():
            for j in ops:
                prog.deps[j] = tuple(d for d in prog.deps[j] if d != self.out.consumes[j])
        return out

    monkeypatch.setattr(tp._Builder, "land", hasty)
    params = {"layer": "attn", "hidden": 128, "tokens": 128, "tp": 4, "topology": "ring"}
    result = tpb.run({**params, "mode": "ag_rs"})
    assert not result.ok
    assert "before the data of transfer op" in result.message


def test_committed_baselines_cover_every_config_and_the_gated_run_passes(
    bench_dir: pytest.Pytester,
) -> None:
    """baselines/tp_layer.json has every config; a gated run passes and draws four figures."""
    committed = json.loads((ROOT / "baselines" / "tp_layer.json").read_text())
    assert committed["fingerprint"] == tpb.TOPOLOGY.fingerprint
    assert sorted(committed["configs"]) == sorted(c.config_id for c in tpb.BENCH.configs)
    result = bench_dir.runpytest_subprocess(
        "--npubench", "tp_layer", "-k", PICK, "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=6)
    figures = bench_dir.path / "npubench-artifacts" / "tp_layer"
    for name in ("time_breakdown", "speedup", "strong_scaling", "timeline"):
        assert (figures / f"{name}.png").stat().st_size > 10_000, name


def test_slower_links_fail_the_gate(bench_dir: pytest.Pytester) -> None:
    """Links 2 % and 100 ns per transfer slower: every picked config's communication time
    moves beyond the 0.1 % tolerance and fails with the comm_ns row."""
    bench_dir.makeconftest(SLOWER_LINKS)
    result = bench_dir.runpytest_subprocess(
        "--npubench", "tp_layer", "-k", PICK, "-p", "no:cacheprovider", "-v"
    )
    result.assert_outcomes(failed=6)
    result.stdout.fnmatch_lines(["*regression*latency_ns +*more metric*comm_ns +*"])
    result.stdout.fnmatch_lines(["*metric*baseline*current*", "*comm_ns*regression*"])  # -v


def test_trace_writes_every_chips_engines_and_links(tmp_path: Path) -> None:
    """--npubench-trace's hook: one process per chip, with its PE and link lanes."""
    params = {"layer": "mlp", "hidden": 128, "tokens": 128, "tp": 2, "topology": "ring"}
    path = tpb.trace({**params, "mode": "gemm_ar"}, tmp_path / "t.json", 10_000)
    doc = json.loads(path.read_text())
    names = {
        (e["pid"], e["args"]["name"]) for e in doc["traceEvents"] if e.get("name") == "thread_name"
    }
    for chip in (0, 1):
        lanes = {n for pid, n in names if pid == chip}
        assert any(n.startswith("pe") for n in lanes), lanes
        assert any(n.startswith("link") for n in lanes), lanes


def test_the_sweep_is_the_old_cartesian_product_in_the_same_order() -> None:
    """The union (per layer: hidden 128 at one token count, then the real hidden sizes) lists
    exactly the configs of the old definition, the product of every axis without hidden 128
    at more than 128 tokens, in the same order and with the same gated set."""
    axes = ("layer", "hidden", "tokens", "tp", "topology", "mode")
    values = (LAYERS, [128, 4096, 8192], tpb.TOKENS, tpb.TP, tpb.TOPOLOGIES, MODES)
    old = [
        p
        for p in (dict(zip(axes, point, strict=True)) for point in itertools.product(*values))
        if not (p["hidden"] == 128 and p["tokens"] != 128)
    ]

    def old_gated(p: dict[str, Any]) -> bool:
        if p["hidden"] == 128:
            return bool(p["topology"] == "ring" or p["tp"] in (2, 4))  # TP 2: issue 26
        return bool(p["hidden"] == 4096 and p["tokens"] == 512 and p["tp"] == 4)

    first = tpb.BENCH.configs[: len(old)]  # issue 26's race configs come after
    assert [c.params["hidden"] for c in tpb.BENCH.configs[len(old) :]] == [256, 256]
    assert [(c.config_id, c.params, c.regen_only) for c in first] == [
        (tpb.config_id(p), p, not old_gated(p)) for p in old
    ]


def test_the_figure_grid_keeps_every_config_of_the_sweep_apart() -> None:
    """Every config has its own cell in the figures' grid (the bench's own builder); two
    results in one cell are an error naming both."""
    from pytest_npubench import ConfigResult

    def fake(cid: str, params: Any) -> ConfigResult:
        return ConfigResult("tp_layer", cid, params, {"latency_ns": 1.0}, None, "pass", "run")

    configs = tpb.BENCH.configs
    grid = tpb.figure_grid({c.config_id: fake(c.config_id, c.params) for c in configs})
    assert len(grid) == len(configs)
    first = configs[0]
    twins = {first.config_id: fake(first.config_id, first.params), "b": fake("b", first.params)}
    with pytest.raises(ValueError, match=f"'{first.config_id}' and 'b' fall in one"):
        tpb.figure_grid(twins)
