"""The simulator's import graph has no circle (issue 23): every ``import`` and ``from ... import``
in ``sim/`` counts, at module level, inside a function or under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SIM = Path(__file__).resolve().parents[1] / "sim"
# sim.limits <-> sim.topology <-> sim.pe: issue 23 names it; another branch removes it
KNOWN = {frozenset({"sim.limits", "sim.pe", "sim.topology"})}


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for f in root.rglob("*.py"):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of ``root``'s package it imports (a name imported from a package
    counts as its submodule when there is one, else as the package)."""
    mods = _modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        here = m if f.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                names = [f"{base}.{a.name}" for a in node.names]
            for name in names:
                target = resolve(name)
                if target and target != m:
                    graph[m].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_simulator_has_no_import_circle() -> None:
    graph = import_graph(SIM)
    assert "sim.fabric.simulate" in graph and "sim.collectives.model" in graph
    new = [sorted(c) for c in circles(graph) if c not in KNOWN]
    assert not new, f"import circles in sim/: {new}"


def test_a_local_import_that_closes_a_circle_is_found(tmp_path: Path) -> None:
    """The check sees an import inside a function and one under TYPE_CHECKING."""
    pkg = tmp_path / "sim"
    (pkg / "fabric").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "fabric" / "__init__.py").write_text("from sim.fabric.a import f\n")
    (pkg / "fabric" / "a.py").write_text("def f():\n    from sim.fabric import b\n")
    (pkg / "fabric" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sim.fabric.a import f\n"
    )
    assert circles(import_graph(pkg)) == [frozenset({"sim.fabric.a", "sim.fabric.b"})]


LAYERS = {  # a module imports only modules listed before it (the packages' docstrings)
    "sim.fabric": (
        [
            "network",
            "program",
            "holds",
            "log",
            "one_shot",
            "scan",
            "events",
            "uncontended",
            "rotation",
            "simulate",
        ],
        {"sim.topology", "sim.oplog"},
    ),
    "sim.collectives": (
        [
            "schedule",
            "trees",
            "algorithms",
            "compile",
            "verify",
            "run",
            "metrics",
            "steps",
            "pipeline",
            "one_port",
            "bounds",
            "critical_path",
            "model",
        ],
        {"sim.fabric", "sim.topology", "sim.limits", "sim.errors", "sim.oplog"},
    ),
}


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_the_packages_import_in_layers(package: str) -> None:
    graph = import_graph(SIM)
    order, outside = LAYERS[package]
    mods = [f"{package}.{m}" for m in order]
    assert sorted(mods) == sorted(m for m in graph if m.startswith(package + ".")), package
    for at, m in enumerate(mods):
        inside = {t for t in graph[m] if t.startswith(package + ".")}
        assert inside <= set(mods[:at]), (m, sorted(inside - set(mods[:at])))
        beyond = {t for t in graph[m] if not t.startswith(package)}
        assert beyond <= outside, (m, sorted(beyond - outside))
