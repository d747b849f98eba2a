"""Where overlap pays: speed-up of gemm_ar and ag_rs over serial, and overlap vs chunk size.

    .venv/bin/python benchmarks/tp_overlap.py [hidden] [topology]

Table 1: speed-up over serial (serial latency / mode latency) and overlap efficiency (share of
the smaller of compute and communication that was hidden) per layer x mode x tokens x TP, on
the topology file's hardware (``npu-1h``; ring by default). Table 2: gemm_ar's overlap
efficiency vs its chunk count, on npu-1h and on a what-if with links 16x slower
(``link_bw_gbs`` / 16), where communication is comparable to compute. Every number is
simulated (``sim.tp``); CPU time is printed beside wall time.
"""

from __future__ import annotations

import sys
import time

from sim import load_topology
from sim.topology import Topology
from sim.tp.config import LayerConfig
from sim.tp.metrics import layer_metrics
from sim.tp.run import run_layer

TOKENS = [128, 512, 2048, 8192]
TP = [2, 4, 8]
CHUNKS = [1, 2, 4, 8, 16, 32]


def topo_for(base: Topology, p: int, kind: str, slow: int = 1) -> Topology:
    return base.replace_chips(
        count=p, topology=kind, torus_dims=(1, p), link_bw_gbs=base.chips.link_bw_gbs / slow
    )


def speedup_table(base: Topology, hidden: int, kind: str) -> None:
    print(f"\n## speed-up over serial, hidden {hidden}, {kind} (eff = overlap efficiency)")
    print("| layer | mode | " + " | ".join(f"TP{p} t{t}" for p in TP for t in TOKENS) + " |")
    print("|---|---|" + "---|" * (len(TP) * len(TOKENS)))
    for layer in ("mlp", "attn"):
        runs = {
            (p, t, m): layer_metrics(
                run_layer(LayerConfig(layer, t, hidden, m), topo_for(base, p, kind))
            )
            for p in TP
            for t in TOKENS
            for m in ("serial", "gemm_ar", "ag_rs")
        }
        for mode in ("gemm_ar", "ag_rs"):
            cells = []
            for p in TP:
                for t in TOKENS:
                    s, r = runs[(p, t, "serial")], runs[(p, t, mode)]
                    cells.append(
                        f"{s['latency_ns'] / r['latency_ns']:.3f} (eff {r['overlap_eff']:.2f})"
                    )
            print(f"| {layer} | {mode} | " + " | ".join(cells) + " |")
        comm = [runs[(p, t, "serial")] for p in TP for t in TOKENS]
        ratio = " | ".join(f"{m['comm_ns'] / m['compute_ns']:.3f}" for m in comm)
        print(f"| {layer} | comm/compute | {ratio} |")


def chunk_table(base: Topology, kind: str) -> None:
    print(f"\n## gemm_ar overlap efficiency vs chunks (attn and mlp, hidden 4096, TP 4, {kind})")
    print("| hardware | layer | tokens | comm/compute | " + " | ".join(f"c{c}" for c in CHUNKS))
    print("|---|---|---|---|" + "---|" * len(CHUNKS))
    for slow, label in ((1, "npu-1h"), (16, "links / 16")):
        topo = topo_for(base, 4, kind, slow)
        for layer in ("attn", "mlp"):
            for t in (512, 2048):
                effs, ratio = [], 0.0
                for c in CHUNKS:
                    m = layer_metrics(run_layer(LayerConfig(layer, t, 4096, "gemm_ar", c), topo))
                    ratio = m["comm_ns"] / m["compute_ns"]
                    effs.append(f"{m['overlap_eff']:.2f}")
                print(f"| {label} | {layer} | {t} | {ratio:.3f} | " + " | ".join(effs) + " |")


def main() -> None:
    hidden = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    kind = sys.argv[2] if len(sys.argv) > 2 else "ring"
    base = load_topology("npu-1h")
    cpu, wall = time.process_time(), time.perf_counter()
    speedup_table(base, hidden, kind)
    chunk_table(base, kind)
    print(
        f"\n{time.process_time() - cpu:.1f} s CPU, {time.perf_counter() - wall:.1f} s wall "
        "(2-core machine shared with other jobs)"
    )


if __name__ == "__main__":
    main()
