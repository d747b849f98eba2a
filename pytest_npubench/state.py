"""The plugin's state for one pytest session: options, paths, benches, gathered results, errors.

One instance lives in every process (controller and xdist workers): the
:class:`~pytest_npubench.session.NpubenchSession` that wires the hooks. The modules that do the
work (collection, baselines, regen, figures, artifacts, terminal) each hold a reference to it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_npubench.artifacts import artifact_name
from pytest_npubench.baseline import RegenReport
from pytest_npubench.bench import Bench
from pytest_npubench.compare import ConfigResult
from pytest_npubench.item import bench_traceback
from pytest_npubench.shard import Shard


class RunState:
    """What one session knows: its options and paths, the selected benches and their results,
    and the problems found on the way (listed at the end, they fail the run)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        option = config.option
        self.names: tuple[str, ...] | None = option.npubench
        self.regen: bool = option.npubench_regen
        self.sweep_variant: str | None = option.npubench_sweep_variant
        #: a reused baseline is other hardware's numbers in a sweep: -k selects heavy configs
        self.measure_regen_only: bool = self.regen or (
            self.sweep_variant is not None and bool(option.keyword)
        )
        allow = option.npubench_allow_improvements or bool(
            config.getini("npubench_allow_improvements")
        )
        #: An improvement beyond tolerance fails unless allowed (ADR 0007): left unaccepted,
        #: it would hide a later regression of the same size.
        self.fail_improvements: bool = option.npubench_strict or not allow
        self.prune: bool = option.npubench_prune
        self.is_worker = hasattr(config, "workerinput")
        self.bench_paths = _bench_paths(config)
        self.baselines_dir = _ini_dir(config, str(config.getini("npubench_baselines")))
        self.artifacts_dir: Path = option.npubench_artifacts or (
            config.rootpath / "npubench-artifacts"
        )
        self.shard: Shard | None = option.npubench_shard
        self.replay: dict[str, dict[str, str]] | None = None
        self.trace: bool = option.npubench_trace
        self.trace_limit: int = option.npubench_trace_limit
        self.benches: list[Bench] = []
        self.sources: dict[Bench, Path] = {}
        self.results: dict[str, dict[str, ConfigResult]] = {}
        self.regen_reports: list[RegenReport] = []
        self.problems: list[tuple[str, str]] = []
        self.artifact_files: list[Path] = []
        self.not_accepted: set[str] = set()  # benches whose regen could not write
        self.interrupted = False  # the run was stopped (Ctrl-C) before it ended

    # -- paths ------------------------------------------------------------------------------

    def baseline_path(self, bench: Bench) -> Path:
        """``<npubench_baselines>/<bench>.json``."""
        return self.baselines_dir / f"{bench.name}.json"

    def trace_path(self, bench: Bench, config_id: str) -> Path:
        """``<artifacts>/<bench>/traces/<id>-<hash>.json``: the id with unsafe characters as
        ``_``, cut to 80 characters, then a hash of the full id (so ``a/b`` and ``a_b`` differ
        and no name is too long for the file system)."""
        return self.artifacts_dir / bench.name / "traces" / artifact_name(config_id, ".json")

    def relpath(self, path: Path) -> str:
        """A path relative to the rootdir when it is inside it (for messages and node ids)."""
        try:
            return path.resolve().relative_to(self.config.rootpath.resolve()).as_posix()
        except ValueError:
            return str(path)

    # -- results and problems ---------------------------------------------------------------

    def ordered_results(self, bench: Bench) -> dict[str, ConfigResult]:
        """A bench's results in sweep order (xdist delivers them in completion order)."""
        results = self.results.get(bench.name, {})
        return {c.config_id: results[c.config_id] for c in bench.configs if c.config_id in results}

    def problem(self, line: str, exc: BaseException | None = None) -> None:
        """Record an error of the run (with the bench's traceback of ``exc``, if given)."""
        self.problems.append((line, bench_traceback(exc) if exc is not None else ""))

    def fingerprint(self, bench: Bench) -> str | None:
        """The bench's hardware fingerprint; None (and a recorded problem) if it raises."""
        try:
            return bench.fingerprint()
        except Exception as exc:
            self.problem(f"bench {bench.name!r}: fingerprint() raised {exc!r}", exc)
            return None


def _bench_paths(config: pytest.Config) -> list[Path]:
    paths = config.getini("npubench_paths")
    if not paths:
        return [config.rootpath / "benches"]
    return [Path(p) for p in paths]


#: The bench paths of a config (the sweep's report discovers benches with them too).
bench_paths = _bench_paths


def _ini_dir(config: pytest.Config, value: str) -> Path:
    base = config.inipath.parent if config.inipath else config.rootpath
    return base / value
