"""The one number formatter (pytest_npubench.numbers): engineering units from the metric's
unit, three significant figures, never an exponent for an ordinary value."""

from __future__ import annotations

import re

import pytest

from pytest_npubench.numbers import column_header, format_change, format_percent, format_value

EXPONENT = re.compile(r"\de[+-]\d")


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (416, "ns", "416 ns"),
        (418.4, "ns", "418 ns"),
        (1010, "ns", "1.01 µs"),
        (3490, "ns", "3.49 µs"),
        (5056, "ns", "5.06 µs"),
        (28_200, "ns", "28.2 µs"),
        (999.7, "ns", "1.00 µs"),
        (2_752_510, "ns", "2.75 ms"),
        (3.2e9, "ns", "3.2 s"),
        (1010, "us", "1.01 ms"),
        (0.5, "us", "500 ns"),
        (10_240, "B", "10 KiB"),
        (1_205_862, "B", "1.15 MiB"),
        (512, "B", "512 B"),
        (2 << 30, "B", "2 GiB"),
        (512, "GB/s", "512 GB/s"),
        (1234, "GB/s", "1.23 TB/s"),
        (0.5, "GB/s", "500 MB/s"),
        (0.00478, "1", "0.00478"),
        (2048, "1", "2048"),
        (123_456, "1", "123 k"),
        (0, "ns", "0 ns"),
        (7, "elements", "7 elements"),
        (None, "ns", "-"),
    ],
)
def test_values_read_in_engineering_units(value: float | None, unit: str, text: str) -> None:
    assert format_value(value, unit) == text


@pytest.mark.parametrize("unit", ["ns", "us", "B", "GB/s", "1", "TFLOP/s", "FLOP/B"])
def test_no_value_of_any_size_is_written_with_an_exponent(unit: str) -> None:
    for exponent in range(-3, 16):
        for mantissa in (1.0, 2.75251, 9.999):
            text = format_value(mantissa * 10**exponent, unit)
            assert not EXPONENT.search(text), text
            digits = re.sub(r"[^0-9]", "", text.split()[0]).strip("0")
            assert len(digits) <= 4, text  # three significant figures (whole counts < 10^4)


def test_a_change_three_figures_hide_shows_its_exact_difference() -> None:
    assert format_change(2_700_000, 2_700_064, "B") == "2.57 MiB -> 2.57 MiB (+64 B)"
    assert format_change(416, 418.4, "ns") == "416 ns -> 418 ns"
    assert format_change(14, 13, "1") == "14 -> 13"


def test_percentages_are_signed_and_small_ones_keep_a_figure() -> None:
    assert format_percent(0.0058) == "+0.58 %"
    assert format_percent(-0.125) == "-12.50 %"
    assert format_percent(0.000012) == "+0.0012 %"
    assert format_percent(None) == "from 0"


def test_headers_do_not_claim_a_unit_the_cells_rescale() -> None:
    assert column_header("latency_ns", "ns") == "latency"
    assert column_header("time_us", "us") == "time"
    assert column_header("algbw_gbs", "GB/s") == "algbw"
    assert column_header("hbm_bytes", "B") == "hbm_bytes"
    assert column_header("mac_util", "1") == "mac_util"
