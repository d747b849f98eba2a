"""The import graph of both packages (issue 23, docs/architecture.md): no circle in ``sim`` or
``pytest_npubench``, ``sim`` imports neither pytest nor the plugin, and the packages of ``sim``
import in the layers docs/architecture.md draws.

Every import counts: module level, inside functions, and under ``if TYPE_CHECKING:`` (a
type-only import that closes a circle still ties the modules together). The graph is built
from the source with ``ast``, so nothing is imported to check it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pytest_npubench", "sim")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(package: str, root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every module of the package."""
    return {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}


def imported(path: Path, name: str) -> Iterator[str]:
    """What ``path`` (module ``name``) imports, wherever the statement is: for ``from a
    import b`` both ``a.b`` and ``a`` (the caller keeps the one that is a module)."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join([*base, module] if module else base)
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def graph(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the package's modules it imports. ``from a import b`` is an edge to the
    module ``a.b`` when there is one (a submodule), else to ``a`` (a name defined there)."""
    found = modules(package, root)
    edges: dict[str, set[str]] = {}
    for name, path in found.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets |= _targets(node, name, path.name == "__init__.py", found)
        edges[name] = targets - {name}
    return edges


def _targets(node: ast.AST, name: str, is_package: bool, found: dict[str, Path]) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in found}
    if not isinstance(node, ast.ImportFrom):
        return set()
    module = node.module or ""
    if node.level:
        base = name.split(".")
        base = base[: len(base) - node.level + (1 if is_package else 0)]
        module = ".".join([*base, module] if module else base)
    targets = set()
    for alias in node.names:
        sub = f"{module}.{alias.name}"
        targets.add(sub if sub in found else module)
    return targets & set(found)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The checker itself: a circle closed by a function-level import and one closed under
    TYPE_CHECKING are both found; a package without circles has none."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg.e import y\n")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.a import x\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import d\n"
    )
    (pkg / "d.py").write_text("import pkg.c\n")
    (pkg / "e.py").write_text("from pkg import a\n")  # a submodule: no edge to __init__
    assert cycles(graph("pkg", tmp_path)) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]
    (pkg / "e.py").write_text("from pkg import y\n")  # a name of __init__: an edge to it
    assert ["pkg", "pkg.e"] in cycles(graph("pkg", tmp_path))


def test_the_plugin_has_no_import_circle() -> None:
    """No module of pytest_npubench imports, however indirectly, one that imports it back."""
    assert cycles(graph("pytest_npubench")) == []


def test_the_simulator_has_no_import_circle() -> None:
    found = graph("sim")
    assert "sim.fabric.simulate" in found and "sim.collectives.model" in found
    assert "sim.gemm.program" in found["sim.gemm.model"]
    assert cycles(found) == []


def test_sim_imports_neither_pytest_nor_the_plugin() -> None:
    """The simulator stands alone: no module of sim imports pytest or pytest_npubench."""
    bad = [
        (name, target)
        for name, path in modules("sim").items()
        for target in imported(path, name)
        if target.split(".")[0] in ("pytest", "pytest_npubench", "_pytest")
    ]
    assert bad == []


def test_the_plugin_imports_nothing_of_the_simulator() -> None:
    """The plugin knows pytest, benches, baselines and artifacts, never ``sim`` (the benches
    join the two)."""
    bad = [
        (name, target)
        for name, path in modules("pytest_npubench").items()
        for target in imported(path, name)
        if target.split(".")[0] == "sim"
    ]
    assert bad == []


def test_the_leaves_import_nothing_from_sim() -> None:
    """``sim.units``, ``sim.errors`` and ``sim.pe`` sit below ``sim.topology``: the loader
    converts and checks with them, so they may not read a topology back."""
    found = graph("sim")
    assert found["sim.units"] == set()
    assert found["sim.errors"] == set()
    assert found["sim.pe"] <= {"sim.systolic", "sim.errors"}
    assert "sim.topology" not in found["sim.limits"]


def test_the_single_chip_gemm_reads_nothing_multi_chip() -> None:
    """``sim.gemm`` sits below the tensor-parallel layer: it imports neither ``sim.tp`` nor
    the fabric or the collectives (a planted ``from sim.tp.config import ...`` fails here)."""
    multi_chip = ("sim.tp", "sim.fabric", "sim.collectives")
    gemm = {m: d for m, d in graph("sim").items() if m == "sim.gemm" or m.startswith("sim.gemm.")}
    assert len(gemm) >= 10
    wrong = {m: sorted(t for t in deps if t.startswith(multi_chip)) for m, deps in gemm.items()}
    assert {m: d for m, d in wrong.items() if d} == {}


LAYERS = {  # a module imports only modules listed before it (the packages' docstrings)
    "sim.topology": (
        [
            "system",
            "sections",
            "checks",
            "dimensions_schema",
            "collectives_schema",
            "energy_schema",
            "schema",
            "overrides",
            "loader",
        ],
        {"sim.errors", "sim.inputfile", "sim.limits", "sim.pe", "sim.systolic", "sim.units"},
    ),
    "sim.core": (
        ["ops", "writer", "periodic", "reference"],
        {"sim.errors", "sim.limits", "sim.oplog"},
    ),
    "sim.fabric": (
        [
            "dimensions",
            "network",
            "program",
            "switch_ops",
            "holds",
            "log",
            "one_shot",
            "scan",
            "periodic",
            "events",
            "uncontended",
            "rotation",
            "simulate",
            "symmetry",
            "ring_quotient",
            "quotient",
        ],
        {"sim.topology", "sim.oplog", "sim.units", "sim.limits", "sim.errors"},
    ),
    "sim.collectives": (
        [
            "depcheck",
            "schedule",
            "trees",
            "channels",
            "nvls",
            "hierarchical",
            "algorithms",
            "gather",
            "alltoall",
            "rooted",
            "sendrecv",
            "catalog",
            "compile",
            "nvls_program",
            "lockstep",
            "verify",
            "races",
            "budget",
            "protocols",
            "run",
            "fast",
            "fast_direct",
            "orbit",
            "fast_orbit",
            "fast_product",
            "calls",
            "metrics",
            "steps",
            "pipeline",
            "one_port",
            "nvls_model",
            "per_dimension",
            "bounds",
            "bounds_more",
            "critical_path",
            "model",
            "model_more",
        ],
        {"sim.fabric", "sim.topology", "sim.limits", "sim.errors", "sim.oplog", "sim.units"},
    ),
    "sim.energy": (
        ["model", "counts", "metrics"],
        {
            *("sim.topology", "sim.topology.energy_schema", "sim.collectives"),
            *("sim.collectives.fast", "sim.fabric", "sim.gemm.program", "sim.gemm.run"),
            *("sim.tp.config", "sim.tp.cosim", "sim.tp.curve", "sim.tp.run"),
        },
    ),
    "sim.calibrate": (
        ["files", "bands", "nccltests", "yamlkeys", "evaluate", "fit", "report", "cli"],
        {"sim.topology", "sim.collectives", "sim.errors", "sim.inputfile"},
    ),
}


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_the_packages_import_in_layers(package: str) -> None:
    found = graph("sim")
    order, outside = LAYERS[package]
    mods = [f"{package}.{m}" for m in order]
    assert sorted(mods) == sorted(m for m in found if m.startswith(package + ".")), package
    for at, m in enumerate(mods):
        inside = {t for t in found[m] if t.startswith(package + ".")}
        assert inside <= set(mods[:at]), (m, sorted(inside - set(mods[:at])))
        beyond = {t for t in found[m] if not t.startswith(package)}
        assert beyond <= outside, (m, sorted(beyond - outside))


#: docs/architecture.md's table "The simulator": what each module or package of sim may import
ALLOWED = {
    "sim.units": set(),
    "sim.errors": set(),
    "sim.limits": {"errors"},
    "sim.inputfile": {"errors"},
    "sim.systolic": {"errors", "limits"},
    "sim.scalesim_files": {"systolic", "inputfile", "limits"},
    "sim.pe": {"systolic"},
    "sim.topology": {"errors", "inputfile", "limits", "pe", "systolic", "units"},
    "sim.hbm": {"topology"},
    "sim.oplog": {"limits"},
    "sim.core": {"oplog", "limits", "errors"},
    "sim.program": {"core", "hbm", "oplog", "topology", "units"},
    "sim.gemm": {"core", "hbm", "oplog", "limits", "topology", "units", "pe", "errors"},
    "sim.fabric": {"topology", "oplog", "units", "limits", "errors"},
    "sim.collectives": {"fabric", "topology", "limits", "errors", "oplog", "units"},
    "sim.tp": {
        *("gemm", "fabric", "collectives", "core", "hbm"),
        *("oplog", "topology", "units", "errors"),
    },
    "sim.energy": {"topology", "collectives", "fabric", "gemm", "tp"},
    "sim.trace": {"oplog"},
    "sim.calibrate": {"topology", "collectives", "errors", "inputfile"},
    "sim.__main__": {"calibrate", "errors", "gemm", "scalesim_files", "systolic", "topology"},
}


def test_each_part_of_sim_imports_only_what_the_architecture_page_allows() -> None:
    """Every module (or package) of sim but its ``__init__`` against docs/architecture.md's
    table; a new module, or a new import between parts, changes the page in the same commit."""
    found: dict[str, set[str]] = {}
    for module, targets in graph("sim").items():
        if module == "sim":
            continue
        part = ".".join(module.split(".")[:2])
        found.setdefault(part, set()).update(
            ".".join(t.split(".")[:2])[4:]
            for t in targets
            if not (t == part or t.startswith(part + "."))
        )
    assert sorted(found) == sorted(ALLOWED), "a part of sim the page does not list"
    extra = {part: sorted(found[part] - ALLOWED[part]) for part in ALLOWED}
    assert {part: deps for part, deps in extra.items() if deps} == {}
