"""A copy of one of the project's benches in a pytester folder: the bench module, every
``benches/_*.py`` helper it may import (helpers are never collected as benches), and its
committed baseline. One list for every test, so a bench that grows a helper module needs no
test edited."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def copy_bench(dest: Path, bench: str) -> None:
    """``benches/<bench>.py``, the ``benches/_*.py`` helpers and ``baselines/<bench>.json``
    into ``dest``."""
    (dest / "benches").mkdir(exist_ok=True)
    (dest / "baselines").mkdir(exist_ok=True)
    for path in [ROOT / "benches" / f"{bench}.py", *sorted((ROOT / "benches").glob("_*.py"))]:
        shutil.copy(path, dest / "benches" / path.name)
    shutil.copy(ROOT / "baselines" / f"{bench}.json", dest / "baselines" / f"{bench}.json")
