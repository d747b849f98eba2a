"""What the plugin tells a user who has not asked for a bench: the project's benches at the end
of ``pytest --help``, and the command that runs a bench when a bench module or folder was given
as a test path (``pytest benches/gemm.py`` collects nothing: a bench module has no tests)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_npubench.discover import bench_files, discover
from pytest_npubench.state import _bench_paths as bench_paths


def _shown(path: Path, config: pytest.Config) -> str:
    try:
        return path.resolve().relative_to(config.rootpath.resolve()).as_posix()
    except ValueError:
        return str(path)


def _names(files: Sequence[Path], config: pytest.Config) -> list[str] | None:
    """The bench names the files define (None if one does not import)."""
    try:
        found = discover(files, config.rootpath)
    except Exception:  # a broken bench module must not break --help or a plain run
        return None
    return sorted({bench.name for bench, _ in found})


def help_lines(config: pytest.Config) -> list[str]:
    """The lines ``pytest --help`` ends with: the benches of the ini's bench paths."""
    paths = bench_paths(config)
    where = ", ".join(_shown(p, config) for p in paths)
    names = _names(paths, config)
    if names is None:
        return [
            "pytest-npubench: benches in this project: could not import them "
            f"(npubench_paths: {where}); pytest --npubench all shows why"
        ]
    if not names:
        return [f"pytest-npubench: no benches in this project (npubench_paths: {where})"]
    return [
        f"pytest-npubench: benches in this project (npubench_paths: {where}): {', '.join(names)}",
        f"  run one: pytest --npubench {names[0]}; all of them: pytest --npubench all",
    ]


def _given_paths(config: pytest.Config) -> list[Path]:
    """The paths on the command line (``file.py::test`` cut to the file)."""
    base = config.invocation_params.dir
    return [(base / arg.split("::")[0]).resolve() for arg in config.args]


def _within(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def collection_hint(config: pytest.Config) -> list[str]:
    """For a plain run given bench modules or folders as test paths: how to run those benches."""
    roots = [p.resolve() for p in bench_paths(config)]
    lines: list[str] = []
    for given in _given_paths(config):
        if not _within(given, roots):
            continue
        files = [f for f in bench_files(roots) if _within(f.resolve(), [given])]
        if not files:
            continue
        names = _names(files, config) or sorted(f.stem for f in files)
        command = f"pytest --npubench {','.join(names)}"
        shown = _shown(given, config)
        if given.is_dir():
            lines.append(f"npubench: {shown} holds bench modules, not tests; run the benches:")
        else:
            lines.append(f"npubench: {shown} is a bench module, not a test file; run its bench:")
        lines.append(f"  {command}   (every bench: pytest --npubench all)")
    return lines
