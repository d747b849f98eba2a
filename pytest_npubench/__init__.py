"""pytest-npubench: the pytest plugin half (bench API, baselines, regression gate, artifacts).

Bench modules use :class:`Bench`, :class:`Sweep`, :class:`Metric` and :class:`Result`; hooks
and figure functions receive :class:`ConfigResult` objects, and ``pytest_npubench_compare``
returns a :class:`Comparison`.

PYTEST_DONT_REWRITE: this module holds no assert; the marker keeps pytest from warning that the
package was imported before it could be rewritten when ``python -m pytest_npubench merge``
runs pytest in its own process (an error under ``filterwarnings = error``).
"""

from __future__ import annotations

from pytest_npubench.bench import Bench, BenchConfig, Metric, Result, Sweep
from pytest_npubench.compare import Comparison, ConfigResult

__all__ = ["Bench", "BenchConfig", "Comparison", "ConfigResult", "Metric", "Result", "Sweep"]
