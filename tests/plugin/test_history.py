"""``python -m pytest_npubench history`` on a throwaway repository built here: commits that
move a metric (beyond and within tolerance), a topology change, a rename, a corrupt version, a
merge, ``--since``, ``-k``, a shallow clone, and no repository at all (issue 28)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_npubench.baseline import BaselineFile
from pytest_npubench.bench import Metric
from pytest_npubench.history import open_repo, read_history

METRICS = {
    "time_ns": Metric("ns", "lower", tolerance=0.01),
    "count": Metric("1", "lower"),
    "util": Metric("1", "higher", gate=False),
}

BENCH_MODULE = """
from pytest_npubench import Bench, Metric, Result

def run(params):
    return Result(metrics={"time_ns": 1.0, "count": 1, "util": 0.5})

BENCH = Bench(
    name="toy",
    sweep={"name": ["a"]},
    run=run,
    metrics={
        "time_ns": Metric("ns", "lower", tolerance=0.01),
        "count": Metric("1", "lower"),
        "util": Metric("1", "higher", gate=False),
    },
    fingerprint=lambda: "hw:2",
)
"""


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


def write(repo: Path, configs: dict[str, dict[str, float]], fingerprint: str = "hw:1") -> None:
    entries = {c: {"metrics": m, "params": {}} for c, m in configs.items()}
    text = BaselineFile("toy", fingerprint, {}, entries, {"link.bw": fingerprint}).render()
    (repo / "baselines" / "toy.json").write_text(text)


def commit(repo: Path, subject: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", subject)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def history_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("history")
    git(repo, "init", "-q", "-b", "main")
    (repo / "baselines").mkdir()
    (repo / "benches").mkdir()
    (repo / "benches" / "toy.py").write_text(BENCH_MODULE)
    (repo / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nnpubench_paths = ["benches"]\n'
        'npubench_baselines = "baselines"\n'
    )
    a = {"time_ns": 100.0, "count": 4, "util": 0.5}
    b = {"time_ns": 200.0, "count": 8, "util": 0.25}
    shas: dict[str, str] = {}
    write(repo, {"a": a, "b": b})
    shas["first"] = commit(repo, "first baselines")
    write(repo, {"a": {**a, "time_ns": 100.5}, "b": b})  # +0.5 %: within 1 %
    shas["noise"] = commit(repo, "noise within tolerance")
    git(repo, "checkout", "-q", "-b", "feature")
    write(repo, {"a": {**a, "time_ns": 110.0, "util": 0.4}, "b": b})  # +9.5 %: beyond
    shas["slower"] = commit(repo, "feature: a got slower")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge branch 'feature'", "feature")
    shas["merge"] = git(repo, "rev-parse", "HEAD")
    write(repo, {"a": {**a, "time_ns": 55.0}, "b": {**b, "time_ns": 150.0}}, "hw:2")
    shas["topology"] = commit(repo, "new hardware")
    write(repo, {"a": {**a, "time_ns": 55.0, "count": 3}, "b2": {**b, "time_ns": 150.0}}, "hw:2")
    shas["rename"] = commit(repo, "rename b to b2; a needs one buffer less")
    (repo / "baselines" / "toy.json").write_text('{"schema": 1, "configs": {')
    shas["corrupt"] = commit(repo, "a bad merge broke the file")
    write(repo, {"a": {**a, "time_ns": 60.0, "count": 3}, "b2": {**b, "time_ns": 150.0}}, "hw:2")
    shas["fixed"] = commit(repo, "file fixed; a slower again")
    return repo, shas


def moves_of(repo: Path, **kwargs: object) -> set[tuple[str, str, str, str]]:
    h = read_history(open_repo(repo), "baselines", "toy", METRICS, **kwargs)  # type: ignore[arg-type]
    return {(m.commit.subject, m.config, m.metric, m.verdict) for m in h.moves}


def test_exactly_the_commits_that_moved_a_gated_metric_beyond_tolerance(
    history_repo: tuple[Path, dict[str, str]],
) -> None:
    repo, _ = history_repo
    assert moves_of(repo) == {
        ("Merge branch 'feature'", "a", "time_ns", "regression"),
        (
            "rename b to b2; a needs one buffer less",
            "a",
            "count",
            "changed",
        ),  # a counter: never improved
        ("file fixed; a slower again", "a", "time_ns", "regression"),
    }


def test_topology_rename_and_corrupt_versions_are_events_not_regressions(
    history_repo: tuple[Path, dict[str, str]],
) -> None:
    repo, shas = history_repo
    h = read_history(open_repo(repo), "baselines", "toy", METRICS)
    kinds = {(e.commit.sha, e.kind) for e in h.events}
    assert (shas["topology"], "topology") in kinds
    assert (shas["rename"], "renamed") in kinds
    assert (shas["corrupt"], "unreadable") in kinds
    renamed = next(e for e in h.events if e.kind == "renamed")
    assert renamed.text == "b -> b2"
    topology = next(e for e in h.events if e.kind == "topology")
    assert "hw:1 -> hw:2" in topology.text and "link.bw" in topology.text
    merge = next(v for v in h.versions if v.commit.sha == shas["merge"])
    assert any("feature: a got slower" in line for line in merge.via)
    assert all(m.commit.sha != shas["topology"] for m in h.moves)


def test_since_and_k_select_commits_and_configs(
    history_repo: tuple[Path, dict[str, str]],
) -> None:
    repo, shas = history_repo
    assert moves_of(repo, since=shas["rename"]) == {
        ("file fixed; a slower again", "a", "time_ns", "regression")
    }
    assert moves_of(repo, select=lambda c: c.startswith("b")) == set()
    assert moves_of(repo, only_metrics=["util"]) == {
        ("Merge branch 'feature'", "a", "util", "changed")
    }


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run(
        [sys.executable, "-m", "pytest_npubench", "history", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )


def test_cli_writes_table_figure_and_data_from_the_bench_declarations(
    history_repo: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    repo, shas = history_repo
    done = cli(repo, "--out", str(tmp_path / "h"), "-k", "a and not b")
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "h" / "history.md").read_text()
    assert f"`{shas['merge'][:8]}`" in table and "regression" in table
    assert "**topology**" in table and "**unreadable**" in table
    data = json.loads((tmp_path / "h" / "history.json").read_text())
    assert {m["sha"] for m in data["benches"]["toy"]["moves"]} == {
        shas["merge"],
        shas["rename"],
        shas["fixed"],
    }
    assert (tmp_path / "h" / "history-toy.png").stat().st_size > 1000
    assert "<details>" in (tmp_path / "h" / "history.html").read_text()


def test_a_shallow_clone_says_how_deep_it_could_see(
    history_repo: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    repo, _ = history_repo
    clone = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "2", f"file://{repo}", str(clone)], check=True)
    done = cli(clone, "--out", str(tmp_path / "h"))
    assert done.returncode == 0, done.stderr
    assert "shallow clone" in done.stdout


def test_without_the_bench_module_every_change_is_listed_as_changed(
    history_repo: tuple[Path, dict[str, str]],
) -> None:
    repo, _ = history_repo
    h = read_history(open_repo(repo), "baselines", "toy", None)
    assert {(m.commit.subject, m.metric) for m in h.moves} >= {
        ("noise within tolerance", "time_ns"),
        ("Merge branch 'feature'", "util"),
    }
    assert {m.verdict for m in h.moves} == {"changed"}


def test_outside_a_repository_one_clear_message(tmp_path: Path) -> None:
    done = cli(tmp_path, "--out", str(tmp_path / "h"))
    assert done.returncode == 2
    assert "not inside a git repository" in done.stderr
    assert not (tmp_path / "h").exists()


def test_a_bad_since_names_the_option(history_repo: tuple[Path, dict[str, str]]) -> None:
    repo, _ = history_repo
    done = cli(repo, "--since", "no-such-rev", "--out", str(repo / "unused"))
    assert done.returncode == 2
    assert "--since no-such-rev: not a commit" in done.stderr
