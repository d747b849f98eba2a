"""Issue 26, class 2: bugs in paths the gated set did not take before the path configs.

Each passed the gated ``--npubench gemm`` on main (35 passed: no gated config ran the ``is``
dataflow or a streaming K cut into a short last chunk) and fails the gate on the path
configs (``benches/_gemm_paths.py``), naming the metric or the cause. The ccl one (a time
read through 32 bits) passes every config that ends before 2^32 ps (the 4-chip switch at
64 MiB beside it here) and fails the path config past it (``benches/_ccl_paths.py``), named
by the lower bound it then beats.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import run_gate

CASES = {
    # bug: (bench, selection, what the failing output must name)
    "gemm-systolic-is-row-folds-floor-plus-one": (
        "gemm",
        "128x128x128-prefetch-systolic-is",
        "latency_ns",
    ),
    "gemm-chunk-count-rounded-down": ("gemm", "32x2112x32-load_ref", "declared 133 operations"),
    "ccl-collective-time-in-32-bits": (
        "ccl",
        "switch-p4-direct-256MiB or switch-p4-direct-64MiB",
        "time 3223227472 ps beats the bandwidth bound 8053063680 ps",
    ),
}


@pytest.mark.parametrize("bench", ["gemm", "ccl"])
def test_the_path_configs_pass_with_nothing_planted(bench: str, tmp_path: Path) -> None:
    select = " or ".join(sel for b, sel, _why in CASES.values() if b == bench)
    clean = run_gate(None, bench, "-k", select, tmp_path=tmp_path)
    assert clean.returncode == 0, clean.stdout[-3000:]


@pytest.mark.parametrize("bug", list(CASES))
def test_a_bug_on_a_newly_gated_path_fails_the_gate_naming_its_cause(
    bug: str, tmp_path: Path
) -> None:
    bench, select, cause = CASES[bug]
    planted = run_gate(bug, bench, "-k", select, tmp_path=tmp_path)
    assert planted.returncode == 1, planted.stdout[-3000:]
    assert cause in planted.stdout, planted.stdout[-3000:]
    if bench == "ccl":  # the config that ends before 2^32 ps passes
        assert "1 failed, 1 passed" in planted.stdout, planted.stdout[-3000:]
