"""What a bench's pytest nodes read from the session (an interface, so that the nodes do not
import the session that makes them: :mod:`~pytest_npubench.item` sits below
:mod:`~pytest_npubench.session` in the import graph)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pytest_npubench.bench import Bench


class BenchContext(Protocol):
    """The session's options and baselines as a bench's collector and items see them."""

    @property
    def regen(self) -> bool:
        """--regen-baselines: measure regen-only configs too; never fail a gate."""

    @property
    def sweep_variant(self) -> str | None:
        """--npubench-sweep-variant: one variant of a hardware sweep; measured, never gated."""

    @property
    def measure_regen_only(self) -> bool:
        """Regen-only configs are measured, not reused (--regen-baselines, or a sweep's variant
        with a -k selection)."""

    @property
    def fail_improvements(self) -> bool:
        """An improvement beyond tolerance fails (the default)."""

    @property
    def trace(self) -> bool:
        """--npubench-trace: write each config's trace."""

    @property
    def trace_limit(self) -> int:
        """--npubench-trace-limit."""

    @property
    def replay(self) -> dict[str, dict[str, str]] | None:
        """--npubench-replay: the shards' payloads per bench and config, or None."""

    def baseline_path(self, bench: Bench) -> Path:
        """The bench's baseline file."""

    def baseline_metrics(self, bench: Bench, config_id: str) -> dict[str, float] | None:
        """The baseline values of one config, or None."""

    def baseline_problem(self, bench: Bench) -> str:
        """Why the bench cannot be gated against its baseline file ('' if it can)."""

    def trace_path(self, bench: Bench, config_id: str) -> Path:
        """Where a config's trace goes."""

    def relpath(self, path: Path) -> str:
        """A path relative to the rootdir when it is inside it."""

    def replayed(self, bench: Bench, config_id: str) -> str | None:
        """The payload a shard recorded for this config (under --npubench-replay)."""
