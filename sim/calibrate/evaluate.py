"""A measured table's sizes simulated on a topology YAML text (:mod:`sim.collectives`).

:class:`Setup` holds the topology's text at the table's rank count (``chips.count``, and the
size of a one-dimension ``chips.dimensions``) and loads edited versions of it through the
topology loader itself, so every candidate of a fit is checked like a file a user wrote.

:func:`simulate` runs one collective per size. Large sizes are where a run is slow (8 GiB of
ring allreduce on 8 chips is ~4 s, and some algorithms are over the ops budget there), and
where the simulated time is a straight line in the size (the pipeline is full: every further
byte costs the same), so a fit simulates exactly up to ``exact_up_to`` bytes and extends the
line through the two largest simulated sizes above it (measured on npu-1h-like 8-chip rings
and fully connected systems: within 0.8 % at 8 GiB from 256/512 MiB). A report simulates every
size it can (``exact_all``) and marks the sizes it extended.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sim.calibrate.yamlkeys import Spot, edit, find, leaf_keys
from sim.collectives import run_collective
from sim.errors import BudgetError, InputError, NpuSimError
from sim.topology import Topology, load_topology

__all__ = ["DEFAULT_EXACT_UP_TO", "Setup", "Simulated", "simulate"]

DEFAULT_EXACT_UP_TO = 512 << 20
_DIMENSION_SIZE = re.compile(r"chips\.dimensions\[([0-9]+)\]\.size")


class Setup:
    """The topology text of ``source`` at ``ranks`` chips (None: as the file says), and a
    loader for edited versions of it (``close()`` removes the loader's temporary folder)."""

    def __init__(self, text: str, source: str, ranks: int | None) -> None:
        self.source = source
        self.original = load_topology(source)
        self.ranks = self.original.chips.count if ranks is None else ranks
        self.text = edit(text, self._count_edits(text, self.ranks))
        self._dir = tempfile.TemporaryDirectory(prefix="sim-calibrate-")
        self._path = Path(self._dir.name) / Path(source).name
        if not self._path.suffix:
            self._path = self._path.with_suffix(".yaml")
        try:
            self.topology = self.load(self.text)
        except NpuSimError as exc:
            self.close()
            raise InputError(
                f"{source}: at chips.count = {self.ranks} (the measured table's ranks) the "
                f"topology is not valid: {exc}"
            ) from None

    def _count_edits(self, text: str, ranks: int) -> dict[Spot, str]:
        edits: dict[Spot, str] = {}
        count = find(text, self.source, "chips.count")
        if count.value != ranks:
            edits[count] = str(ranks)
        dims = [k for k in leaf_keys(text, self.source) if _DIMENSION_SIZE.fullmatch(k)]
        if len(dims) == 1:
            size = find(text, self.source, dims[0])
            if size.value != ranks:
                edits[size] = str(ranks)
        elif dims:
            sizes = [int(find(text, self.source, k).value) for k in dims]
            if math.prod(sizes) != ranks:
                raise InputError(
                    f"{self.source}: the measured table has {ranks} ranks but chips.dimensions "
                    f"has sizes {sizes} (product {math.prod(sizes)}); give a topology of "
                    f"{ranks} chips"
                )
        chips = self.original.chips
        rows, cols = chips.torus_dims
        if not dims and chips.topology == "torus2d" and rows * cols != ranks:
            raise InputError(
                f"{self.source}: the measured table has {ranks} ranks but chips.torus_dims is "
                f"[{rows}, {cols}]; set torus_dims to a {ranks}-chip torus"
            )
        return edits

    def load(self, text: str) -> Topology:
        """``text`` as a topology, read by the loader from a file of the same name."""
        self._path.write_text(text, encoding="utf-8")
        return load_topology(self._path)

    def close(self) -> None:
        self._dir.cleanup()


@dataclass(frozen=True)
class Simulated:
    """Simulated times (ps) of ``sizes``; ``exact[i]`` False where the line was extended."""

    sizes: tuple[int, ...]
    time_ps: tuple[float, ...]
    exact: tuple[bool, ...]
    wrong: tuple[int, ...]
    note: str = ""


def simulate(
    topo: Topology,
    sizes: Sequence[int],
    algorithm: str,
    collective: str,
    exact_up_to: float = DEFAULT_EXACT_UP_TO,
    exact_all: bool = False,
) -> Simulated:
    """Every size of ``sizes`` (bytes, > 0) of ``collective`` with ``algorithm`` on ``topo``."""
    times: dict[int, float] = {}
    wrong: dict[int, int] = {}
    note = ""
    for size in sorted(set(sizes)):
        if size > exact_up_to and not exact_all:
            continue
        try:
            run = run_collective(topo, size, algorithm, collective)
        except BudgetError as exc:
            note = f"from {size} bytes over the simulator's budget ({exc})"
            break
        except NpuSimError as exc:
            raise InputError(
                f"simulating a {size}-byte {collective} ({algorithm}) on {topo.chips.count} "
                f"chips: {exc}"
            ) from None
        times[size] = float(run.time_ps)
        wrong[size] = int(run.wrong)
    done = sorted(times)
    missing = [s for s in sizes if s not in times]
    if missing and len(done) < 2:
        raise InputError(
            f"{collective} ({algorithm}): fewer than two sizes could be simulated "
            f"{'(' + note + ')' if note else ''}; cannot extend the line to {max(missing)} bytes"
        )
    if missing:
        a, b = done[-2], done[-1]
        slope = (times[b] - times[a]) / (b - a)
        for size in missing:
            times[size] = times[b] + (size - b) * slope
    return Simulated(
        sizes=tuple(sizes),
        time_ps=tuple(times[s] for s in sizes),
        exact=tuple(s in wrong for s in sizes),
        wrong=tuple(wrong.get(s, 0) for s in sizes),
        note=note,
    )


def topology_path(name_or_path: str) -> str:
    """A shipped name (``npu-1h``) as its file in ``sim/topologies``, a path as itself."""
    from sim.topology import TOPOLOGY_DIR

    if not Path(name_or_path).suffix and "/" not in name_or_path and os.sep not in name_or_path:
        return str(TOPOLOGY_DIR / f"{name_or_path}.yaml")
    return name_or_path


def edited(setup: Setup, values: Mapping[Spot, str]) -> Topology:
    """The setup's topology with ``values`` written in (an InputError naming the values when
    the loader refuses them: a bound outside what the key may be)."""
    try:
        return setup.load(edit(setup.text, values))
    except NpuSimError as exc:
        said = ", ".join(f"{s.key} = {v}" for s, v in values.items())
        raise InputError(
            f"with {said} the topology is not valid ({exc}); narrow --bounds to values the "
            "key may take"
        ) from None
