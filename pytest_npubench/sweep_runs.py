"""A hardware sweep's variants and what each one's run came to (shared by
:mod:`pytest_npubench.sweep` and :mod:`pytest_npubench.sweep_report`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Variant:
    index: int
    values: dict[str, Any]

    @property
    def id(self) -> str:
        return f"v{self.index:02d}"

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={_label(v)}" for k, v in self.values.items())


@dataclass
class VariantRun:
    variant: Variant
    folder: Path
    exit_code: int
    wall_s: float
    output: str
    benches: dict[str, dict[str, Any]] = field(default_factory=dict)  # from its results.json


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
