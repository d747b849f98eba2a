"""How far simulated times are from measured ones, per size band and overall.

The error of one size is ``|ln(simulated / measured)|`` (symmetric: 2x too slow and 2x too
fast weigh the same); a set of sizes is summarised by the geometric mean of the ratios'
distances from 1, ``exp(mean |ln r|) - 1`` (0.05 = "5 % off on average, geometrically").
The bands split where a collective changes regime: latency bound below 1 MiB, the knee from
1 MiB to 64 MiB, bandwidth bound above 64 MiB.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sim.errors import InputError

__all__ = ["BANDS", "BandErrors", "band_errors", "band_of", "geomean_error", "log_error"]

MIB = 1 << 20
#: (key, label, lowest size, highest size) per band; sizes in bytes, both ends included
BANDS: tuple[tuple[str, str, int, float], ...] = (
    ("small", "< 1 MiB", 0, MIB - 1),
    ("mid", "1..64 MiB", MIB, 64 * MIB),
    ("large", "> 64 MiB", 64 * MIB + 1, math.inf),
)


def band_of(size: int) -> str:
    """The key (``small``, ``mid``, ``large``) of the band ``size`` bytes falls in."""
    for key, _label, lo, hi in BANDS:
        if lo <= size <= hi:
            return key
    raise InputError(f"size {size} bytes must be >= 0")


def log_error(simulated: float, measured: float) -> float:
    """``|ln(simulated / measured)|``; both must be positive and finite."""
    if not (0 < simulated < math.inf and 0 < measured < math.inf):
        raise InputError(
            f"times must be positive and finite to compare, got simulated {simulated!r} "
            f"and measured {measured!r}"
        )
    return abs(math.log(simulated / measured))


def geomean_error(errors: Sequence[float]) -> float | None:
    """``exp(mean of |ln r|) - 1`` of some :func:`log_error` values; None when there are none."""
    return math.exp(sum(errors) / len(errors)) - 1 if errors else None


@dataclass(frozen=True)
class BandErrors:
    """Geomean errors (fractions: 0.05 = 5 %) of each band and of all sizes, with the number of
    sizes behind each; a band without sizes is None."""

    small: float | None
    mid: float | None
    large: float | None
    overall: float | None
    counts: tuple[int, int, int]

    def items(self) -> Iterator[tuple[str, float | None, int]]:
        """(label, error, number of sizes) per band, then ("overall", ...)."""
        for (_key, label, _lo, _hi), n in zip(BANDS, self.counts, strict=True):
            yield label, getattr(self, _key), n
        yield "overall", self.overall, sum(self.counts)

    def describe(self) -> str:
        """One line: ``< 1 MiB 12.3 % (17 sizes), ..., overall 8.1 % (31 sizes)``."""
        parts = [
            f"{label} {'-' if err is None else f'{100 * err:.1f} %'} ({n} sizes)"
            for label, err, n in self.items()
        ]
        return ", ".join(parts)


def band_errors(
    sizes: Sequence[int], simulated: Sequence[float], measured: Sequence[float]
) -> BandErrors:
    """Per-band and overall geomean errors of ``simulated`` against ``measured`` times (any one
    unit for both), one of each per size in ``sizes`` (bytes)."""
    if not len(sizes) == len(simulated) == len(measured):
        raise InputError(
            f"sizes, simulated and measured must be as long as each other, got {len(sizes)}, "
            f"{len(simulated)} and {len(measured)}"
        )
    per: dict[str, list[float]] = {key: [] for key, *_ in BANDS}
    for size, sim, meas in zip(sizes, simulated, measured, strict=True):
        per[band_of(size)].append(log_error(sim, meas))
    every = [e for errs in per.values() for e in errs]
    return BandErrors(
        small=geomean_error(per["small"]),
        mid=geomean_error(per["mid"]),
        large=geomean_error(per["large"]),
        overall=geomean_error(every),
        counts=(len(per["small"]), len(per["mid"]), len(per["large"])),
    )
