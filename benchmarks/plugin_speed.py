"""Wall time of the main job, `pytest --npubench all`, serial against -n auto.

    python benchmarks/plugin_speed.py          # 5 repeats of each, interleaved
    python benchmarks/plugin_speed.py 3

Runs are interleaved (-n 0, -n auto, -n 0, ...) so that a change in the machine's load hits
both alike; prints every run, the medians and their ratio (target, issue 14: -n auto <= 0.8x
of -n 0 and under 10 s on a 2-core machine).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def once(workers: str, artifacts: Path) -> float:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--npubench", "all"]
    cmd += ["-n", workers, f"--npubench-artifacts={artifacts}"]
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}")
    return seconds


def main(repeats: int) -> None:
    times: dict[str, list[float]] = {"0": [], "auto": []}
    with tempfile.TemporaryDirectory(prefix="npubench-speed-") as tmp:
        for r in range(repeats):
            for workers in times:
                seconds = once(workers, Path(tmp) / f"{workers}-{r}")
                times[workers].append(seconds)
                print(f"run {r + 1}: -n {workers:<4} {seconds:6.2f} s", flush=True)
    serial, parallel = (statistics.median(times[w]) for w in ("0", "auto"))
    print(f"median -n 0:    {serial:6.2f} s")
    print(f"median -n auto: {parallel:6.2f} s")
    print(f"ratio -n auto / -n 0: {parallel / serial:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
