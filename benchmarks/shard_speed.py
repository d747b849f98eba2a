"""The full regen sweep as N shards, run one after another here, against one unsharded run.

    python benchmarks/shard_speed.py            # 4 shards
    python benchmarks/shard_speed.py 3

Works in a throwaway clone of the committed tree (baselines/ of this checkout are never
touched). Prints each shard's wall time and config count, the merge's, the critical path a CI
matrix would see (slowest shard + merge), the unsharded regen's wall time, and whether the
merged artifacts equal the unsharded run's byte for byte.
"""

from __future__ import annotations

import filecmp
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPARED = ("results.json", "summary.md", "index.html")


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}")
    return time.perf_counter() - start


def same_tree(a: Path, b: Path) -> bool:
    names = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    other = sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    return names == other and all(filecmp.cmp(a / n, b / n, shallow=False) for n in names)


def main(count: int) -> None:
    pytest = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
    with tempfile.TemporaryDirectory(prefix="npubench-shards-") as tmp:
        work = Path(tmp) / "repo"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(work)], check=True)
        whole = timed([*pytest, "--npubench", "all", "--regen-baselines", "-n", "0"], work)
        shutil.move(work / "npubench-artifacts", Path(tmp) / "whole")
        subprocess.run(["git", "checkout", "-q", "--", "baselines"], cwd=work, check=True)
        rows = []
        for k in range(1, count + 1):
            seconds = timed(
                [
                    *pytest,
                    "--npubench",
                    "all",
                    "--regen-baselines",
                    "-n",
                    "0",
                    f"--npubench-shard={k}/{count}",
                    f"--npubench-artifacts={tmp}/shard{k}",
                ],
                work,
            )
            shard = json.loads((Path(tmp) / f"shard{k}" / "shard.json").read_text())
            configs = sum(len(v) for v in shard["results"].values())
            rows.append((k, configs, seconds))
        merge = timed(
            [
                sys.executable,
                "-m",
                "pytest_npubench",
                "merge",
                *(f"{tmp}/shard{k}" for k in range(1, count + 1)),
                "--regen-baselines",
            ],
            work,
        )
        equal = same_tree(work / "npubench-artifacts", Path(tmp) / "whole")
    print(f"full regen sweep ({ROOT.name}), {count} shards run one after another, -n 0 each")
    print(f"{'shard':>6} {'configs':>8} {'wall s':>8}")
    for k, configs, seconds in rows:
        print(f"{k:>4}/{count} {configs:>8} {seconds:>8.2f}")
    slowest = max(s for _, _, s in rows)
    print(f"{'merge':>6} {'':>8} {merge:>8.2f}")
    print(f"critical path (slowest shard + merge): {slowest + merge:.2f} s")
    print(f"unsharded regen: {whole:.2f} s; ratio {whole / (slowest + merge):.2f}x")
    print(f"merged artifacts equal the unsharded run's byte for byte: {'yes' if equal else 'NO'}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
