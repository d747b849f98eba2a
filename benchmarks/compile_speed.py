"""How fast is a collective's compile phase? The old op-by-op build beside today's, in one run.

    python benchmarks/compile_speed.py              # every case, best of 3
    python benchmarks/compile_speed.py --repeat 5

Per case, the schedule ``run_collective`` builds (``real_systems``: ring allreduce on the
``mi300x-8`` preset, 7 channels; two ``ccl`` configs on ``npu-1h``) is compiled by the old
code (``tests/sim/compile_reference.py``, the frozen copy of ``fabric_program`` as it was
before it was vectorised) and by today's ``sim.collectives.lockstep.compile_schedule``; both
programs must be equal field by field (the script stops otherwise). ``deps`` times
``sim.fabric.program.dependents_of`` (the dependency check ``simulate_events`` runs first)
old and new on the same program. Times are wall seconds, the best of ``--repeat`` runs (the
machine is shared: the best is the least disturbed); ``x`` is old / new.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "sim"))

import compile_reference as old  # noqa: E402  (tests/sim: the frozen old code)

from benches.ccl import topology_for  # noqa: E402
from benches.real_systems import topology  # noqa: E402
from sim.collectives.budget import check_collective, collective_arguments  # noqa: E402
from sim.collectives.catalog import build_schedule  # noqa: E402
from sim.collectives.compile import Compiled  # noqa: E402
from sim.collectives.lockstep import compile_schedule  # noqa: E402
from sim.collectives.schedule import Schedule  # noqa: E402
from sim.fabric import build_network  # noqa: E402
from sim.fabric.program import dependents_of  # noqa: E402
from sim.topology import Topology  # noqa: E402

MIB, GIB = 1 << 20, 1 << 30


def schedule_of(topo: Topology, nbytes: int, algorithm: str) -> Schedule:
    """The allreduce schedule ``run_collective`` compiles (its arguments checked alike)."""
    topo, nbytes, chunk, algorithm = collective_arguments(topo, nbytes, algorithm, None)
    nbytes, chunk = check_collective(topo, nbytes, algorithm, chunk)
    net = build_network(topo)
    return build_schedule(topo, nbytes, algorithm, "allreduce", chunk_bytes=chunk, network=net)


def cases() -> list[tuple[str, Schedule]]:
    real = topology("mi300x-8")
    out = [
        (f"real_systems mi300x-8 ring {label}", schedule_of(real, size, "ring"))
        for label, size in (("128MiB", 128 * MIB), ("1GiB", GIB), ("8GiB", 8 * GIB))
    ]
    for topo, algorithm in (("fully_connected", "ring"), ("ring", "double_binary_tree")):
        params = {"topology": topo, "chips": 16, "algorithm": algorithm, "size": 64 * MIB}
        name = f"ccl {topo}-p16-{algorithm}-64MiB"
        out.append((name, schedule_of(topology_for(params), 64 * MIB, algorithm)))
    return out


def best(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """The least wall time of ``repeat`` calls of ``fn`` (a collection first), and its result."""
    times, got = [], None
    for _ in range(repeat):
        got = None
        gc.collect()
        start = time.process_time()
        got = fn()
        times.append(time.process_time() - start)
    return min(times), got


def check_same(name: str, a: Compiled, b: Compiled) -> None:
    for f in dataclasses.fields(a.program):
        if getattr(a.program, f.name) != getattr(b.program, f.name):
            sys.exit(f"{name}: program.{f.name} differs between the old and the new compile")
    for f in ("bounds", "lo", "hi", "reduce", "fresh"):
        if getattr(a, f) != getattr(b, f):
            sys.exit(f"{name}: compiled.{f} differs between the old and the new compile")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    head = f"{'case':<44} {'ops':>8} {'old s':>8} {'new s':>8} {'x':>6}"
    head += f" {'deps old':>9} {'deps new':>9} {'x':>6}"
    print(head)
    print("-" * len(head))
    total_old = total_new = 0.0
    for name, schedule in cases():
        t_old, a = best(args.repeat, lambda s=schedule: old.compile_schedule(s))
        t_new, b = best(args.repeat, lambda s=schedule: compile_schedule(s))
        check_same(name, a, b)
        d_old, da = best(args.repeat, lambda p=b.program: old.dependents_of(p))
        d_new, db = best(args.repeat, lambda p=b.program: dependents_of(p))
        if da != db:
            sys.exit(f"{name}: dependents_of differs between the old and the new code")
        total_old, total_new = total_old + t_old, total_new + t_new
        print(
            f"{name:<44} {len(b.program):>8} {t_old:>8.3f} {t_new:>8.3f} {t_old / t_new:>6.1f}"
            f" {d_old:>9.3f} {d_new:>9.3f} {d_old / d_new:>6.1f}"
        )
    print(f"{'total (compile)':<44} {'':>8} {total_old:>8.3f} {total_new:>8.3f}", end="")
    print(f" {total_old / total_new:>6.1f}")


if __name__ == "__main__":
    main()
