"""Produce tests/data/scalesim_reference.json by running SCALE-Sim itself on the reference files.

    python benchmarks/make_scalesim_reference.py --scalesim-python /work/scalesim-venv/bin/python
    (or set SCALESIM_PYTHON)

Every number in the JSON is SCALE-Sim's own output (its COMPUTE_REPORT.csv and
DETAILED_ACCESS_REPORT.csv row for the layer, as text, exactly as it printed them), run by
``benchmarks/scalesim_driver.py`` one layer at a time under SCALE-Sim's interpreter. Nothing
is typed by hand. The file is rewritten after every layer, and layers already in it are not
run again, so an interrupted run resumes. SCALE-Sim works cycle by cycle (about a millisecond
per cycle here), so the cases below are those it finishes in minutes: the edge files and
ResNet-18 in full, and the gpt2 layers under ``GPT2_MAX_MACS``; its larger layers would take
SCALE-Sim hours each, and tens of GB.
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
GPT2_MAX_MACS = 1 << 27  # QKT and QKTV (67 M MACs each); the Linear layers are 2.6-7.9 G
# (cfg, topology, max MACs or 0 for all), in the order they are run: quick ones first.
CASES = [
    ("edge_8x16.cfg", "edge_gemm.csv", 0),
    ("edge_8x16.cfg", "edge_conv.csv", 0),
    ("scale.cfg", "edge_gemm.csv", 0),
    ("scale.cfg", "gpt2.csv", GPT2_MAX_MACS),
    ("scale.cfg", "Resnet18.csv", 0),
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
    for cfg, topo, max_macs in CASES:
        for df in args.dataflow or DATAFLOWS:
            cmd = [args.scalesim_python, str(DRIVER), str(DATA / cfg), str(DATA / topo), df]
            names = [
                line.split(",")[0].strip()
                for line in (DATA / topo).read_text().splitlines()[1:]
                if line.strip()
            ]
            todo = [n for n in names if (cfg, topo, df, n) not in done]
            if not todo:
                continue
            cmd += ["--layers", ",".join(todo), "--max-macs", str(max_macs)]
            with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
                assert proc.stdout is not None
                for line in proc.stdout:
                    rec = json.loads(line)
                    if "skipped" in rec:
                        print(f"{topo} {df} {rec['layer']}: skipped, {rec['skipped']}")
                        continue
                    rec.update(cfg=cfg, topology=topo)
                    _append(rec, version)
                    print(f"{topo} {df} {rec['layer']}: {rec['wall_s']:.1f} s", flush=True)
            if proc.returncode:
                return proc.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
