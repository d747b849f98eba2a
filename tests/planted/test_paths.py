"""Issue 26, class 2: bugs in paths the gated set did not take before the path configs.

Each passed the gated ``--npubench gemm`` on main (35 passed: no gated config ran the ``is``
dataflow or a streaming K cut into a short last chunk) and fails the gate on the path
configs (``benches/_gemm_paths.py``), naming the metric or the cause.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import run_gate

CASES = {
    # bug: (selection, what the failing output must name)
    "gemm-systolic-is-row-folds-floor-plus-one": ("128x128x128-prefetch-systolic-is", "latency_ns"),
    "gemm-chunk-count-rounded-down": ("32x2112x32-load_ref", "declared 133 operations"),
}


def test_the_path_configs_pass_with_nothing_planted(tmp_path: Path) -> None:
    select = " or ".join(sel for sel, _why in CASES.values())
    clean = run_gate(None, "gemm", "-k", select, tmp_path=tmp_path)
    assert clean.returncode == 0, clean.stdout[-3000:]


@pytest.mark.parametrize("bug", list(CASES))
def test_a_bug_on_a_newly_gated_path_fails_the_gate_naming_its_cause(
    bug: str, tmp_path: Path
) -> None:
    select, cause = CASES[bug]
    planted = run_gate(bug, "gemm", "-k", select, tmp_path=tmp_path)
    assert planted.returncode == 1, planted.stdout[-3000:]
    assert cause in planted.stdout, planted.stdout[-3000:]
