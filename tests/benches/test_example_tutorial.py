"""docs/writing-a-bench.md, run as a user would: the example bench's whole life cycle.

The page's ``$`` commands run exactly as written, in order, from a copy of the repository's
root, so the tutorial cannot rot: if a step in the text stops working, this test fails.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "elementwise"
TUTORIAL = ROOT / "docs" / "writing-a-bench.md"


#: what each ``$`` command of the page must do, in the page's order: the exit status (the page
#: says the new bench fails, the regen creates the baseline, the slower kernel fails, the regen
#: accepts it) and a line its output must hold
EXPECTED = [
    ("cd examples/elementwise", None, ""),
    ("pytest --npubench elementwise", 1, "*has no entry for this config; create it with:*"),
    ("pytest --npubench elementwise --regen-baselines", 0, "*wrote baselines/elementwise.json*"),
    ("pytest --npubench elementwise", 1, "*latency_ns*regression*"),
    ("pytest --npubench elementwise --regen-baselines", 0, "*wrote baselines/elementwise.json*"),
]


def _page_steps() -> list[tuple[str, str]]:
    """(section text, command) for every ``$`` line of the page's code blocks, in order."""
    text = TUTORIAL.read_text()
    steps = []
    for section in re.split(r"^## ", text, flags=re.M):
        for block in re.findall(r"^```[a-z]*\n(.*?)^```", section, re.S | re.M):
            steps.extend(
                (section, line[2:]) for line in block.splitlines() if line.startswith("$ ")
            )
    return steps


def test_tutorial_commands_are_the_ones_tested() -> None:
    """Every command of the page is one the life-cycle test runs, in the same order."""
    assert [command for _, command in _page_steps()] == [c for c, _, _ in EXPECTED]


def test_the_keys_the_page_names_are_the_topologys() -> None:
    """``TOPOLOGY.x.y`` on the page is an attribute of the example's topology, and every dotted
    YAML key it names (``fetch.fetch_gbs``) is a key of npu-1h.yaml."""
    import yaml

    from sim import load_topology

    text = TUTORIAL.read_text()
    topology = load_topology("npu-1h")
    attributes = set(re.findall(r"`TOPOLOGY\.([\w.]+)`", text))
    assert {"fetch.bw", "bpe"} <= attributes
    for dotted in attributes:
        value: object = topology
        for part in dotted.split("."):
            value = getattr(value, part)
    data = yaml.safe_load((ROOT / "sim" / "topologies" / "npu-1h.yaml").read_text())
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    spans = re.findall(r"`([^`]+)`", prose)
    keys = {k for span in spans for k in re.findall(r"(?<![\w.])([a-z]+\.[a-z_]+)(?![\w.(])", span)}
    named = {k for k in keys if k.split(".")[0] in data and isinstance(data[k.split(".")[0]], dict)}
    assert {"fetch.fetch_gbs", "dma.setup_ns", "pe.stage_ns"} <= named
    for key in named:
        section, name = key.split(".")
        assert name in data[section], f"the page names {key}, not a key of npu-1h.yaml"


def test_tutorial_life_cycle_from_the_repository_root(tmp_path: Path) -> None:
    """The page's commands, exactly as written, from a copy of the repository's root (its
    pyproject.toml, the example folder): new bench -> fails asking for a baseline -> regen
    creates it -> the page's slower kernel (its "Change `X` to `Y`") fails with the table ->
    regen accepts it -> passes. Nothing but the baselines and artifacts is left behind."""
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE, root / "examples" / "elementwise")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    for leftover in ("baselines", "npubench-artifacts"):
        shutil.rmtree(root / "examples" / "elementwise" / leftover, ignore_errors=True)
    cwd = root
    for (section, command), (expected, status, line) in zip(_page_steps(), EXPECTED, strict=True):
        assert command == expected
        for old, new in re.findall(r"Change `([^`]+)` to `([^`]+)`", section):
            bench = cwd / "benches" / "elementwise.py"
            assert old in bench.read_text(), f"the page changes {old!r}, not in the example"
            bench.write_text(bench.read_text().replace(old, new))
        words = shlex.split(command)
        if words[0] == "cd":
            cwd = cwd / words[1]
            assert cwd.is_dir(), command
            continue
        assert words[0] == "pytest", command
        done = subprocess.run(
            [sys.executable, "-m", *words], cwd=cwd, capture_output=True, text=True, timeout=120
        )
        out = done.stdout + done.stderr
        assert done.returncode == status, f"$ {command}\n{out}"
        assert fnmatch.fnmatch(out.replace("\n", " "), line), f"$ {command}\n{out}"
    again = subprocess.run(
        [sys.executable, "-m", "pytest", "--npubench", "elementwise"], cwd=cwd, timeout=120
    )
    assert again.returncode == 0  # the accepted change passes ("commit the diff")
    baseline = json.loads((cwd / "baselines" / "elementwise.json").read_text())
    assert sorted(baseline["configs"]) == ["1048576el", "65536el"]
    left = {p.name for p in cwd.iterdir()} - {"benches", "pytest.ini"}
    assert left <= {"baselines", "npubench-artifacts", ".pytest_cache"}, left
    assert [p.name for p in (cwd / "baselines").iterdir()] == ["elementwise.json"]
