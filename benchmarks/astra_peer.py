"""ASTRA-sim 2 beside our simulator, measured in the same run (issue 25's peer).

Used by ``benchmarks/ccl_scale.py``; runnable alone:

    python benchmarks/astra_peer.py 64 256      # ring allreduce, p = 64, 256 MiB

ASTRA-sim is built outside the repository as ``../shared/astra-sim/README.md`` says (commit
c459ab6, analytical backend, congestion-aware). Where it is:

* ``$ASTRA_SIM_ROOT`` (default ``/work/astra-build/astra-sim``): the source tree with
  ``build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Aware`` built;
* ``$ASTRA_SIM_PYTHON`` (default ``/work/astra-build/pbvenv/bin/python``): a Python with
  ``protobuf==4.21.12``, which writes the Chakra execution traces (this file, ``--write-et``,
  importing only the ``et_def_pb2`` module protoc generated from Chakra's schema).

Set up alike (the facts are in ../shared/astra-sim/README.md): the link bandwidth and hop
latency are read from our topology (ASTRA-sim's ``bandwidth`` is GiB/s, so ``bw_gbs * 1e9 /
2**30``), both ring directions (``--num-queues-per-dim=2`` with the ``baseline`` collective
optimisation), 16 splits and 16 active chunks (``sys_pipelined.json``), no memory expansion.
The collective's time is the largest ``sys[i] finished, N cycles`` over the NPUs (cycles are
ns). Wall and CPU time are the child's own (``os.wait4``). Peak RSS is not: a child forked
from Python starts with Python's pages, and Linux keeps that high-water mark across
``exec`` (about 38 MiB here, whatever the simulator uses), so the binary runs under
``/usr/bin/time -f %M``, whose own child is forked from a small process; without it the
wait4 figure is printed as an upper bound (``rss_is`` says which).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "astra-sim"
ROOT = Path(os.environ.get("ASTRA_SIM_ROOT", "/work/astra-build/astra-sim"))
PYTHON = Path(os.environ.get("ASTRA_SIM_PYTHON", "/work/astra-build/pbvenv/bin/python"))
BINARY = ROOT / "build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Aware"
PROTO_DIR = ROOT / "extern/graph_frontend/chakra/schema/protobuf"
FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")


def available() -> str | None:
    """None when ASTRA-sim can run here, else why not."""
    if not BINARY.is_file():
        return f"not built ({BINARY} is absent; ../shared/astra-sim/README.md says how)"
    if not PYTHON.is_file():
        return f"no trace writer ({PYTHON}: a Python with protobuf==4.21.12)"
    if not SHARED.is_dir():
        return f"no set-up files ({SHARED})"
    return None


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def write_et(folder: Path, npus: int, size_bytes: int) -> None:
    """One COMM_COLL_NODE ALL_REDUCE of ``size_bytes`` per NPU (runs under $ASTRA_SIM_PYTHON)."""
    sys.path.insert(0, str(PROTO_DIR))
    import et_def_pb2 as et  # type: ignore[import-not-found]

    folder.mkdir(parents=True, exist_ok=True)
    for npu in range(npus):
        node = et.Node(id=0, name="all_reduce", type=et.COMM_COLL_NODE)
        node.attr.append(et.AttributeProto(name="is_cpu_op", bool_val=False))
        node.attr.append(et.AttributeProto(name="comm_type", int64_val=et.ALL_REDUCE))
        node.attr.append(et.AttributeProto(name="comm_size", int64_val=size_bytes))
        with open(folder / f"all_reduce.{npu}.et", "wb") as f:
            for message in (et.GlobalMetadata(version="0.0.4"), node):
                data = message.SerializeToString()
                f.write(_varint(len(data)) + data)


def network_yaml(shape: str, npus: int, bw_gbs: float, latency_ns: float) -> str:
    gib_s = bw_gbs * 1e9 / 2**30
    return (
        f"topology: [ {shape} ]\nnpus_count: [ {npus} ]\n"
        f"bandwidth: [ {gib_s!r} ]  # GiB/s = {bw_gbs} GB/s\nlatency: [ {latency_ns!r} ]  # ns\n"
    )


def run_allreduce(
    npus: int, size_bytes: int, bw_gbs: float, latency_ns: float, shape: str = "Ring"
) -> dict[str, float | str]:
    """ASTRA-sim's ring allreduce: simulated ns, wall s, peak RSS MiB (the simulator alone)."""
    why = available()
    if why:
        raise RuntimeError(f"ASTRA-sim: {why}")
    work = Path(tempfile.mkdtemp(prefix="astra-"))
    try:
        subprocess.run(
            [str(PYTHON), __file__, "--write-et", str(work / "et"), str(npus), str(size_bytes)],
            check=True,
        )
        net = work / "net.yml"
        net.write_text(network_yaml(shape, npus, bw_gbs, latency_ns))
        command = [
            str(BINARY),
            f"--workload-configuration={work / 'et' / 'all_reduce'}",
            f"--system-configuration={SHARED / 'sys_pipelined.json'}",
            f"--remote-memory-configuration={SHARED / 'mem.json'}",
            f"--network-configuration={net}",
            "--num-queues-per-dim=2",
        ]
        gnu_time = shutil.which("time", path="/usr/bin")
        rss_file = work / "rss.txt"
        if gnu_time:
            command = [gnu_time, "-f", "%M", "-o", str(rss_file), *command]
        out = open(work / "out.txt", "wb")  # noqa: SIM115
        t0 = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=work)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - t0
        child.returncode = os.waitstatus_to_exitcode(status)
        out.close()
        text = (work / "out.txt").read_text(errors="replace")
        if child.returncode != 0:
            raise RuntimeError(f"ASTRA-sim exited {child.returncode}: {text[-2000:]}")
        finished = [int(c) for _, c in FINISHED.findall(text)]
        if len(finished) != npus:
            raise RuntimeError(
                f"ASTRA-sim: {len(finished)} of {npus} NPUs finished: {text[-2000:]}"
            )
        rss_kib = (
            float(rss_file.read_text().split()[-1]) if gnu_time and rss_file.exists() else None
        )
        return {
            "sim_ns": float(max(finished)),
            "wall": wall,
            "cpu": usage.ru_utime + usage.ru_stime,
            "rss": (rss_kib if rss_kib is not None else usage.ru_maxrss) / 1024,
            "rss_is": "own" if rss_kib is not None else "upper bound (includes the launcher's)",
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1] == "--write-et":
        write_et(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from sim import load_topology

        topo = load_topology()
        p, mib = int(sys.argv[1]), int(sys.argv[2])
        print(
            json.dumps(
                run_allreduce(p, mib << 20, topo.chips.link_bw_gbs, topo.chips.link_latency_ns)
            )
        )
