"""Run a tensor-parallel layer: the joint run, and the compute and communication runs alone."""

from __future__ import annotations

from dataclasses import dataclass

from sim.fabric import Network, build_network
from sim.oplog import OpLog
from sim.topology import Topology
from sim.tp.build import _Builder, _Built
from sim.tp.config import LayerConfig, LayerError
from sim.tp.cosim import simulate_joint

__all__ = ["LayerRun", "run_layer"]


@dataclass(frozen=True)
class LayerRun:
    """A layer's joint run and the two runs alone (compute only, communication only)."""

    cfg: LayerConfig
    topo: Topology
    net: Network
    built: _Built
    log: OpLog
    compute_log: OpLog
    comm_log: OpLog

    @property
    def latency_ps(self) -> int:
        return self.log.makespan_ps


def run_layer(cfg: LayerConfig, topo: Topology) -> LayerRun:
    """Build and time the layer on ``topo.chips`` (its count is the TP degree)."""
    net = build_network(topo)
    if net.chips < 2:
        raise LayerError(f"a tensor-parallel layer needs at least 2 chips, got {net.chips}")
    built = _Builder(cfg, topo, net).build()
    log, _ = simulate_joint(topo, net, built.prog)
    comp = _Builder(cfg, topo, net, comm=False).build()
    comm = _Builder(cfg, topo, net, gemm=False).build()
    return LayerRun(
        cfg,
        topo,
        net,
        built,
        log,
        simulate_joint(topo, net, comp.prog)[0],
        simulate_joint(topo, net, comm.prog)[0],
    )
