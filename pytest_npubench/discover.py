"""Finding benches: import the modules of the bench paths and pick their module-level Benches."""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType, TracebackType

from pytest_npubench.bench import Bench

_PLUGIN_DIR = str(Path(__file__).parent) + os.sep


class BenchImportError(Exception):
    """A bench module failed to import; the message names the file and shows the user's error."""


def bench_files(paths: Iterable[Path]) -> list[Path]:
    """The bench modules of the configured paths: ``*.py`` files not starting with ``_``."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.glob("*.py") if not p.name.startswith("_")))
        elif path.suffix == ".py" and path.is_file():
            files.append(path)
    return files


def module_name(path: Path, rootpath: Path) -> str:
    """A stable module name: the dotted path from the rootdir (``benches.gemm``) when possible."""
    try:
        parts = path.with_suffix("").resolve().relative_to(rootpath.resolve()).parts
    except ValueError:
        parts = ("npubench_benches", path.stem)
    if not all(part.isidentifier() for part in parts):
        parts = ("npubench_benches", "_".join(p for p in parts if p).replace("-", "_"))
    return ".".join(parts)


def import_bench_module(path: Path, rootpath: Path) -> ModuleType:
    """Import one bench module (reusing it if already imported from the same file)."""
    name = module_name(path, rootpath)
    shown = _shown(path, rootpath)
    loaded = sys.modules.get(name)
    if loaded is not None and Path(getattr(loaded, "__file__", "") or "") == path:
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise BenchImportError(f"cannot import bench module {shown}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        if _is_input_error(exc):  # a library's message about the user's input: it, once
            raise BenchImportError(f"{exc}\n(while importing {shown}{_line(exc, path)})") from None
        raise BenchImportError(
            f"cannot import bench module {shown}:\n{_user_traceback(exc, path)}"
        ) from None
    return module


def _is_input_error(exc: BaseException) -> bool:
    """A library's own ``ValueError`` subclass (e.g. ``sim.TopologyError`` for a bad
    ``NPUBENCH_TOPOLOGY``) says what is wrong with a value and how to fix it; its traceback
    would only bury that. Builtin exceptions (bugs, the Bench checks) keep their traceback."""
    return isinstance(exc, ValueError) and type(exc).__module__ != "builtins"


def _line(exc: BaseException, path: Path) -> str:
    tb = exc.__traceback__
    lines = []
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename) == path:
            lines.append(tb.tb_lineno)
        tb = tb.tb_next
    return f", line {lines[-1]}" if lines else ""


def _shown(path: Path, rootpath: Path) -> str:
    try:
        return path.relative_to(rootpath).as_posix()
    except ValueError:
        return str(path)


def _user_traceback(exc: BaseException, path: Path) -> str:
    """The traceback from the bench module's own frame on, without the import machinery and
    without the plugin's validation code (its message says what is wrong)."""
    tb: TracebackType | None = exc.__traceback__
    while tb is not None and Path(tb.tb_frame.f_code.co_filename) != path:
        tb = tb.tb_next
    if tb is None:
        return "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
    report = traceback.TracebackException(type(exc), exc, tb)
    report.stack = traceback.StackSummary.from_list(
        [frame for frame in report.stack if _is_user_frame(frame.filename)]
    )
    return "".join(report.format()).rstrip()


def _is_user_frame(filename: str) -> bool:
    return not (filename.startswith(_PLUGIN_DIR) or filename.startswith("<"))


def benches_in(module: ModuleType) -> list[Bench]:
    """The module-level Bench instances of a module, in definition order, each once."""
    found: list[Bench] = []
    for value in vars(module).values():
        if isinstance(value, Bench) and all(value is not b for b in found):
            found.append(value)
    return found


def discover(paths: Sequence[Path], rootpath: Path) -> list[tuple[Bench, Path]]:
    """Every bench of every bench module under ``paths``, with the file that defines it."""
    return [
        (bench, path)
        for path in bench_files(paths)
        for bench in benches_in(import_bench_module(path, rootpath))
    ]
