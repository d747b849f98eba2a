"""Hooks of pytest-npubench, loaded by ``pytest_addhooks``.

Implement them in a conftest.py or an installed plugin. The plugin's own behaviour is the
``trylast`` implementation of each hook, so any other implementation runs first (and, for
``pytest_npubench_compare``, wins by returning a non-None result).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_npubench.bench import Bench, Metric
    from pytest_npubench.compare import Comparison, ConfigResult


@pytest.hookspec
def pytest_npubench_add_benches(config: pytest.Config) -> Sequence[Bench]:
    """Return benches to run besides those found in the ``npubench_paths`` modules."""
    raise NotImplementedError


@pytest.hookspec
def pytest_npubench_result(config: pytest.Config, bench: Bench, result: ConfigResult) -> None:
    """Observe the result of one config, on the controller, as its report arrives."""


@pytest.hookspec
def pytest_npubench_figures(
    config: pytest.Config, bench: Bench, results: Mapping[str, ConfigResult], outdir: Path
) -> Sequence[Path]:
    """Draw figures of one bench's results into ``outdir``; return the files written."""
    raise NotImplementedError


@pytest.hookspec(firstresult=True)
def pytest_npubench_compare(
    config: pytest.Config,
    bench: Bench,
    config_id: str,
    name: str,
    metric: Metric,
    baseline: float,
    current: float,
) -> Comparison | None:
    """Compare one metric of one config with its baseline value; None defers to the next."""
    raise NotImplementedError
