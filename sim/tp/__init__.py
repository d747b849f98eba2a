"""Tensor-parallel transformer layers: each chip's GEMM shards and the collectives on one clock.

Layers (Megatron-LM, Shoeybi et al. 2019), ``T`` tokens, hidden ``h``, ``p`` chips:

* ``mlp``: ``Y = (X @ W1) @ W2``; W1 ``[h, 4h]`` column parallel (chip c holds ``4h/p``
  columns, so gemm1 is ``T x h x 4h/p``), W2 ``[4h, h]`` row parallel (gemm2 ``T x 4h/p x h``)
  whose partial outputs must be summed over the chips. The activation is left out: it is
  element-wise and moves nothing between chips (and integer data stays exact).
* ``attn``: the attention output projection ``Y = A @ Wo`` with ``A`` already split by heads
  (chip c holds ``h/p`` columns): one row-parallel gemm2 ``T x h/p x h``.

Modes:

* ``serial``: the GEMMs, then a ring allreduce of ``Y`` (``sim.collectives``).
* ``gemm_ar``: gemm2 is cut into ``chunks`` groups of token rows; the allreduce of each
  group starts on a chip as soon as that chip has finished the group (FLUX's and
  Triton-distributed's ``gemm_ar``), while the GEMM goes on.
* ``ag_rs`` (sequence parallelism, Korthikanti et al. 2022; PyTorch async TP): the input
  ``X`` is split by tokens; gemm1 runs in ``p`` steps, step ``s`` on the block received in
  step ``s-1`` while the next block travels (all-gather as ``p`` steps of peer-to-peer
  transfers to both ring neighbours, each carrying half of a block); gemm2 runs in ``p``
  steps whose partial outputs are accumulated around both rings (reduce-scatter): the chip
  at ring position ``q`` ends with its own token block of ``Y``, summed. ``attn`` has no
  all-gather (its input is the attention output, already split by heads).

Granularity (docs/adr/0014-tensor-parallel-layer.md): ``coarse`` runs one op per group of
output tiles (rows), its PE time taken from the real GEMM simulator run alone
(:func:`gemm_curve`) and its HBM bytes streamed over its duration; ``tile`` runs the GEMM's
own tile-level program (``sim.gemm.program.GemmProgram``) inside the joint engine.

Modules, each one job, lower layers first: ``config`` (``LayerConfig``, the shard shapes),
``curve`` (a shard GEMM's progress alone), ``cosim`` (the joint event engine), ``build``
(the joint program), ``run`` (``run_layer``), ``metrics`` (``layer_metrics`` and the
analytic model), ``datacheck`` (the replay on integer data). The public names are exported
by ``sim``.
"""
