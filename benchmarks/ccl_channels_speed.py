"""How fast is a many-channel ring? 7 channels on 8 fully connected chips, up to 8 GiB (fp32).

    python benchmarks/ccl_channels_speed.py              # 1 MiB, 64 MiB, 1 GiB, 8 GiB
    python benchmarks/ccl_channels_speed.py 1 64         # sizes in MiB
    python benchmarks/ccl_channels_speed.py --channels 0 1 1024

The sizes of the published MI300X rccl-tests table (``../shared/published/``: 8 B to 8 GiB,
float). The topology is npu-1h's hardware (its ``chunk_kib``, staging buffers, links) as 8
fully connected chips with 4-byte elements. For each size it prints the wall and CPU time
of ``allreduce`` (schedule, program, event-driven timing, op log, replayed functional
check) and the CPU time of its three parts (on a shared machine wall time is inflated by
other processes), the op-log records and transfers, the simulated time and
busbw, and ``#wrong``. A message of ``n`` bytes is ``7 x 8`` messages of ``n / 56`` per
step, each cut into a power of two of chunks of at most ``chunk_kib``
(``sim.collectives.compile.chunks``): records = 2 (p-1) steps x 56 x chunks x 2.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from sim import load_topology
from sim.collectives import build_schedule, collective_metrics, fabric_program
from sim.collectives.run import allreduce
from sim.fabric import build_network, simulate_fabric
from sim.limits import OPS_BUDGET_ENV
from sim.topology import Topology
from sim.topology.schema import build

MIB = 1024 * 1024


def topology() -> Topology:
    data: dict[str, Any] = load_topology().to_dict()
    data["dtype"]["bytes_per_element"] = 4
    data["chips"].update(count=8, topology="fully_connected")
    return build(data, "npu-1h as 8 fully connected chips, fp32 (benchmarks)")


def main(sizes_mib: list[int], channels: int) -> None:
    os.environ.setdefault(OPS_BUDGET_ENV, "20000000")
    topo = topology()
    print(
        f"allreduce, {channels} channels, 8 chips fully connected ({topo.name} hardware, fp32, "
        f"chunk {topo.chips.chunk_kib} KiB, {topo.chips.staging_buffers} staging buffers)"
    )
    print(
        f"{'size':>9} {'wall s':>7} {'cpu s':>6} {'build cpu':>9} {'fabric cpu':>10} "
        f"{'check cpu':>9} {'records':>8} {'transfers':>9} {'time us':>10} {'busbw':>7} "
        f"{'#wrong':>6}"
    )
    for mib in sizes_mib:
        n = mib * MIB
        t0, c0 = time.perf_counter(), time.process_time()
        run = allreduce(topo, n, channels=channels)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        # the parts, CPU time, again one by one (the check is the rest of the call's CPU)
        c0 = time.process_time()
        net = build_network(topo)
        program = fabric_program(build_schedule(topo, n, channels=channels, network=net))
        build_s = time.process_time() - c0
        c0 = time.process_time()
        simulate_fabric(net, program.program)
        fabric_s = time.process_time() - c0
        got = collective_metrics(run)
        size = f"{mib // 1024} GiB" if mib >= 1024 else f"{mib} MiB"
        print(
            f"{size:>9} {wall:7.2f} {cpu:6.2f} {build_s:9.2f} {fabric_s:10.2f} "
            f"{max(0.0, cpu - build_s - fabric_s):9.2f} {len(run.log):8d} "
            f"{int(got['transfers']):9d} {got['time_ns'] / 1000:10.1f} {got['busbw_gbs']:7.2f} "
            f"{run.wrong:6d}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[1, 64, 1024, 8192], help="MiB")
    parser.add_argument("--channels", type=int, default=7)
    args = parser.parse_args()
    main(args.sizes, args.channels)
