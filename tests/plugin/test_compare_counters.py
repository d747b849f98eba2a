"""A config whose exact counter moved has no "improved" metric (issue 26: counts never improve;
issue 29: the total energy that fell with them is explained by the count, not better)."""

from __future__ import annotations

from pytest_npubench.bench import Metric
from pytest_npubench.compare import Comparison, compare_metric, counted


def _compared(transfers: tuple[float, float], energy: tuple[float, float]) -> dict[str, Comparison]:
    count = Metric(unit="1", direction="lower", tolerance=0.0, counter=True)
    total = Metric(unit="uJ", direction="lower", tolerance=0.001)
    return counted(
        {
            "transfers": compare_metric(count, *transfers),
            "energy_uj": compare_metric(total, *energy),
        }
    )


def test_a_lower_total_beside_a_moved_counter_is_changed_not_improved() -> None:
    got = _compared((448, 384), (949.0, 907.0))
    assert got["transfers"].verdict == "changed"
    assert got["energy_uj"] == Comparison("changed", (907.0 - 949.0) / 949.0)


def test_without_a_moved_counter_an_improvement_stays_one() -> None:
    got = _compared((448, 448), (949.0, 907.0))
    assert [c.verdict for c in got.values()] == ["pass", "improved"]


def test_a_regression_beside_a_moved_counter_stays_a_regression() -> None:
    got = _compared((448, 384), (949.0, 990.0))
    assert got["energy_uj"].verdict == "regression"
