"""``python -m pytest_npubench history [--bench B] [-k EXPR] [--metric M ...] [--since REV]
[--out DIR]``: the committed baselines' history, read from git (:mod:`.history`), written as
history.md, history.html, history.json and a figure per bench (:mod:`.history_report`).

The benches' metric declarations (gate, tolerance, direction) are those of this checkout's
bench modules (``npubench_paths`` of ``[tool.pytest.ini_options]`` in pyproject.toml, else
``benches``); the baselines folder is ``npubench_baselines`` (else ``baselines``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_npubench.bench import Metric
from pytest_npubench.discover import BenchImportError, discover
from pytest_npubench.history import HistoryError, open_repo, read_history
from pytest_npubench.history_report import write


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m pytest_npubench history",
        description="The performance history of the committed baselines, read from git: "
        "per bench, the commits that moved a gated metric beyond its tolerance, and figures "
        "of metrics over commits. Reads git only; never checks out, never writes baselines.",
    )
    p.add_argument(
        "--bench",
        action="append",
        default=[],
        metavar="B",
        help="a bench (repeatable; default: every bench with a baseline file)",
    )
    p.add_argument(
        "-k",
        dest="keyword",
        default=None,
        metavar="EXPR",
        help="configs whose id matches, pytest -k style (and, or, not, brackets)",
    )
    p.add_argument(
        "--metric",
        action="append",
        default=[],
        metavar="M",
        help="metrics to list and draw (repeatable; default: every metric, the "
        "figure draws those that moved most)",
    )
    p.add_argument(
        "--since",
        default=None,
        metavar="REV",
        help="start at the version of this commit (hash, tag, branch)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("npubench-artifacts/history"),
        metavar="DIR",
        help="where to write (default: npubench-artifacts/history)",
    )
    return p


def _ini(root: Path) -> tuple[list[str], str]:
    paths, baselines = ["benches"], "baselines"
    try:
        import tomllib
    except ImportError:  # Python 3.10: the defaults
        return paths, baselines
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return paths, baselines
    try:
        ini = tomllib.loads(pyproject.read_text()).get("tool", {}).get("pytest", {})
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return paths, baselines
    options = ini.get("ini_options", {}) if isinstance(ini, dict) else {}
    found = options.get("npubench_paths", paths)
    if isinstance(found, str):
        found = found.split()
    where = options.get("npubench_baselines", baselines)
    return [str(x) for x in found], str(where)


def keyword_matcher(expr: str | None) -> Callable[[str], bool] | None:
    """pytest's ``-k`` grammar over a config id (substring match per word)."""
    if expr is None:
        return None
    from _pytest.mark.expression import Expression

    try:
        compiled = Expression.compile(expr)
    except Exception as exc:  # pytest's ParseError: a usage error, said once
        raise HistoryError(f"-k {expr!r}: {exc}") from None

    def match(config: str) -> bool:
        def has(word: str, /, **_: str | int | bool | None) -> bool:
            return word.lower() in config.lower()

        return bool(compiled.evaluate(has))

    return match


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    try:
        repo = open_repo(Path.cwd())
    except HistoryError as exc:
        print(f"npubench history: {exc}", file=sys.stderr)
        return 2
    bench_paths, baselines = _ini(repo.root)
    try:
        select = keyword_matcher(args.keyword)
    except HistoryError as exc:
        print(f"npubench history: {exc}", file=sys.stderr)
        return 2
    declared: dict[str, dict[str, Metric] | None] = {}
    notes: list[str] = []
    try:
        found = discover([repo.root / p for p in bench_paths], repo.root)
        declared = {bench.name: dict(bench.metrics) for bench, _ in found}
    except BenchImportError as exc:
        line = str(exc).splitlines()[0]
        notes.append(
            f"the bench modules could not be imported ({line}); without their tolerances "
            "every change is listed as changed"
        )
    names = args.bench or sorted(
        {p.stem for p in (repo.root / baselines).glob("*.json")} | set(declared)
    )
    if repo.shallow:
        notes.append(
            "shallow clone: only the commits it holds are read (git fetch --unshallow for all)"
        )
    histories = []
    for name in names:
        try:
            h = read_history(
                repo,
                baselines,
                name,
                declared.get(name),
                since=args.since,
                select=select,
                only_metrics=args.metric,
            )
        except HistoryError as exc:
            print(f"npubench history: {exc}", file=sys.stderr)
            return 2
        if not h.versions:
            notes.append(f"{name}: no committed version of {h.path}")
            continue
        readable = [v for v in h.versions if v.file is not None]
        first = h.versions[0].commit
        deep = " (the oldest this shallow clone holds)" if repo.shallow else ""
        notes.append(
            f"{name}: {len(readable)} readable versions of {h.path} from {first.short} "
            f"{first.date[:10]}{deep} to {h.versions[-1].commit.short}; {len(h.moves)} metric "
            f"moves, {len(h.events)} events"
        )
        histories.append(h)
    configs_for: dict[str, list[str] | None] = {}
    if select is not None:
        configs_for = {h.bench: [c for c in h.configs() if select(c)] for h in histories}
    written = write(args.out, histories, notes, args.metric, configs_for)
    for note in notes:
        print(f"npubench history: {note}")
    print(f"npubench history: wrote {', '.join(str(p) for p in written)}")
    return 0
