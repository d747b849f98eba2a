"""The single-chip GEMM ``C[M,N] = A[M,K] @ B[K,N]``: shape, program, run, model, metrics.

Modules, each one job, lower layers first (a module imports only those before it):

* ``shape``: the shape and its padded tile plan; ``buffers``: buffer counts, Little's law;
  ``tile_op``: a PE tile-op's issue interval and latency on a topology;
* ``layout``: a program's mode, buffers, SRAM/HBM layout, op ids and addresses (closed
  forms); ``blocks``: the ops of one block and what each moves; ``program``:
  ``GemmProgram``, with what the engine's fast path needs to repeat a period;
* ``run``: ``run_gemm``; ``check``: coverage and the functional check; ``datacheck``: the
  replay on real bytes; ``model``: the analytic model and bounds; ``metrics``:
  ``gemm_metrics``.

The public names are exported by ``sim`` (``from sim import run_gemm, gemm_metrics``).
"""
