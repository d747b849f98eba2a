"""The bench API's own layout: the modules a bench imports form no import circle."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
