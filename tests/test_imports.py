"""sim's modules import each other without a circle, counting every import: module level,
inside a function and under ``TYPE_CHECKING`` (a local or type-only import that closes a
circle is still a circle: the two modules cannot be read, or moved, one without the other)."""

from __future__ import annotations

import ast
from pathlib import Path

SIM = Path(__file__).resolve().parent.parent / "sim"

#: known, reported, owned elsewhere: ``sim.limits`` checks ``isinstance(topo, Topology)``
#: (a function-level import) while ``sim.topology`` reads the ceilings of ``sim.limits``
KNOWN = {("sim.limits", "sim.topology")}


def _modules(package: Path) -> dict[str, Path]:
    mods = {}
    for f in sorted(package.rglob("*.py")):
        parts = list(f.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f
    return mods


def import_graph(package: Path = SIM) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its text (the deepest module
    each imported name resolves to; ``from sim.a import b`` of a submodule ``b`` counts
    ``sim.a`` and ``sim.a.b``). The parent packages Python imports on the way are not
    counted: ``sim/__init__.py`` re-exports from every layer, by design."""
    mods = _modules(package)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, base] if base else up)
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            for name in names:
                target = resolve(name)
                if target is not None and target != mod:
                    graph[mod].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_finder_sees_a_circle_closed_by_a_type_only_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_graph_counts_function_level_and_type_checking_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg.b import g\n    return g\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import c\n"
    )
    (pkg / "sub" / "c.py").write_text("from ..a import f\nimport os\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.b"}  # a function-level import
    assert graph["pkg.b"] == {"pkg.sub", "pkg.sub.c"}  # type-only: the package, its submodule
    assert graph["pkg.sub.c"] == {"pkg.a"}  # a relative import; os is not the package's
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
    assert "sim.gemm.program" in import_graph()["sim.gemm.model"]


def test_sim_has_no_import_circle() -> None:
    graph = import_graph()
    for a, b in KNOWN:
        graph[a].discard(b)
    assert circles(graph) == []


def test_the_leaves_import_nothing_from_sim() -> None:
    """``sim.units`` and ``sim.pe`` sit below ``sim.topology``: the loader converts and checks
    with them, so they may not read a topology back."""
    graph = import_graph()
    assert graph["sim.units"] == set()
    assert graph["sim.pe"] <= {"sim.systolic", "sim.errors"}


def test_the_single_chip_gemm_reads_nothing_multi_chip() -> None:
    """``sim.gemm`` sits below the tensor-parallel layer: it imports neither ``sim.tp`` nor
    the fabric or the collectives (a planted ``from sim.tp.config import ...`` fails here)."""
    graph = import_graph()
    multi_chip = ("sim.tp", "sim.fabric", "sim.collectives", "sim.kernels", "sim.model")
    gemm = {m: deps for m, deps in graph.items() if m == "sim.gemm" or m.startswith("sim.gemm.")}
    assert len(gemm) >= 10
    wrong = {m: sorted(d for d in deps if d.startswith(multi_chip)) for m, deps in gemm.items()}
    assert {m: d for m, d in wrong.items() if d} == {}
