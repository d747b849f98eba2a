"""``--npubench-sweep``: the selected configs of a real bench on each hardware variant, side by
side; baselines never written; bad sweeps refused in one message (issue 28)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_npubench import sweep
from pytest_npubench.sweep import child_args, load_sweep_file, parse_axis, product

ROOT = Path(__file__).resolve().parents[2]
SELECT = "256x256x256-double_buffer or 256x256x256-resident"


def test_the_plugin_and_the_topology_loader_name_one_variable() -> None:
    from sim.topology.overrides import OVERRIDES_ENV

    assert sweep.OVERRIDES_ENV == OVERRIDES_ENV


def test_axes_parse_to_typed_values_and_their_product() -> None:
    assert parse_axis("hbm.hbm_to_router_bw_gbs=128,256.5") == (
        "hbm.hbm_to_router_bw_gbs",
        [128, 256.5],
    )
    assert parse_axis("chips.topology=ring,switch")[1] == ["ring", "switch"]
    variants = product([("a.x", [1, 2]), ("b.y", ["p", "q", "r"])])
    assert len(variants) == 6 and variants[0] == {"a.x": 1, "b.y": "p"}


@pytest.mark.parametrize(
    "bad", ["hbm.bw", "bw=1,2", "hbm.bw=1,,2", "hbm.bw=1,1", "hbm.bw=[1,2]", "=1"]
)
def test_a_bad_axis_is_a_usage_error_with_an_example(bad: str) -> None:
    with pytest.raises(pytest.UsageError, match="--npubench-sweep"):
        parse_axis(bad)


def test_sweep_files_product_and_listed_variants(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("hbm.hbm_to_router_bw_gbs: [128, 256]\nchips.link_bw_gbs: [50]\n")
    assert len(load_sweep_file(f)) == 2
    f.write_text(
        "variants:\n  - {hbm.latency_ns: 100}\n  - {hbm.latency_ns: 200, dma.setup_ns: 1}\n"
    )
    assert load_sweep_file(f)[1] == {"hbm.latency_ns": 200, "dma.setup_ns": 1}
    f.write_text("variants: 3\n")
    with pytest.raises(pytest.UsageError, match=r"s\.yaml"):
        load_sweep_file(f)


def test_child_args_drop_only_the_sweeps_own_options() -> None:
    args = [
        "--npubench",
        "gemm",
        "--npubench-sweep",
        "a.b=1,2",
        "--npubench-sweep=c.d=3",
        "--npubench-artifacts=x",
        "-n",
        "2",
        "-k",
        "256",
    ]
    assert child_args(args) == ["--npubench", "gemm", "-n", "2", "-k", "256"]


def pytest_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("NPUBENCH_")},
    )


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.glob("*.json")):
        h.update(p.read_bytes())
    return h.hexdigest()


def test_a_sweep_of_hbm_bandwidth_on_gemm(tmp_path: Path) -> None:
    """Two variants: each config measured on each, a bandwidth-bound config (double_buffer
    re-reads its operands) faster with twice the HBM bandwidth, the results under two
    fingerprints, the figure and table written, baselines/ byte-identical."""
    before = _digest(ROOT / "baselines")
    done = pytest_run(
        tmp_path,
        "--npubench",
        "gemm",
        "-k",
        SELECT,
        "-n",
        "0",
        "--npubench-sweep",
        "hbm.hbm_to_router_bw_gbs=128,256",
        f"--npubench-artifacts={tmp_path / 'sweep'}",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert _digest(ROOT / "baselines") == before
    data = json.loads((tmp_path / "sweep" / "results.json").read_text())
    variants = data["benches"]["gemm"]["variants"]
    assert len(variants) == 2
    by_bw = {v["set"]["hbm.hbm_to_router_bw_gbs"]: v["configs"] for v in variants.values()}
    slow = by_bw[128]["256x256x256-double_buffer"]["latency_ns"]
    fast = by_bw[256]["256x256x256-double_buffer"]["latency_ns"]
    assert fast < slow
    assert (
        set(by_bw[128])
        == set(by_bw[256])
        == {
            "256x256x256-double_buffer",
            "256x256x256-resident",
        }
    )
    assert (tmp_path / "sweep" / "gemm" / "sweep.png").stat().st_size > 5000
    assert "256x256x256-resident" in (tmp_path / "sweep" / "sweep.md").read_text()
    assert "median x" in done.stdout


def test_a_bad_value_fails_its_variant_names_the_key_and_keeps_the_others(
    tmp_path: Path,
) -> None:
    done = pytest_run(
        tmp_path,
        "--npubench",
        "gemm",
        "-k",
        "256x256x256-double_buffer",
        "-n",
        "0",
        "--npubench-sweep",
        "hbm.hbm_to_router_bw_gbs=-5,256",
        f"--npubench-artifacts={tmp_path / 'sweep'}",
    )
    assert done.returncode == 1
    assert "hbm.hbm_to_router_bw_gbs" in done.stdout and "must be positive" in done.stdout
    data = json.loads((tmp_path / "sweep" / "results.json").read_text())
    kept = list(data["benches"]["gemm"]["variants"].values())
    assert [v["set"] for v in kept] == [{"hbm.hbm_to_router_bw_gbs": 256}]


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--regen-baselines"], "never writes baselines"),
        (["--npubench-replay=x.json"], "--npubench-replay cannot be combined"),
    ],
)
def test_what_a_sweep_cannot_do_is_refused(tmp_path: Path, extra: list[str], says: str) -> None:
    done = pytest_run(
        tmp_path,
        "--npubench",
        "gemm",
        "--npubench-sweep",
        "hbm.latency_ns=1,2",
        *extra,
        f"--npubench-artifacts={tmp_path / 'sweep'}",
    )
    assert done.returncode == 4, done.stdout + done.stderr
    assert says in done.stderr


def sweep_merge(*folders: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_npubench", "sweep-merge", *map(str, folders),
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip


def test_a_sweep_split_over_two_shards_merges_into_the_one_run_report(tmp_path: Path) -> None:
    """--npubench-shard K/N runs every N-th variant; sweep-merge of the shards' folders lists
    every variant once, as one run would."""
    args = ["--npubench", "gemm", "-k", "256x256x256-double_buffer", "-n", "0"]
    sweep_arg = ["--npubench-sweep", "hbm.hbm_to_router_bw_gbs=128,256,512"]
    for k in (1, 2):
        done = pytest_run(
            tmp_path,
            *args,
            *sweep_arg,
            f"--npubench-shard={k}/2",
            f"--npubench-artifacts={tmp_path / f'shard-{k}'}",
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    one = json.loads((tmp_path / "shard-1" / "results.json").read_text())
    assert [v["id"] for v in one["sweep"]] == ["v01", "v03"]
    merged = sweep_merge(tmp_path / "shard-1", tmp_path / "shard-2", out=tmp_path / "merged")
    assert merged.returncode == 0, merged.stderr
    data = json.loads((tmp_path / "merged" / "results.json").read_text())
    assert [v["id"] for v in data["sweep"]] == ["v01", "v02", "v03"]
    assert len(data["benches"]["gemm"]["variants"]) == 3
    assert (tmp_path / "merged" / "gemm" / "sweep.png").is_file()
    again = sweep_merge(tmp_path / "shard-1", tmp_path / "shard-1", out=tmp_path / "twice")
    assert again.returncode == 2 and "in two shards" in again.stderr
    assert not (tmp_path / "twice").exists()
