"""Stale figures in the artifact folder (issue 27): a run rewrites results.json, summary.md and
index.html for the benches it ran, so a figure left from an earlier run (another bench's
folder, or a figure file a bench no longer draws) would sit in a CI artifact beside the new
ones and read as part of this run.

After the figures are drawn, :func:`remove_stale` removes

- in the folder of each bench this run drew, the top-level ``*.png`` it did not draw;
- in the folder of a bench the project has (discovered) but this run did not select, the
  ``*.png`` at its top and in ``traces/``, and the ``traces/*.json``;

and nothing else: no file of another name or place, no folder that is not a known bench's,
and a folder only once it is empty. A stale folder that keeps other files (a bench's own
tables, a user's notes) is flagged instead: :data:`FLAG` in it says that this run did not run
that bench, and is removed when a run draws the bench again. That loses no data: each
removed file is derived, a figure drawn from results (whose only record, the earlier
results.json, this run has already replaced; the values themselves are in the committed
baselines and are redrawn by running that bench), or a trace that ``--npubench-trace``
writes again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

#: the note left in a stale bench folder that still holds files not ours to remove
FLAG = "STALE-NOT-FROM-THE-LATEST-RUN.txt"


def _ours(folder: Path) -> list[Path]:
    """The files this plugin writes into a bench's folder: figures, traces, timelines."""
    files = [p for p in folder.glob("*.png") if p.is_file() and not p.is_symlink()]
    traces = folder / "traces"
    if traces.is_dir() and not traces.is_symlink():
        files += [
            p
            for p in traces.iterdir()
            if p.suffix in (".json", ".png") and p.is_file() and not p.is_symlink()
        ]
    return files


def remove_stale(
    root: Path, known: Collection[str], drawn: Mapping[str, Sequence[Path]]
) -> list[Path]:
    """Remove the stale figures under ``root`` (see the module); return what was removed,
    relative to ``root``. ``known``: every bench name of the project; ``drawn``: this run's
    benches and the figure files each drew (relative to ``root``)."""
    if not root.is_dir():
        return []
    removed: list[Path] = []
    for name, paths in drawn.items():
        folder = root / name
        if not folder.is_dir() or folder.is_symlink():
            continue
        (folder / FLAG).unlink(missing_ok=True)  # drawn again: current
        keep = {(root / p).resolve() for p in paths}
        for png in sorted(folder.glob("*.png")):
            if png.is_file() and not png.is_symlink() and png.resolve() not in keep:
                png.unlink()
                removed.append(png.relative_to(root))
    for name in sorted(set(known) - set(drawn)):
        folder = root / name
        if not folder.is_dir() or folder.is_symlink():
            continue
        for path in sorted(_ours(folder)):
            path.unlink()
            removed.append(path.relative_to(root))
        for empty in (folder / "traces", folder):
            with contextlib.suppress(OSError):  # not empty (or absent): left as it is
                empty.rmdir()
        if folder.is_dir() and any(p.name != FLAG for p in folder.iterdir()):
            (folder / FLAG).write_text(
                f"Not from the latest run: it did not run bench {name!r} (see ../results.json).\n"
                "Its figures were removed; the files left here are older, not this run's.\n",
                encoding="utf-8",
            )
    return removed
