"""Fitting at most three topology values to a measured table: bounded, deterministic, few runs.

The objective is the mean over sizes of ``|ln(simulated / measured time)|`` (the log of the
geomean error, :mod:`sim.calibrate.bands`). Each evaluation simulates every size of the table
(~1 s for 31 sizes on 8 chips), so the search is a derivative-free one that needs few:

* each key moves in a unit interval mapped onto its bounds (latencies on ``ln(1 + ns)``, so a
  launch of 20 us and a hop of 700 ns both resolve to a fraction of a percent; bandwidths on a
  log scale; efficiencies and other bounded values linearly);
* coordinate by coordinate: a grid of 9 points over the bounds (which also tells a key that
  cannot move the result: the same objective at all 9 is an error naming it), then a
  golden-section search between the grid neighbours of the best point down to 1e-4 of the
  interval; with several keys, further sweeps search shrinking brackets around each value
  until a sweep gains less than 1e-6 or the evaluation cap is reached;
* every value is rounded to 6 significant digits (latencies to whole picoseconds) before it
  is simulated, and evaluations are cached on the rounded values.

From a fixed start and with fixed caps, the same inputs give the same fit on every machine.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sim.calibrate.yamlkeys import Spot
from sim.errors import InputError

__all__ = [
    "DEFAULT_MAX_EVALUATIONS",
    "MAX_KEYS",
    "FitKey",
    "FitResult",
    "default_bounds",
    "fit",
    "parse_bounds",
]

MAX_KEYS = 3
DEFAULT_MAX_EVALUATIONS = 300
GRID = 9
TOLERANCE = 1e-4  # of a key's unit interval
GAIN = 1e-6  # a sweep that lowers the objective less than this ends the search
FLAT = 1e-9  # objective spread over the grid at or below this: the key does not move it
MAX_LATENCY_NS = 1e6
_INVPHI = (math.sqrt(5) - 1) / 2

Scale = str  # "linear" | "log" | "latency"


def _is_latency(key: str) -> bool:
    return key.rsplit(".", 1)[-1].endswith("_ns")


def default_bounds(spot: Spot) -> tuple[float, float]:
    """Bounds by kind of key: ``*_ns`` 0..1e6 ns; ``efficiency`` 0.05..1; ``*_gbs`` and
    ``*_ghz`` 0.1x..10x the file's value; anything else needs ``--bounds``."""
    leaf = spot.key.rsplit(".", 1)[-1]
    if leaf.endswith("_ns"):
        return 0.0, MAX_LATENCY_NS
    if leaf == "efficiency" or leaf.endswith("_efficiency"):
        return 0.05, 1.0
    if leaf.endswith(("_gbs", "_ghz")):
        if spot.value <= 0:
            raise InputError(
                f"{spot.key} = {spot.text}: a bandwidth's default bounds are 0.1x..10x its "
                f"value, which must be > 0; give --bounds {spot.key}=LO:HI"
            )
        return spot.value / 10, spot.value * 10
    raise InputError(
        f"{spot.key}: no default bounds for this kind of key (latencies *_ns, bandwidths "
        f"*_gbs, efficiencies have them); give --bounds {spot.key}=LO:HI"
    )


def parse_bounds(items: Sequence[str]) -> dict[str, tuple[float, float]]:
    """``KEY=LO:HI`` items as {key: (lo, hi)}; LO < HI, both finite."""
    out: dict[str, tuple[float, float]] = {}
    for item in items:
        key, sep, span = item.partition("=")
        lo_text, colon, hi_text = span.partition(":")
        try:
            lo, hi = float(lo_text), float(hi_text)
        except ValueError:
            lo = hi = math.nan
        if not (sep and colon and math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise InputError(
                f"--bounds {item!r} must be KEY=LO:HI with LO < HI, e.g. "
                "collectives.launch_ns=0:100000"
            )
        out[key.strip()] = (lo, hi)
    return out


@dataclass(frozen=True)
class FitKey:
    """One fitted value: where it is, its bounds and the scale the search moves it on."""

    spot: Spot
    lo: float
    hi: float

    @property
    def key(self) -> str:
        return self.spot.key

    @property
    def scale(self) -> Scale:
        if _is_latency(self.key) and self.lo >= 0:
            return "latency"
        return "log" if self.lo > 0 and self.hi / self.lo >= 4 else "linear"

    def value(self, u: float) -> float:
        """The value at ``u`` in [0, 1], rounded as it is simulated."""
        lo, hi = self.lo, self.hi
        if self.scale == "latency":
            x = math.expm1(math.log1p(lo) + u * (math.log1p(hi) - math.log1p(lo)))
        elif self.scale == "log":
            x = lo * (hi / lo) ** u
        else:
            x = lo + u * (hi - lo)
        x = float(f"{x:.6g}")
        if _is_latency(self.key):
            x = round(x, 3)  # whole picoseconds
        return min(max(x, lo), hi)

    def unit(self, x: float) -> float:
        """Where value ``x`` sits in [0, 1] (clipped)."""
        lo, hi = self.lo, self.hi
        if self.scale == "latency":
            u = (math.log1p(x) - math.log1p(lo)) / (math.log1p(hi) - math.log1p(lo))
        elif self.scale == "log":
            u = math.log(x / lo) / math.log(hi / lo) if x > 0 else 0.0
        else:
            u = (x - lo) / (hi - lo)
        return min(max(u, 0.0), 1.0)

    def literal(self, x: float) -> str:
        """``x`` as the YAML should say it: an integer stays one, else the shortest repr."""
        if x == int(x) and abs(x) < 1e15:
            return str(int(x)) if self.spot.is_int else repr(float(x))
        return repr(x)


@dataclass
class FitResult:
    """The fitted values (as literals and numbers), the objective at the start and at the
    end, and how many distinct evaluations it took."""

    keys: list[FitKey]
    values: list[float]
    literals: list[str]
    objective: float
    start_objective: float
    evaluations: int
    capped: bool
    history: list[tuple[tuple[str, ...], float]] = field(default_factory=list)


class _Search:
    def __init__(
        self,
        keys: list[FitKey],
        objective: Callable[[tuple[str, ...]], float],
        max_evaluations: int,
    ) -> None:
        self.keys, self.objective, self.cap = keys, objective, max_evaluations
        self.cache: dict[tuple[str, ...], float] = {}
        self.history: list[tuple[tuple[str, ...], float]] = []

    def literals(self, u: Sequence[float]) -> tuple[str, ...]:
        return tuple(k.literal(k.value(x)) for k, x in zip(self.keys, u, strict=True))

    @property
    def capped(self) -> bool:
        return len(self.cache) >= self.cap

    def best(self) -> tuple[tuple[str, ...], float]:
        """The best evaluation so far (the first of equals: deterministic)."""
        return min(self.history, key=lambda item: item[1])

    def __call__(self, u: Sequence[float]) -> float:
        lits = self.literals(u)
        if lits not in self.cache:
            if self.capped:
                return math.inf  # over the cap: nothing new is simulated
            self.cache[lits] = value = self.objective(lits)
            self.history.append((lits, value))
        return self.cache[lits]


def _golden(f: Callable[[float], float], a: float, b: float) -> tuple[float, float]:
    c, d = b - _INVPHI * (b - a), a + _INVPHI * (b - a)
    fc, fd = f(c), f(d)
    while b - a > TOLERANCE and math.isfinite(fc) and math.isfinite(fd):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - _INVPHI * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + _INVPHI * (b - a)
            fd = f(d)
    return (c, fc) if fc <= fd else (d, fd)


def _grid(search: _Search, u: list[float], i: int) -> tuple[float, float]:
    """The grid over key ``i``: the bracket around its best point, refusing a flat key."""
    points = [(j + 0.5) / GRID for j in range(GRID)]
    values = [search([*u[:i], p, *u[i + 1 :]]) for p in points]
    finite = [v for v in values if math.isfinite(v)]
    key = search.keys[i]
    if len(finite) == GRID and max(finite) - min(finite) <= FLAT:
        raise InputError(
            f"{key.key} cannot move the result: the geomean error is "
            f"{100 * math.expm1(finite[0]):.3g} % at every value from {key.lo:g} to {key.hi:g} "
            "(the simulator does not read it for this collective, algorithm and topology); "
            "fit another key"
        )
    j = min(range(GRID), key=lambda n: (values[n], n))
    return (points[j - 1] if j else 0.0), (points[j + 1] if j < GRID - 1 else 1.0)


def fit(
    keys: list[FitKey],
    objective: Callable[[tuple[str, ...]], float],
    max_evaluations: int = DEFAULT_MAX_EVALUATIONS,
) -> FitResult:
    """Minimise ``objective`` (called with the keys' literals) from the keys' file values."""
    if not 1 <= len(keys) <= MAX_KEYS:
        raise InputError(
            f"fit 1 to {MAX_KEYS} keys at a time, got {len(keys)}: each costs a search of "
            "~25 simulated sweeps, and more free values than physical ones would fit noise"
        )
    search = _Search(keys, objective, max_evaluations)
    u = [k.unit(k.spot.value) for k in keys]
    start_objective = best = search(u)
    sweeps = 1 if len(keys) == 1 else 4
    for sweep in range(sweeps):
        before = best
        for i in range(len(keys)):
            if sweep == 0:
                a, b = _grid(search, u, i)
            else:
                width = 1 / (GRID * 2**sweep)
                a, b = max(0.0, u[i] - width), min(1.0, u[i] + width)

            def along(p: float, i: int = i, u: list[float] = u) -> float:
                return search([*u[:i], p, *u[i + 1 :]])

            _golden(along, a, b)
            lits, best = search.best()
            u = [k.unit(float(lit)) for k, lit in zip(keys, lits, strict=True)]
        if before - best < GAIN or search.capped:
            break
    lits, best = search.best()
    return FitResult(
        keys=keys,
        values=[float(lit) for lit in lits],
        literals=list(lits),
        objective=best,
        start_objective=start_objective,
        evaluations=len(search.cache),
        capped=search.capped,
        history=search.history,
    )
