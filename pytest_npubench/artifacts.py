"""The artifact folder: results.json, ``<bench>/*.png``, summary.md and index.html, written by the
controller (traces are written by whichever process ran their config, one file each).

Everything here is a pure function of the gathered results, so ``-n 0`` and ``-n 2`` runs write
the same bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_npubench import indented
from pytest_npubench.baseline import write_atomic
from pytest_npubench.bench import Bench
from pytest_npubench.compare import ConfigResult
from pytest_npubench.html import render_index
from pytest_npubench.markdown import summary_markdown
from pytest_npubench.shard import canonical_args

RESULTS_SCHEMA = 1


@dataclass
class BenchArtifacts:
    """What the artifact files say about one bench."""

    bench: Bench
    results: Mapping[str, ConfigResult]
    fingerprint: str | None
    baseline_file: str
    figures: Sequence[Path] = ()
    notes: Sequence[str] = ()
    topology: Mapping[str, Any] | None = None


def artifact_name(config_id: str, suffix: str, most: int = 80) -> str:
    """A file name for one config's artifact: readable, bounded, and unique per config id."""
    safe = "".join(
        ch if ch.isascii() and (ch.isalnum() or ch in "._-") else "_" for ch in config_id
    )
    digest = hashlib.sha256(config_id.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{safe[:most].lstrip('.') or 'config'}-{digest}{suffix}"


def figure_inputs(results: Mapping[str, ConfigResult]) -> dict[str, ConfigResult]:
    """The results a figures function sees: every config that has metric values."""
    return {cid: r for cid, r in results.items() if r.metrics}


@contextlib.contextmanager
def reproducible_matplotlib() -> Iterator[None]:
    """Agg backend, the rc file's settings, and no timestamps in saved files; figures closed."""
    import matplotlib

    matplotlib.use("Agg")
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = epoch or "0"
    try:
        with matplotlib.rc_context():
            matplotlib.rc_file_defaults()
            yield
    finally:
        if epoch is None:
            del os.environ["SOURCE_DATE_EPOCH"]
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            pyplot.close("all")


def draw(
    draw_fn: Callable[[], Sequence[Sequence[Path]]], outdir: Path, root: Path, use_mpl: bool
) -> list[Path]:
    """Call the figure hook for one bench; return the files, relative to the artifact root."""
    outdir.mkdir(parents=True, exist_ok=True)
    with reproducible_matplotlib() if use_mpl else contextlib.nullcontext():
        drawn = draw_fn()
    paths: list[Path] = []
    for group in drawn:
        if isinstance(group, (str, Path)) or not all(isinstance(p, (str, Path)) for p in group):
            raise TypeError(f"a figures function must return a list of paths, got {group!r}")
        paths.extend(_relative(Path(p), root) for p in group)
    return paths


def _relative(path: Path, root: Path) -> Path:
    path = path if path.is_absolute() else root / path
    try:
        return path.resolve().relative_to(root.resolve())
    except ValueError:
        return path


def natural_key(text: str) -> list[Any]:
    """Sort key that orders numbers inside ids by value: 1KiB < 4KiB < 16KiB."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in _DIGITS.split(text)]


_DIGITS = re.compile(r"(\d+)")


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(v) for v in value]
    return value


def run_metadata(
    args: Sequence[str], rootdir: Path, invocation: str | None = None
) -> dict[str, Any]:
    """What produced a results.json: the command (without options that say how or where it ran,
    so -n 0, -n 2, sharded and merged runs agree on it), the invocation as typed (``-n auto``,
    shards and artifact folders included: ADR 0030), the git commit if any, and the versions
    that matter."""
    return {
        "command": "pytest " + shlex.join(canonical_args(args)),
        "invocation": invocation if invocation is not None else "pytest " + shlex.join(args),
        "commit": _git_commit(rootdir),
        "versions": {
            "pytest-npubench": _version("pytest-npubench"),
            "pytest": _version("pytest"),
            "numpy": _version("numpy"),
            "python": platform.python_version(),
        },
    }


def _git_commit(rootdir: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=rootdir,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def results_document(
    benches: Sequence[BenchArtifacts], run: Mapping[str, Any] | None = None
) -> str:
    """results.json: the run's metadata, then per bench every config (ids in natural order)
    with its params, metrics, baseline values, verdict, and the bench's metric spec and
    figure files."""
    data: dict[str, Any] = {"schema": RESULTS_SCHEMA, "run": dict(run or {}), "benches": {}}
    for art in benches:
        configs = {cid: _sorted_keys(r.to_json()) for cid, r in art.results.items()}
        data["benches"][art.bench.name] = {
            "baseline_file": art.baseline_file,
            "fingerprint": art.fingerprint,
            "metrics": {
                name: {
                    "unit": m.unit,
                    "direction": m.direction,
                    "tolerance": m.tolerance,
                    "gate": m.gate,
                }
                for name, m in art.bench.metrics.items()
            },
            "figures": [p.as_posix() for p in art.figures],
            "notes": list(art.notes),
            "topology": art.topology,
        }
        entry = _sorted_keys(data["benches"][art.bench.name])
        entry["configs"] = {cid: configs[cid] for cid in sorted(configs, key=natural_key)}
        data["benches"][art.bench.name] = entry
    data["run"] = _sorted_keys(data["run"])
    return indented.dumps(data, indent=2) + "\n"  # json.dumps(indent=2), byte for byte


def write(
    root: Path,
    benches: Sequence[BenchArtifacts],
    problems: Sequence[str],
    regen: bool,
    trace_path: Callable[[Bench, str], Path] | None = None,
    fail_improvements: bool = True,
    not_accepted: Collection[str] = (),
    run: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write results.json, summary.md and index.html into ``root``; return the files written.
    A ``run`` that says ``interrupted`` marks all three as partial."""
    results = root / "results.json"
    summary = root / "summary.md"
    index = root / "index.html"
    write_atomic(results, results_document(benches, run))
    rows = [(art.bench, art.results, art.figures) for art in benches]
    notes = {art.bench.name: list(art.notes) for art in benches if art.notes}
    interrupted = bool((run or {}).get("interrupted"))
    write_atomic(
        summary,
        summary_markdown(
            rows, problems, regen, notes, not_accepted, interrupted, fail_improvements
        ),
    )

    drawn: set[str] = set()

    def trace_link(bench: Bench, config_id: str) -> str | None:
        if trace_path is None:
            return None
        path = trace_path(bench, config_id)
        if not path.is_file():
            return None
        link = _relative(path, root).as_posix()
        if path.with_suffix(".png").is_file():
            drawn.add(link)
        return link

    for art in benches:  # find the drawn timelines before the page is rendered
        for cid in art.results:
            trace_link(art.bench, cid)

    write_atomic(
        index,
        render_index(
            rows,
            problems,
            regen,
            trace_link,
            notes,
            fail_improvements,
            not_accepted,
            interrupted=interrupted,
        ),
    )
    return [results, summary, index]
