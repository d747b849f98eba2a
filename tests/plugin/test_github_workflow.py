"""The GitHub workflow runs what the README says and keeps artifacts when the gate fails."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _steps() -> list[dict[str, Any]]:
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "npubench.yml").read_text())
    jobs = doc["jobs"]
    assert len(jobs) == 1
    return list(next(iter(jobs.values()))["steps"])


def _readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "README starts with a bash block of the two commands"
    # each line: make the venv && install && the command itself; the command is what must run
    return [line.split("#")[0].split("&&")[-1].strip() for line in block.group(1).splitlines()]


def _index(steps: list[dict[str, Any]], needle: str) -> int:
    hits = [
        i for i, s in enumerate(steps) if needle in str(s.get("run", "")) + str(s.get("uses", ""))
    ]
    assert hits, f"no step runs {needle!r}"
    return hits[0]


def test_workflow_installs_tests_and_gates_in_order() -> None:
    """Install, then the README's test command, then the README's gated bench command."""
    steps = _steps()
    main_job, tests = _readme_commands()
    assert "--npubench all -n auto" in main_job
    install = _index(steps, "pip install -q -e '.[dev]'")
    run_tests = _index(steps, tests)
    run_benches = _index(steps, main_job)
    assert install < run_tests < run_benches


def test_summary_and_artifacts_survive_a_red_gate() -> None:
    """The summary is appended and the artifacts uploaded even when the gate fails."""
    steps = _steps()
    summary = steps[_index(steps, "GITHUB_STEP_SUMMARY")]
    upload = steps[_index(steps, "actions/upload-artifact")]
    assert "npubench-artifacts/summary.md" in summary["run"]
    assert summary["if"] == "always()" and upload["if"] == "always()"
    assert upload["with"]["path"].rstrip("/") == "npubench-artifacts"
    assert _index(steps, "--npubench all") < steps.index(summary) < steps.index(upload)


def test_ci_script_runs_the_readme_commands() -> None:
    """.ci/run runs exactly the README's test command and its main job."""
    script = (ROOT / ".ci" / "run").read_text()
    for command in _readme_commands():
        assert command in script


def test_sharded_workflow_runs_every_shard_then_merges_them_all() -> None:
    """The matrix example: N shard jobs, each uploading its folder; a merge job that needs them,
    downloads every shard and merges exactly the N folders it downloaded."""
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "npubench-sharded.yml").read_text())
    shard, merge = doc["jobs"]["shard"], doc["jobs"]["merge"]
    shards = shard["strategy"]["matrix"]["shard"]
    run = " ".join(str(s.get("run", "")) for s in shard["steps"])
    assert f"--npubench-shard=${{{{ matrix.shard }}}}/{len(shards)}" in run
    assert merge["needs"] == "shard"
    command = next(s["run"] for s in merge["steps"] if "pytest_npubench merge" in str(s.get("run")))
    folders = [w for w in command.split() if w.startswith("npubench-shard-")]
    assert folders == [f"npubench-shard-{k}" for k in shards]


def _written_folders() -> set[str]:
    """The folders the sharded example and the README's sharding commands write into."""
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "npubench-sharded.yml").read_text())
    shards = doc["jobs"]["shard"]["strategy"]["matrix"]["shard"]
    text = (ROOT / "README.md").read_text() + yaml.safe_dump(doc)
    text = text.replace("${{ matrix.shard }}", "{k}")
    folders = {"npubench-artifacts"}
    for template in re.findall(r"--npubench-artifacts=(\S+)", text):
        for k in shards:
            folders.add(template.replace("{k}", str(k)).strip("/'\"`"))
    folders.update(f"npubench-shard-{k}" for k in shards)  # the download-artifact folders
    return folders


def test_the_readmes_gitignore_lines_ignore_every_folder_the_sharded_flow_writes(
    tmp_path: Path,
) -> None:
    """A user who adds the README's .gitignore lines sees none of the shard or artifact
    folders as untracked (checked by git itself); this repository's .gitignore has them."""
    import subprocess

    block = re.search(r"```gitignore\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "the README gives the .gitignore lines for the shard folders"
    lines = block.group(1).splitlines()
    assert set(lines) <= set((ROOT / ".gitignore").read_text().splitlines())
    folders = _written_folders()
    assert {"shard-1", "shard-4", "npubench-shard-4", "npubench-artifacts"} <= folders
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("\n".join(lines) + "\n")
    for folder in folders:
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "shard.json").write_text("{}")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert status == ["?? .gitignore"], status


def test_the_heavy_tests_are_left_out_by_default_and_run_by_the_ci_script() -> None:
    """The ini deselects ``heavy``; .ci/run runs them as their own step after the README's test
    command; the README says so; and every HEAVY pattern names a test function that exists."""
    import tomllib

    sys_path_conftest = ROOT / "tests" / "conftest.py"
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert ini["addopts"] == ["-m", "not heavy"]
    script = (ROOT / ".ci" / "run").read_text()
    _, tests = _readme_commands()
    heavy = ".venv/bin/python -m pytest -n auto -m heavy"
    assert script.index(tests) < script.index(heavy)
    assert "python -m pytest -n auto -m heavy" in (ROOT / "README.md").read_text()
    namespace: dict[str, Any] = {}
    text = sys_path_conftest.read_text()
    exec(
        text[text.index("HEAVY = (") : text.index(")\n", text.index("HEAVY = ("))] + ")", namespace
    )
    for pattern in namespace["HEAVY"]:
        path, _, test = pattern.partition("::")
        files = list(ROOT.glob(path)) if test else [ROOT / pattern.split("*")[0]]
        assert files and all(f.exists() for f in files), pattern
        name = re.split(r"[\[*]", test)[0]
        assert not name or any(f"def {name}" in f.read_text() for f in files), pattern
