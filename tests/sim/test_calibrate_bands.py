"""Per-band geomean errors (sim.calibrate.bands) on numbers worked out by hand."""

from __future__ import annotations

import pytest

from sim.calibrate.bands import band_errors, band_of, geomean_error
from sim.errors import InputError

KIB, MIB = 1 << 10, 1 << 20


def test_bands_split_at_1_and_64_mib_both_included_in_the_middle() -> None:
    assert [band_of(s) for s in (0, MIB - 1, MIB, 64 * MIB, 64 * MIB + 1)] == [
        "small",
        "small",
        "mid",
        "mid",
        "large",
    ]


def test_band_errors_by_hand() -> None:
    """small: ratios 2 and 1 -> exp((ln 2 + 0) / 2) - 1 = sqrt(2) - 1; mid: 1 and 2 (64 MiB
    is mid) -> sqrt(2) - 1; large: 0.5 (2x too fast counts as 2x too slow) -> 1; overall:
    three ln 2 over five sizes -> 2 ** (3 / 5) - 1."""
    sizes = [KIB, 512 * KIB, MIB, 64 * MIB, 128 * MIB]
    simulated = [2.0, 1.0, 3.0, 4.0, 5.0]
    measured = [1.0, 1.0, 3.0, 2.0, 10.0]
    got = band_errors(sizes, simulated, measured)
    assert got.small == pytest.approx(2**0.5 - 1)
    assert got.mid == pytest.approx(2**0.5 - 1)
    assert got.large == pytest.approx(1.0)
    assert got.overall == pytest.approx(2 ** (3 / 5) - 1)
    assert got.counts == (2, 2, 1)
    assert [label for label, _e, _n in got.items()] == [
        "< 1 MiB",
        "1..64 MiB",
        "> 64 MiB",
        "overall",
    ]
    assert got.describe().endswith("overall 51.6 % (5 sizes)")


def test_an_empty_band_is_none_and_bad_numbers_are_errors() -> None:
    got = band_errors([KIB], [1.0], [1.0])
    assert (got.small, got.mid, got.large, got.overall) == (0.0, None, None, 0.0)
    assert geomean_error([]) is None
    with pytest.raises(InputError, match="positive and finite"):
        band_errors([KIB], [0.0], [1.0])
    with pytest.raises(InputError, match="as long as each other"):
        band_errors([KIB, MIB], [1.0], [1.0])
