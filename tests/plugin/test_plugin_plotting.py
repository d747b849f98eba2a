"""pytest_npubench.plotting: the units and the measured/reused wording every figure shares."""

from __future__ import annotations

import pytest

from pytest_npubench import ConfigResult
from pytest_npubench.plotting import format_ns, provenance, time_unit


@pytest.mark.parametrize(
    ("ns", "text"),
    [(416.0, "416 ns"), (1500.0, "1.5 µs"), (2.09715e8, "210 ms"), (3.2e9, "3.2 s")],
)
def test_times_read_in_their_own_unit(ns: float, text: str) -> None:
    """No 200000 µs: a time reads as 1 .. 999 of ns, µs, ms or s, to 3 significant figures."""
    assert format_ns(ns) == text


def test_a_panel_unit_follows_its_largest_value() -> None:
    assert time_unit(999.0) == (1.0, "ns")
    assert time_unit(1000.0) == (1e3, "µs")
    assert time_unit(2.1e8) == (1e6, "ms")


def _result(cid: str, source: str) -> ConfigResult:
    return ConfigResult("b", cid, {}, {"x": 1.0}, None, "pass", source)  # type: ignore[arg-type]


def test_provenance_counts_measured_and_reused_configs() -> None:
    rows = [_result("a", "run"), _result("b", "baseline"), _result("c", "baseline")]
    assert provenance(rows, " on hw:1") == (
        "3 configs on hw:1: 1 measured in this run, 2 reused from the baseline "
        "(regen-only, not re-run)"
    )
    assert provenance(rows[:1]) == "1 config: 1 measured in this run"
