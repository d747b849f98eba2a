"""The artifact folder: results.json, ``<bench>/*.png``, summary.md and index.html, written by the
controller (traces are written by whichever process ran their config, one file each).

Everything here is a pure function of the gathered results, so ``-n 0`` and ``-n 2`` runs write
the same bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_npubench.baseline import write_atomic
from pytest_npubench.bench import Bench
from pytest_npubench.compare import ConfigResult
from pytest_npubench.html import render_index
from pytest_npubench.report import summary_markdown

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


def results_document(benches: Sequence[BenchArtifacts]) -> str:
    """results.json: every metric of this run with its baseline, verdict and figure files."""
    data: dict[str, Any] = {"schema": RESULTS_SCHEMA, "benches": {}}
    for art in benches:
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
            "configs": {cid: r.to_json() for cid, r in art.results.items()},
            "figures": [p.as_posix() for p in art.figures],
            "notes": list(art.notes),
        }
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"


def write(
    root: Path,
    benches: Sequence[BenchArtifacts],
    problems: Sequence[str],
    regen: bool,
    trace_path: Callable[[Bench, str], Path] | None = None,
    fail_improvements: bool = True,
    not_accepted: Collection[str] = (),
) -> list[Path]:
    """Write results.json, summary.md and index.html into ``root``; return the files written."""
    results = root / "results.json"
    summary = root / "summary.md"
    index = root / "index.html"
    write_atomic(results, results_document(benches))
    rows = [(art.bench, art.results, art.figures) for art in benches]
    notes = {art.bench.name: list(art.notes) for art in benches if art.notes}
    write_atomic(summary, summary_markdown(rows, problems, regen, notes, not_accepted))

    def trace_link(bench: Bench, config_id: str) -> str | None:
        if trace_path is None:
            return None
        path = trace_path(bench, config_id)
        return _relative(path, root).as_posix() if path.is_file() else None

    write_atomic(
        index,
        render_index(rows, problems, regen, trace_link, notes, fail_improvements, not_accepted),
    )
    return [results, summary, index]
