"""--npubench-shard K/N and `python -m pytest_npubench merge`: the merged artifacts of N shards
are byte for byte those of one unsharded run; shards that do not belong together are refused."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from toyproject import Project, output, same_run

from pytest_npubench.shard import partition

FILES = [
    "npubench-artifacts/results.json",
    "npubench-artifacts/summary.md",
    "npubench-artifacts/index.html",
    "npubench-artifacts/toy/latency.png",
    "npubench-artifacts/other/latency.png",
    "baselines/toy.json",
    "baselines/other.json",
]


def snapshot(project: Project) -> dict[str, bytes]:
    return {f: same_run(f, (project.path / f).read_bytes()) for f in FILES}


def merge(project: Project, *args: str) -> pytest.RunResult:
    return project.pytester.run(
        sys.executable, "-m", "pytest_npubench", "merge", *args, timeout=120
    )


def prepared(project: Project) -> str:
    """A measured project of two benches whose numbers then change (so a regen has work)."""
    project.bench(regen_only=True, figures=True)
    project.bench("other", figures=True)
    project.run("--regen-baselines").assert_outcomes(passed=8)
    project.knobs(scale=2.0)
    project.knobs("other", scale=0.5)
    return project.read("baselines/toy.json")


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_merged_shards_equal_the_unsharded_run_byte_for_byte(project: Project, count: int) -> None:
    """Regen of two benches as one run, then as `count` shards plus a merge: results.json,
    summary.md, index.html, the figures and the rewritten baselines are identical; no shard
    writes baselines/ itself, and the shards hold each config exactly once."""
    before = prepared(project)
    other = project.read("baselines/other.json")
    project.run("--npubench", "all", "--regen-baselines").assert_outcomes(passed=8)
    whole = snapshot(project)
    shutil.rmtree(project.path / "npubench-artifacts")
    (project.path / "baselines/toy.json").write_text(before)
    (project.path / "baselines/other.json").write_text(other)

    ran: list[str] = []
    for k in range(1, count + 1):
        project.run(
            "--npubench",
            "all",
            "--regen-baselines",
            f"--npubench-shard={k}/{count}",
            f"--npubench-artifacts=s{k}",
        )
        assert project.read("baselines/toy.json") == before  # shards never write baselines/
        shard = json.loads(project.read(f"s{k}/shard.json"))
        ran += list(shard["results"].get("toy", {}))
    assert sorted(ran) == ["16-fast", "16-slow", "32-fast", "32-slow"]

    result = merge(project, *(f"s{k}" for k in range(1, count + 1)), "--regen-baselines")
    assert result.ret == 0, output(result)
    assert snapshot(project) == whole


def test_merge_of_a_gate_failure_fails_like_the_unsharded_run(project: Project) -> None:
    """Without regen, the merged run judges every config as one run would (here: all slower,
    so it fails) and writes the same results.json."""
    prepared(project)
    whole = project.run("--npubench", "toy")
    whole.assert_outcomes(failed=3, skipped=1)
    name = "npubench-artifacts/results.json"
    results = same_run(name, (project.path / name).read_bytes())
    shutil.rmtree(project.path / "npubench-artifacts")
    for k in (1, 2):
        project.run("--npubench", "toy", f"--npubench-shard={k}/2", f"--npubench-artifacts=s{k}")
    merged = merge(project, "s1", "s2")
    assert merged.ret == pytest.ExitCode.TESTS_FAILED
    assert same_run(name, (project.path / name).read_bytes()) == results
    run = project.results()["run"]
    assert run["invocation"] == "python -m pytest_npubench merge s1 s2"
    assert run["command"] == "pytest -p no:hypothesispytest --npubench toy"


@pytest.mark.parametrize(
    ("shards", "message"),
    [
        (["s1"], "shard(s) 2 of 2 are missing; give every shard folder"),
        (["s1", "s1", "s2"], "shard 1/2 is also in"),
        (["s1", "t1"], "is not one of 2 like"),
        (["s1", "s2", "nowhere"], "not a shard"),
    ],
    ids=["missing", "duplicated", "other-split", "not-a-shard"],
)
def test_shards_that_do_not_belong_together_are_refused_and_nothing_is_written(
    project: Project, shards: list[str], message: str
) -> None:
    """A missing, duplicated or foreign shard is one clear error naming it; no artifact and no
    baseline is written."""
    before = prepared(project)
    for k in (1, 2):
        project.run("--regen-baselines", f"--npubench-shard={k}/2", f"--npubench-artifacts=s{k}")
    project.run("--regen-baselines", "--npubench-shard=1/3", "--npubench-artifacts=t1")
    shutil.rmtree(project.path / "npubench-artifacts")
    result = merge(project, *shards, "--regen-baselines")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in output(result)
    assert not (project.path / "npubench-artifacts").exists()
    assert project.read("baselines/toy.json") == before


def test_shards_of_another_topology_are_refused(project: Project) -> None:
    """Shards measured on different hardware cannot be merged into one result."""
    prepared(project)
    project.run("--npubench", "toy", "--npubench-shard=1/2", "--npubench-artifacts=s1")
    project.knobs(scale=2.0, fingerprint="toy-hw:2")  # the same code on other hardware
    project.run("--npubench", "toy", "--npubench-shard=2/2", "--npubench-artifacts=s2")
    result = merge(project, "s1", "s2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "its topology" in output(result) and "merge shards of one run only" in output(result)


def test_bad_shard_values_are_usage_errors(project: Project) -> None:
    """K/N must be whole numbers with 1 <= K <= N."""
    project.bench()
    for bad in ("0/2", "3/2", "a/b", "2"):
        result = project.run("--npubench", "toy", f"--npubench-shard={bad}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, bad
        assert "give K/N with 1 <= K <= N" in output(result)


def test_partition_balances_by_cost_and_is_deterministic() -> None:
    """Longest first onto the least loaded part: costs 8,4,4,2,1,1 in 2 parts -> 10 and 10."""
    costs = [("a", 8.0), ("b", 4.0), ("c", 4.0), ("d", 2.0), ("e", 1.0), ("f", 1.0)]
    owner = partition(costs, 2)
    loads = [sum(c for (_, c), o in zip(costs, owner, strict=True) if o == s) for s in (0, 1)]
    assert loads == [10.0, 10.0]
    assert partition(list(reversed(costs)), 2) == list(reversed(owner))


def test_shard_json_records_what_the_merge_checks(project: Project, tmp_path: Path) -> None:
    """shard.json holds the shard, the command without how-options, commit, topology and the
    measured payloads."""
    prepared(project)
    project.run("--npubench", "toy", "--npubench-shard=2/3", "--npubench-artifacts=s2", "-n", "0")
    shard = json.loads(project.read("s2/shard.json"))
    assert shard["shard"] == [2, 3]
    assert shard["args"] == ["-p", "no:hypothesispytest", "--npubench", "toy"]
    assert shard["fingerprints"] == {"toy": "toy-hw:1"} and shard["regen"] is False
