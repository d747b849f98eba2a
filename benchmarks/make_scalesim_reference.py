"""Produce tests/data/scalesim_reference.json by running SCALE-Sim itself on the reference files.

    python benchmarks/make_scalesim_reference.py --scalesim-python /work/scalesim-venv/bin/python
    (or set SCALESIM_PYTHON)

Every number in the JSON is SCALE-Sim's own output (its COMPUTE_REPORT.csv and
DETAILED_ACCESS_REPORT.csv row for the layer, as text, exactly as it printed them), run by
``benchmarks/scalesim_driver.py`` one layer at a time under SCALE-Sim's interpreter. Nothing
is typed by hand. The file is rewritten after every layer, and layers already in it are not
run again, so an interrupted run resumes. SCALE-Sim works cycle by cycle (0.6-2.5 ms per
simulated cycle on this 2-core machine), so ``CASES`` holds what it finishes in about an hour:
the edge files, the distinct layer shapes of ResNet-18 and the attention GEMMs of gpt2.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "scalesim"
OUT = ROOT / "tests" / "data" / "scalesim_reference.json"
DRIVER = ROOT / "benchmarks" / "scalesim_driver.py"
DATAFLOWS = ("os", "ws", "is")
# (cfg, topology, layers in the order they are run, or () for all in file order).
# SCALE-Sim takes 0.6-2.5 ms per simulated cycle here, so whole files do not fit in a run of
# this script: ResNet-18 is 1.7-2.8 M cycles per dataflow (about an hour each, more with three
# dataflows on two cores), gpt2 7-22 M (its Linear layers would take hours each, tens of GB).
# The layers below are the distinct layer shapes of ResNet-18 (its repeated blocks repeat
# shapes), smallest first, and the two attention GEMMs of gpt2; what finished is in the JSON.
RESNET18 = (
    "Conv3_s",
    "Conv4_s",
    "Conv5_s",
    "FC",
    "Conv3_1a",
    "Conv4_1a",
    "Conv5_1a",
    "Conv1",
    "Conv5_1b",
    "Conv4_1b",
    "Conv3_1b",
    "Conv2_1a",
)
CASES: list[tuple[str, str, tuple[str, ...]]] = [
    ("edge_8x16.cfg", "edge_gemm.csv", ()),
    ("edge_8x16.cfg", "edge_conv.csv", ()),
    ("scale.cfg", "edge_gemm.csv", ()),
    ("scale.cfg", "gpt2.csv", ("QKT", "QKTV")),
    ("scale.cfg", "Resnet18.csv", RESNET18),
]


def _load() -> list[dict[str, object]]:
    if OUT.exists():
        rows: list[dict[str, object]] = json.loads(OUT.read_text())["layers"]
        return rows
    return []


def _append(rec: dict[str, object], version: str) -> None:
    """Add one layer under a lock: one run per dataflow may write at the same time."""
    with open(Path(tempfile.gettempdir()) / "scalesim_reference.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows = [*_load(), rec]
        rows.sort(key=lambda r: (str(r["cfg"]), str(r["topology"]), str(r["dataflow"])))
        doc = {
            "produced_by": "benchmarks/make_scalesim_reference.py",
            "scalesim_version": version,
            "layers": rows,
        }
        OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def _version(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('scalesim'))"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scalesim-python", default=os.environ.get("SCALESIM_PYTHON", ""))
    p.add_argument("--dataflow", action="append", choices=DATAFLOWS, help="default: all")
    args = p.parse_args()
    if not args.scalesim_python:
        p.error("give --scalesim-python PATH or set SCALESIM_PYTHON (a venv with scalesim)")
    version = _version(args.scalesim_python)
    rows = _load()
    done = {(r["cfg"], r["topology"], r["dataflow"], r["layer"]) for r in rows}
    for cfg, topo, layers in CASES:
        names = list(layers) or [
            line.split(",")[0].strip()
            for line in (DATA / topo).read_text().splitlines()[1:]
            if line.strip()
        ]
        for df in args.dataflow or DATAFLOWS:
            for name in names:
                if (cfg, topo, df, name) in done:
                    continue
                cmd = [args.scalesim_python, str(DRIVER), str(DATA / cfg), str(DATA / topo), df]
                out = subprocess.run([*cmd, "--layers", name], check=True, capture_output=True)
                rec = json.loads(out.stdout)
                rec.update(cfg=cfg, topology=topo)
                _append(rec, version)
                print(f"{topo} {df} {name}: {rec['wall_s']:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
