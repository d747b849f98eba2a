"""Every planted bug of ``tests/planted/bugs_*.py``, by name (one ``BUGS`` dict per module)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

Bug = Callable[[], None]


def all_bugs() -> dict[str, Bug]:
    found: dict[str, Bug] = {}
    for path in sorted(Path(__file__).parent.glob("bugs_*.py")):
        if path.stem == "bugs_registry":
            continue
        module = importlib.import_module(path.stem)
        for name, bug in module.BUGS.items():
            if name in found:
                raise ValueError(f"planted bug {name!r} is defined twice ({path.name})")
            found[name] = bug
    return found
