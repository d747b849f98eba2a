"""Run SCALE-Sim itself, one layer at a time, and print its report rows as JSON lines.

This script runs under SCALE-Sim's own interpreter (a separate venv: ``pip install scalesim
'numpy<2.4'``), never under the project's. It imports nothing of ``sim``::

    /path/to/scalesim-venv/bin/python benchmarks/scalesim_driver.py CFG TOPOLOGY.csv DATAFLOW \
        [--layers NAME,NAME] [--max-macs N]

For each layer it writes a one-row copy of the topology file and a copy of the cfg with
``Dataflow`` set, times ``scalesim.run_scale`` in this process (``time.perf_counter``, the
file writing of its reports included, the Python start-up excluded), and prints one JSON
object with SCALE-Sim's COMPUTE_REPORT and DETAILED_ACCESS_REPORT row for that layer.
A layer whose MAC count exceeds ``--max-macs`` is reported as skipped, not run.
"""

from __future__ import annotations

import argparse
import configparser
import contextlib
import csv
import io
import json
import os
import sys
import tempfile
import time


def _layers(topology: str) -> tuple[str, list[str]]:
    with open(topology) as f:
        lines = [line for line in f.read().splitlines()]
    header, rows = lines[0], [line for line in lines[1:] if line.strip()]
    return header, rows


def _macs(header: str, row: str) -> int:
    v = [x.strip() for x in row.split(",")]
    if len([h for h in header.split(",") if h.strip()]) == 4:
        return int(v[1]) * int(v[2]) * int(v[3])
    ih, iw, fh, fw, ch, nf, st = (int(x) for x in v[1:8])
    oh, ow = -(-(ih - fh + st) // st), -(-(iw - fw + st) // st)
    return oh * ow * fh * fw * ch * nf


def _report(path: str) -> list[str]:
    with open(path) as f:
        rows = list(csv.reader(f))
    return [x.strip() for x in rows[1] if x.strip() != ""]


def run_layer(cfg: str, header: str, row: str, dataflow: str, gemm: bool) -> dict[str, object]:
    from scalesim.scale_sim import scalesim

    with tempfile.TemporaryDirectory() as tmp:
        conf = configparser.ConfigParser()
        conf.read(cfg)
        conf.set("architecture_presets", "Dataflow", dataflow)
        conf.set("general", "run_name", "run")
        cfg_path = os.path.join(tmp, "run.cfg")
        with open(cfg_path, "w") as f:
            conf.write(f)
        topo_path = os.path.join(tmp, "layer.csv")
        with open(topo_path, "w") as f:
            f.write(header + "\n" + row + "\n")
        t0, c0 = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(io.StringIO()):
            s = scalesim(
                save_disk_space=True,
                verbose=False,
                config=cfg_path,
                topology=topo_path,
                layout=topo_path,  # parsed but unused: custom layouts are off in the cfg
                input_type_gemm=gemm,
            )
            s.run_scale(top_path=os.path.join(tmp, "out"))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        comp = _report(os.path.join(tmp, "out", "run", "COMPUTE_REPORT.csv"))
        detail = _report(os.path.join(tmp, "out", "run", "DETAILED_ACCESS_REPORT.csv"))
    return {"compute_report": comp, "detailed_access_report": detail, "wall_s": wall, "cpu_s": cpu}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cfg")
    p.add_argument("topology")
    p.add_argument("dataflow", choices=["os", "ws", "is"])
    p.add_argument("--layers", default="", help="comma-separated layer names (default: all)")
    p.add_argument("--max-macs", type=int, default=0, help="skip layers above this (0: none)")
    args = p.parse_args()
    header, rows = _layers(args.topology)
    gemm = len([h for h in header.split(",") if h.strip()]) == 4
    wanted = {x for x in args.layers.split(",") if x}
    for row in rows:
        name = row.split(",")[0].strip()
        if wanted and name not in wanted:
            continue
        out: dict[str, object] = {"layer": name, "dataflow": args.dataflow}
        macs = _macs(header, row)
        if args.max_macs and macs > args.max_macs:
            out["skipped"] = f"{macs} MACs > --max-macs {args.max_macs}"
        else:
            out.update(run_layer(args.cfg, header, row, args.dataflow, gemm))
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
