"""The bench API: a sweep as a union of groups, each with its own gate rule; and its modules
form no import circle."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from pytest_npubench import Bench, Metric, Result, Sweep

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "pytest_npubench"


def _imports(path: Path) -> set[str]:
    """Every ``pytest_npubench`` module ``path`` imports anywhere: at module level, inside a
    function, or under ``if TYPE_CHECKING`` (each of those closes a circle just the same)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "pytest_npubench":
                found.update(f"pytest_npubench.{a.name}" for a in node.names)
            elif node.module.startswith("pytest_npubench."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("pytest_npubench."))
    return found


def _graph() -> dict[str, set[str]]:
    modules = {f"pytest_npubench.{p.stem}": p for p in PLUGIN.glob("*.py") if p.stem != "__init__"}
    return {name: _imports(path) & modules.keys() for name, path in modules.items()}


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return False


def test_the_bench_api_modules_sit_in_no_import_circle() -> None:
    """bench.py, compare.py and the small modules they share import nothing that imports them
    back: no module-level, local or type-only import closes a circle through them."""
    graph = _graph()
    api = ["pytest_npubench.bench", "pytest_npubench.compare"]
    api += [m for m in ("pytest_npubench.outcome", "pytest_npubench.jsonable") if m in graph]
    circles = [
        (module, dep)
        for module in api
        for dep in sorted(graph[module])
        if _reaches(graph, dep, module)
    ]
    assert not circles, f"import circles (module, import that leads back to it): {circles}"


def test_the_bench_api_does_not_import_the_simulator() -> None:
    """The plugin's bench API is plain data: it never imports ``sim`` (the benches do)."""
    for name in ("bench", "compare", "outcome", "jsonable"):
        path = PLUGIN / f"{name}.py"
        if not path.exists():
            continue
        imported = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.append(node.module)
            elif isinstance(node, ast.Import):
                imported.extend(a.name for a in node.names)
        assert not [m for m in imported if m.split(".")[0] == "sim"], name


# --- a union of sweeps ------------------------------------------------------------------------

METRICS = {"latency_ns": Metric("ns", "lower")}


def _bench(sweep: Any, **kwargs: Any) -> Bench:
    return Bench(
        name="u",
        sweep=sweep,
        run=lambda p: Result(metrics={"latency_ns": 1.0}),
        metrics=METRICS,
        fingerprint=lambda: "hw",
        **kwargs,
    )


def _ids(bench: Bench) -> list[tuple[str, bool]]:
    return [(c.config_id, c.regen_only) for c in bench.configs]


def test_a_union_lists_each_groups_product_in_group_order() -> None:
    """A list of sweeps is their union: each group's cartesian product in turn, each config
    carrying only its own group's axes."""
    bench = _bench([{"size": [1, 2], "algo": ["ring"]}, {"collective": ["ag"], "size": [3]}])
    assert _ids(bench) == [("1-ring", False), ("2-ring", False), ("ag-3", False)]
    assert bench.config("ag-3").params == {"collective": "ag", "size": 3}
    assert [g.axes for g in bench.groups] == bench.sweep
    assert len(_bench({"size": [1]}).groups) == 1


def test_each_group_has_its_own_gated_rule() -> None:
    """``gated=`` per group: True (every config gated), False (every one regen-only) or a
    predicate; the other configs of a group are regen-only."""
    bench = _bench(
        [
            Sweep({"size": [1, 2]}, gated=lambda p: p["size"] == 2),
            Sweep({"size": [3]}, gated=False),
            Sweep({"size": [4]}, gated=True),
        ]
    )
    assert _ids(bench) == [("1", True), ("2", False), ("3", True), ("4", False)]


def test_a_single_dict_and_a_list_of_dicts_keep_the_bench_rules() -> None:
    """The old form (one dict) and plain dicts in a list use the bench's ``regen_only=``,
    ``exclude=`` and ``config_id=`` as before."""
    rules = {
        "regen_only": lambda p: p["size"] > 1,
        "exclude": lambda p: p["size"] == 2,
        "config_id": lambda p: f"s{p['size']}",
    }
    one = _bench({"size": [1, 2, 3]}, **rules)
    two = _bench([{"size": [1, 2]}, {"size": [3]}], **rules)
    assert _ids(one) == _ids(two) == [("s1", False), ("s3", True)]


def test_a_group_can_name_its_own_configs() -> None:
    """A group's ``config_id=`` names its configs; the others keep the bench's."""
    bench = _bench(
        [{"size": [1]}, Sweep({"size": [1]}, config_id=lambda p: f"ag-{p['size']}")],
        config_id=lambda p: f"ar-{p['size']}",
    )
    assert [c.config_id for c in bench.configs] == ["ar-1", "ag-1"]


@pytest.mark.parametrize(
    ("sweep", "kwargs", "message"),
    [
        ([], {}, "the sweep is empty"),
        ([{"size": [1]}, {}], {}, "sweep group 2 is empty"),
        ([{"size": [1]}, {"size": []}], {}, "sweep group 2: sweep parameter 'size' has no values"),
        ([{"size": [1]}, "size"], {}, "sweep group 2 must be a dict of parameter lists or a"),
        (
            [{"size": [1, 2]}, {"size": [2]}],
            {},
            "config ids must be unique, but '2' is the id of both .* \\(sweep groups 1 and 2\\)",
        ),
        (
            [Sweep({"size": [1]}, gated=True)],
            {"regen_only": lambda p: False},
            "give the gate rule once",
        ),
        ([Sweep({"size": [1]}, gated="yes")], {}, "gated= must be True, False or a predicate"),
    ],
)
def test_bad_unions_fail_when_built(sweep: Any, kwargs: dict[str, Any], message: str) -> None:
    """An empty union or group, a bad group, two groups with one config, and a gate rule given
    twice (per group and per bench) each fail at the line that builds the bench."""
    with pytest.raises((ValueError, TypeError), match=message):
        _bench(sweep, **kwargs)


def test_the_tutorials_union_example_builds_the_configs_it_names() -> None:
    """docs/writing-a-bench.md's union-of-sweeps example is real code: built, it lists the
    configs and gated set its last comment names."""
    import re

    text = (ROOT / "docs" / "writing-a-bench.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "Sweep(" in b)
    namespace: dict[str, Any] = {
        "run": lambda p: Result(metrics={"latency_ns": 1.0}),
        "METRICS": METRICS,
        "TOPOLOGY": type("Topology", (), {"fingerprint": "hw"})(),
    }
    exec(block, namespace)
    assert _ids(namespace["BENCH"]) == [
        ("65536el", False),
        ("1048576el", True),
        ("16777216el", True),
        ("relu-65536el", False),
    ]
    assert "65536el (gated), 1048576el, 16777216el (regen-only), relu-65536el (gated)" in block
