"""Wall time of the main job, `pytest --npubench all`, serial against -n auto.

    python benchmarks/plugin_speed.py          # 5 repeats of each, interleaved
    python benchmarks/plugin_speed.py 3

Runs are interleaved (-n 0, -n auto, -n 0, ...) so that a change in the machine's load hits
both alike; prints every run's wall and CPU time (user + system of the run and every process
it started: workers, figure children), the medians and their ratio (target, issue 14:
-n auto <= 0.8x of -n 0 and under 10 s on a 2-core machine). The load average is printed
too: on a shared machine wall times are only comparable within one interleaved table.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def once(workers: str, artifacts: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one run of the main job."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--npubench", "all"]
    cmd += ["-n", workers, f"--npubench-artifacts={artifacts}"]
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}")
    return seconds, _children_cpu() - cpu


def main(repeats: int) -> None:
    wall: dict[str, list[float]] = {"0": [], "auto": []}
    cpu: dict[str, list[float]] = {"0": [], "auto": []}
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    with tempfile.TemporaryDirectory(prefix="npubench-speed-") as tmp:
        for r in range(repeats):
            for workers in wall:
                seconds, used = once(workers, Path(tmp) / f"{workers}-{r}")
                wall[workers].append(seconds)
                cpu[workers].append(used)
                print(
                    f"run {r + 1}: -n {workers:<4} {seconds:6.2f} s wall {used:6.2f} s CPU",
                    flush=True,
                )
    serial, parallel = (statistics.median(wall[w]) for w in ("0", "auto"))
    cpu_serial, cpu_parallel = (statistics.median(cpu[w]) for w in ("0", "auto"))
    print(f"median -n 0:    {serial:6.2f} s wall {cpu_serial:6.2f} s CPU")
    print(f"median -n auto: {parallel:6.2f} s wall {cpu_parallel:6.2f} s CPU")
    print(f"ratio -n auto / -n 0: {parallel / serial:.2f}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
