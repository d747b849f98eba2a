"""How fast are the event engine and the replay on the general path (``run_schedule``)?

    PYTHONPATH=$PWD python benchmarks/engine_speed.py            # every case, best of 3
    PYTHONPATH=$PWD python benchmarks/engine_speed.py --repeat 5 --quick

Each case runs one collective through :func:`sim.collectives.run_collective` once, keeping
the fabric program and the op log it timed and replayed; then, in this process, it times
the engine as it was (``tests/sim/engine_reference.py``, a verbatim copy) and as it is,
on the same inputs, alternating old and new ``--repeat`` times and keeping the best of each
(the machine is shared: the best is the least disturbed). ``events`` is ``op_holds`` plus
``simulate_events`` (its op log included), ``replay`` is :func:`~sim.collectives.verify.replay`.
Every old and new result is compared (each op-log column, the replayed values): a row
prints ``DIFF`` where they differ.

Cases: ``real_systems``' mi300x-8 allreduce (the ring, 8 chips fully connected, 7 channels,
protocol auto) at 128 MiB, 1 GiB and 4 GiB (``--quick``: 128 MiB only), and ccl configs on
npu-1h at 8 to 16 chips.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "sim"))

import engine_reference as ref  # noqa: E402

import sim.collectives.run as run_module  # noqa: E402
import sim.fabric.simulate as simulate_module  # noqa: E402
from benches import real_systems  # noqa: E402
from sim import load_topology  # noqa: E402
from sim.collectives import run_collective  # noqa: E402
from sim.collectives.verify import replay  # noqa: E402
from sim.fabric.events import simulate_events  # noqa: E402
from sim.fabric.holds import op_holds  # noqa: E402

MiB, GiB = 1 << 20, 1 << 30
COLUMNS = ("chip", "engine", "stage", "op", "start", "end", "nbytes", "macs", "tile")


def cases(quick: bool) -> list[tuple[str, Any, int, str, str, dict[str, Any]]]:
    mi = real_systems.topology("mi300x-8")
    out = [
        (f"mi300x-8 ring allreduce {s // MiB} MiB", mi, s, "ring", "allreduce", {})
        for s in ([128 * MiB] if quick else [128 * MiB, GiB, 4 * GiB])
    ]
    base = load_topology()
    shapes = {
        "ring8": base.replace_chips(topology="ring", count=8),
        "ring16": base.replace_chips(topology="ring", count=16),
        "fc8": base.replace_chips(topology="fully_connected", count=8),
        "torus16": base.replace_chips(topology="torus2d", count=16, torus_dims=[4, 4]),
    }
    # (shape, algorithm, collective, MiB, keywords) on npu-1h
    ccl = [
        ("ring8", "ring", "allreduce", 64, {"channels": 4}),
        ("ring8", "halving_doubling", "allreduce", 64, {}),
        ("ring16", "double_binary_tree", "allreduce", 16, {}),
        ("ring16", "ring", "allreduce", 16, {"protocol": "ll128"}),
        ("ring8", "direct", "allreduce", 16, {"protocol": "ll128"}),
        ("fc8", "ring", "allreduce", 64, {"channels": 2}),
        ("torus16", "ring", "allreduce", 16, {}),
        ("ring8", "ring", "reduce_scatter", 64, {"protocol": "ll"}),
    ]
    for shape, alg, coll, mib, kw in ccl:
        extra = " ".join(f"{k}={v}" for k, v in kw.items())
        label = f"npu-1h {shape} {alg} {coll} {mib} MiB {extra}".rstrip()
        out.append((label, shapes[shape], mib * MiB, alg, coll, kw))
    return out


def capture(topo: Any, size: int, alg: str, coll: str, kw: dict[str, Any]) -> dict[str, Any]:
    """Run one collective, keeping what the engine and the replay were given."""
    got: dict[str, Any] = {}
    engine, rep = simulate_module.simulate_events, run_module.replay

    def events(net: Any, program: Any, holds: Any, *, contention: bool, routes: Any) -> Any:
        got["engine"] = (net, program, contention, routes)
        return engine(net, program, holds, contention=contention, routes=routes)

    def replayed(schedule: Any, net: Any, compiled: Any, log: Any) -> Any:
        got["replay"] = (schedule, net, compiled, log)
        return rep(schedule, net, compiled, log)

    simulate_module.simulate_events, run_module.replay = events, replayed  # type: ignore
    try:
        run_collective(topo, size, alg, coll, **kw)
    finally:
        simulate_module.simulate_events, run_module.replay = engine, rep
    return got


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def measure(got: dict[str, Any], repeat: int) -> tuple[list[float], bool]:
    """Best-of-``repeat`` times (events old, new, replay old, new) of one captured case,
    old and new alternating so that a busy spell hits both; and whether they agree."""
    net, program, contention, routes = got["engine"]
    schedule, rnet, compiled, log = got["replay"]

    def old_events() -> Any:
        holds = ref.op_holds(net, program, routes)
        return ref.simulate_events(net, program, holds, contention=contention, routes=routes)

    def new_events() -> Any:
        holds = op_holds(net, program, routes)
        return simulate_events(net, program, holds, contention=contention, routes=routes)

    runs = (
        old_events,
        new_events,
        lambda: ref.replay(schedule, rnet, compiled, log),
        lambda: replay(schedule, rnet, compiled, log),
    )
    best = [float("inf")] * 4
    outs: list[Any] = [None] * 4
    for _ in range(repeat):
        for k, fn in enumerate(runs):
            t, outs[k] = timed(fn)
            best[k] = min(best[k], t)
    log_old, log_new, rep_old, rep_new = outs
    same = all(np.array_equal(getattr(log_old, c), getattr(log_new, c)) for c in COLUMNS)
    same &= log_old.engines == log_new.engines and log_old.stages == log_new.stages
    same &= all(
        np.array_equal(getattr(rep_old, f), getattr(rep_new, f)) for f in ("a", "b", "mask")
    )
    return best, same


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    head = f"{'case':56} {'ops':>7} {'events old':>10} {'new':>7} {'x':>5}"
    head += f" {'replay old':>10} {'new':>7} {'x':>5} {'both x':>6}  same"
    print(head)
    tot = np.zeros(4)
    for label, topo, size, alg, coll, kw in cases(args.quick):
        got = capture(topo, size, alg, coll, kw)
        if "engine" not in got or "replay" not in got:
            print(f"{label:56} (not on the event engine)")
            continue
        (te_old, te_new, tr_old, tr_new), same = measure(got, args.repeat)
        n = len(got["engine"][1])
        tot += (te_old, te_new, tr_old, tr_new)
        print(
            f"{label:56} {n:>7} {te_old:>10.3f} {te_new:>7.3f} {te_old / te_new:>5.2f}"
            f" {tr_old:>10.3f} {tr_new:>7.3f} {tr_old / tr_new:>5.2f}"
            f" {(te_old + tr_old) / (te_new + tr_new):>6.2f}  {'yes' if same else 'DIFF'}"
        )
    print(
        f"{'total':56} {'':>7} {tot[0]:>10.3f} {tot[1]:>7.3f} {tot[0] / tot[1]:>5.2f}"
        f" {tot[2]:>10.3f} {tot[3]:>7.3f} {tot[2] / tot[3]:>5.2f}"
        f" {(tot[0] + tot[2]) / (tot[1] + tot[3]):>6.2f}"
    )


if __name__ == "__main__":
    main()
