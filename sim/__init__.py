"""A fast, deterministic NPU simulator: topologies, engines, op logs, GEMM and collectives.

``sim`` imports neither pytest nor the plugin: use it as a library or from a notebook::

    from sim import load_topology, run_gemm, gemm_metrics
    run = run_gemm("512x512x512", "double_buffer", load_topology("npu-1h"))
    gemm_metrics(run)["latency_ns"]
    allreduce(load_topology("npu-1h"), 64 << 20, "ring").time_ps
"""

from __future__ import annotations

from sim.analysis import busy_ps, gemm_metrics
from sim.collectives import (
    all_gather,
    allreduce,
    collective_metrics,
    collective_model,
    reduce_scatter,
)
from sim.core import SimulationError, simulate, simulate_reference
from sim.errors import BudgetError, InputError, NpuSimError, TopologyError
from sim.kernels.gemm import (
    VARIANTS,
    GemmShape,
    ShapeError,
    SramCapacityError,
    check_coverage,
    functional_check,
    run_gemm,
)
from sim.kernels.tp_layer import LayerConfig, check_layer_data, layer_metrics, run_layer
from sim.model import gemm_model, roofline_tflops
from sim.oplog import OpLog
from sim.program import ProgramBuilder
from sim.systolic import (
    ArrayConfig,
    LayerReport,
    ScaleSimInputError,
    SystolicLayer,
    read_scalesim_config,
    read_scalesim_topology,
    simulate_layer,
)
from sim.topology import Topology, available_topologies, load_topology
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
    "available_topologies",
    "busy_ps",
    "check_coverage",
    "check_layer_data",
    "chrome_trace",
    "collective_metrics",
    "collective_model",
    "functional_check",
    "gemm_metrics",
    "gemm_model",
    "layer_metrics",
    "load_topology",
    "read_scalesim_config",
    "read_scalesim_topology",
    "reduce_scatter",
    "roofline_tflops",
    "run_gemm",
    "run_layer",
    "simulate",
    "simulate_layer",
    "simulate_reference",
    "write_trace",
]
