"""The real_systems bench: each preset of a real machine against the nccl-tests / rccl-tests
table published for it (issue 24, docs/adr/0023-real-systems.md).

One config per (system, size band): the preset (``sim/topologies/<system>.yaml``) simulates
every size of its published table (``tests/data/published/``; the collective and the rank
count are the table's) in the band, with the algorithm the library runs and the protocol and
channels the preset's runtime picks (``collectives.protocol``, ``channels: auto``). Its
metric is the band's geomean error ``exp(mean |ln(simulated / published)|) - 1``
(:mod:`sim.calibrate.bands`), beside the simulated time of every size; the figure's legend
adds the error over all sizes. The errors are gated: a physics change that moves a system
further from its measurement fails CI; one that brings it closer passes and is taken with
``--regen-baselines`` (a lower error is better). ``#wrong`` (the replayed functional check)
must be 0 at every size, and the program of the band's smallest size must order every op
after the ops that produced its data (``CollectiveRun.dependency_race``: the graph is the
same code at every size, only its chunk counts grow, and at 8 GiB it has 400 000 ops, a
4 s check). The figure overlays published and simulated busbw against size,
with their ratio beneath.

Bands split where the collective changes regime: latency bound below 1 MiB, the knee from
1 MiB to 64 MiB, bandwidth bound above. Published tables exist for the systems in
:data:`SYSTEMS`; the other presets (``mi350x-8``, ``h100-sxm-8``) are predictions, run by
``benchmarks/vs_published.py`` against tables a user supplies.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path
from typing import Any

from benches._energy import energy_spec, energy_values
from benches._real_figures import figures
from pytest_npubench import Bench, Metric, Result
from sim import Topology, load_topology
from sim.calibrate import BANDS, Table, band_errors, read_table
from sim.calibrate.bands import band_of
from sim.calibrate.nccltests import bus_factor
from sim.collectives import collective_metrics, run_collective
from sim.energy import FJ_PER_PJ, AccessCounts, Energy, collective_counts, energy_of

PUBLISHED = Path(__file__).resolve().parents[1] / "tests" / "data" / "published"
#: preset -> its published table (tests/data/published), algorithm as the library runs it
SYSTEMS = {"mi300x-8": ("mi300x-rccl-all_reduce_perf.txt", "ring")}
BAND_KEYS = [key for key, *_ in BANDS]

_INFO = {"gate": False}
_ERROR = Metric("1", "lower", tolerance=0.001)


def size_key(size: int) -> str:
    """A size as a metric-name suffix: ``8B``, ``4KiB``, ``1MiB``, ``8GiB``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


@cache
def table(system: str) -> Table:
    """The published table of ``system`` (parsed once per process)."""
    return read_table(PUBLISHED / SYSTEMS[system][0])


@cache
def topology(system: str) -> Topology:
    """The preset at the table's rank count."""
    topo = load_topology(system)
    ranks = table(system).ranks
    return topo if ranks in (None, topo.chips.count) else topo.replace_chips(count=ranks)


def rows(system: str) -> list[tuple[int, float]]:
    """(size, published out-of-place time in us) of every row of ``system``'s table."""
    return [
        (row.size, row.out_of_place.time_us)
        for row in table(system).rows
        if row.out_of_place is not None and row.size > 0
    ]


ALL_SIZES = sorted({size for system in SYSTEMS for size, _t in rows(system)})
METRICS = {
    "error": _ERROR,
    "sizes": Metric("1", "lower"),
    "worst_ratio": Metric("1", "lower", **_INFO),
    "wrong": Metric("elements", "lower", **_INFO),
    **{f"sim_us_{size_key(s)}": Metric("us", "lower", **_INFO) for s in ALL_SIZES},
    **{f"published_us_{size_key(s)}": Metric("us", "lower", **_INFO) for s in ALL_SIZES},
}
#: energy over the band's sizes, one run each (every preset of SYSTEMS has an energy: section)
METRICS |= energy_spec(
    load_topology(next(iter(SYSTEMS))),
    0.001,
    {"pj_per_message_byte": Metric("pJ/B", "lower", **_INFO)},
)


def _band_energy(energies: list[Energy]) -> Energy | None:
    """The band's runs' energies summed (time summed too: power is their average)."""
    if not energies:
        return None
    parts = {k: sum(e.component(k) for e in energies) for k, _v in energies[0].fj}
    return Energy(tuple(parts.items()), sum(e.time_ps for e in energies), energies[0].chips)


def config_id(params: dict[str, Any]) -> str:
    return f"{params['system']}-{params['band']}"


def run(params: dict[str, Any]) -> Result:
    """Simulate every size of the band; its geomean error against the table is gated."""
    system, band = params["system"], params["band"]
    algorithm = SYSTEMS[system][1]
    topo, tab = topology(system), table(system)
    sizes: list[int] = []
    published, simulated, wrong = [], [], 0
    race = ""
    energies: list[Energy] = []
    metrics: dict[str, float] = {}
    for size in ALL_SIZES:  # sizes outside the band (or this system's table): 0
        metrics[f"sim_us_{size_key(size)}"] = metrics[f"published_us_{size_key(size)}"] = 0.0
    for size, time_us in rows(system):
        if band_of(size) != band:
            continue
        got = run_collective(topo, size, algorithm, tab.collective)
        if not sizes:  # the band's smallest size: its program's dependency graph (module doc)
            race = got.dependency_race()
        sim_us = got.time_ps / 1e6
        wrong += got.wrong
        if topo.energy is not None:
            counts: AccessCounts = collective_counts(
                got, topo, collective_metrics(got), len(set(topo.energy.link_fj)) > 1
            )
            energies.append(energy_of(counts, topo.energy))
        sizes.append(size)
        published.append(time_us)
        simulated.append(sim_us)
        metrics[f"sim_us_{size_key(size)}"] = sim_us
        metrics[f"published_us_{size_key(size)}"] = time_us
    value = getattr(band_errors(sizes, simulated, published), band)
    metrics["error"] = float(value) if value is not None else 0.0
    metrics["sizes"] = len(sizes)
    ratios = [s / p for s, p in zip(simulated, published, strict=True)]
    metrics["worst_ratio"] = max(ratios, key=lambda r: abs(math.log(r)))
    metrics["wrong"] = wrong
    band_energy = _band_energy(energies)
    if band_energy is not None:
        metrics |= energy_values(topo, band_energy)
        metrics["pj_per_message_byte"] = band_energy.total_fj / FJ_PER_PJ / sum(sizes)
    problems = []
    if wrong:
        problems.append(f"#wrong = {wrong}: a simulated run's replayed result differs")
    if race:
        problems.append(f"dependency check at {sizes[0]} B: {race}")
    return Result(metrics=metrics, ok=not problems, message="; ".join(problems))


def fingerprint() -> str:
    """The presets' fingerprints and the published tables' contents."""
    import hashlib

    parts = []
    for system, (name, _algorithm) in sorted(SYSTEMS.items()):
        digest = hashlib.sha256((PUBLISHED / name).read_bytes()).hexdigest()[:12]
        parts.append(f"{load_topology(system).fingerprint}+{name}:{digest}")
    return ";".join(parts)


def meta() -> dict[str, Any]:
    return {
        "systems": {
            s: {"table": name, "algorithm": alg, "factor": bus_factor(table(s).collective, 8)}
            for s, (name, alg) in SYSTEMS.items()
        },
        "bands": [label for _key, label, *_ in BANDS],
        "sizes": {size_key(s): s for s in ALL_SIZES},
    }


CAPTIONS = {
    "published_vs_simulated.png": (
        "Per real system: the published nccl-tests / rccl-tests busbw (black) and the "
        "simulated busbw of its preset (colour) against message size, and beneath, "
        "simulated / published time (1 = exact; the band errors in the legend are the gated "
        "metrics). Hollow markers are reused from the baseline."
    ),
}

BENCH = Bench(
    name="real_systems",
    sweep={"system": list(SYSTEMS), "band": BAND_KEYS},
    run=run,
    metrics=METRICS,
    config_id=config_id,
    figures=figures,
    fingerprint=fingerprint,
    meta=meta,
    summary_metrics=["error", "sizes", "worst_ratio", "wrong"],
    cost=lambda params: 20.0 if params["band"] == "large" else 1.0,
    captions=CAPTIONS,
)
