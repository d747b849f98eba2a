"""A fast, deterministic NPU simulator: topologies, engines, op logs, GEMM and collectives.

``sim`` imports neither pytest nor the plugin: use it as a library or from a notebook::

    from sim import load_topology, run_gemm, gemm_metrics
    run = run_gemm("512x512x512", "double_buffer", load_topology("npu-1h"))
    gemm_metrics(run)["latency_ns"]
    allreduce(load_topology("npu-1h"), 64 << 20, "ring").time_ps
"""

from __future__ import annotations

from sim.collectives import (
    all_gather,
    allreduce,
    alltoall,
    broadcast,
    collective_bounds,
    collective_metrics,
    collective_model,
    reduce,
    reduce_scatter,
    run_collective,
    sendrecv,
)
from sim.core import SimulationError, simulate, simulate_reference
from sim.errors import BudgetError, InputError, NpuSimError, TopologyError
from sim.gemm.check import check_coverage, functional_check
from sim.gemm.datacheck import check_gemm_data
from sim.gemm.metrics import busy_ps, gemm_metrics
from sim.gemm.model import gemm_model, roofline_tflops
from sim.gemm.run import run_gemm
from sim.gemm.shape import VARIANTS, GemmShape, ShapeError, SramCapacityError
from sim.oplog import OpLog
from sim.program import ProgramBuilder
from sim.scalesim_files import read_scalesim_config, read_scalesim_topology
from sim.systolic import (
    ArrayConfig,
    LayerReport,
    ScaleSimInputError,
    SystolicLayer,
    simulate_layer,
)
from sim.topology import Topology, available_topologies, load_topology
from sim.tp.config import LayerConfig
from sim.tp.datacheck import check_layer_data
from sim.tp.metrics import layer_metrics
from sim.tp.run import run_layer
from sim.trace import chrome_trace, write_trace

__all__ = [
    "VARIANTS",
    "ArrayConfig",
    "BudgetError",
    "GemmShape",
    "InputError",
    "LayerConfig",
    "LayerReport",
    "NpuSimError",
    "OpLog",
    "ProgramBuilder",
    "ScaleSimInputError",
    "ShapeError",
    "SimulationError",
    "SramCapacityError",
    "SystolicLayer",
    "Topology",
    "TopologyError",
    "all_gather",
    "allreduce",
    "alltoall",
    "available_topologies",
    "broadcast",
    "busy_ps",
    "check_coverage",
    "check_gemm_data",
    "check_layer_data",
    "chrome_trace",
    "collective_bounds",
    "collective_metrics",
    "collective_model",
    "functional_check",
    "gemm_metrics",
    "gemm_model",
    "layer_metrics",
    "load_topology",
    "read_scalesim_config",
    "read_scalesim_topology",
    "reduce",
    "reduce_scatter",
    "roofline_tflops",
    "run_collective",
    "run_gemm",
    "run_layer",
    "sendrecv",
    "simulate",
    "simulate_layer",
    "simulate_reference",
    "write_trace",
]
