"""The baselines a run compares against: each bench's file loaded once, what it holds for a
config, why it cannot be used, and the hardware what-if (this run's topology against the one
the baseline was measured on)."""

from __future__ import annotations

from typing import Any

from pytest_npubench.baseline import BaselineError, BaselineFile, load, topology_diff
from pytest_npubench.bench import Bench, flat_content
from pytest_npubench.report import regen_command, unreadable_message
from pytest_npubench.state import RunState


class RunBaselines:
    """The session's view of the baseline files (loaded lazily, once per bench)."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        #: each bench's file as last read (None: missing or unusable); a regen re-reads it
        self.files: dict[str, BaselineFile | None] = {}
        self._errors: dict[str, BaselineError] = {}
        self._whatif: dict[str, list[str]] = {}

    def file(self, bench: Bench) -> BaselineFile | None:
        """The bench's baseline file (loaded once); None if missing or, under regen, unusable."""
        if bench.name not in self.files:
            try:
                self.files[bench.name] = load(self.state.baseline_path(bench), bench.name)
            except BaselineError as exc:
                self.files[bench.name] = None
                self._errors[bench.name] = exc
        return self.files[bench.name]

    def metrics(self, bench: Bench, config_id: str) -> dict[str, float] | None:
        """The baseline values of one config, or None."""
        baseline = self.file(bench)
        return None if baseline is None else baseline.metrics(config_id)

    def problem(self, bench: Bench) -> str:
        """Why the bench cannot be gated against its baseline file ('' if it can)."""
        self.file(bench)  # loads it, recording any error
        error = self._errors.get(bench.name)
        if error is None:
            return ""
        where = self.state.relpath(self.state.baseline_path(bench))
        return f"bench {bench.name!r}: {unreadable_message(bench.name, where, error)}"

    @staticmethod
    def topology_content(bench: Bench) -> dict[str, Any] | None:
        """The bench's normalised topology as flat dotted keys, or None if it gives none."""
        if bench.topology is None:
            return None
        return flat_content(bench.topology())

    def whatif_lines(self, bench: Bench) -> list[str]:
        """Lines naming how this run's hardware differs from the baseline's ([] if it does not).

        A what-if is not an error: every config is compared as usual, and the run fails until
        the new numbers are accepted with --regen-baselines (DESIGN, Baselines; ADR 0007).
        """
        if bench.name in self._whatif:
            return self._whatif[bench.name]
        state = self.state
        lines: list[str] = []
        baseline = None if state.regen else self.file(bench)
        current = state.fingerprint(bench) if baseline is not None else None
        if baseline is not None and current is not None and baseline.fingerprint != current:
            where = state.relpath(state.baseline_path(bench))
            changes = topology_diff(baseline.topology, self.topology_content(bench))
            lines.append(
                f"what-if: {where} was measured on {baseline.fingerprint}; this run uses "
                f"{current}; every config is compared against it"
            )
            if changes:
                lines.append("  changed: " + ", ".join(changes))
            else:
                lines.append("  (the baseline does not record the topology's content)")
            lines.append(f"  to accept the new numbers: {regen_command(bench.name)}")
        self._whatif[bench.name] = lines
        return lines
