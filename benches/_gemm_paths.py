"""The GEMM bench's path configs (not a bench: the name starts with ``_``): one cheap gated
config for each code path the shapes x variants sweep reaches only in regen-only configs,
or not at all (issue 26; ``tests/benches/test_path_coverage.py`` derives the paths from the
program each config builds and fails for a path no gated config takes).

- the systolic PE's ``ws`` and ``is`` dataflows (the sweep runs ``os`` only): 128x128x128
  ``prefetch``, 32 tile-ops, each two folds of the 32 x 32 array (``os``: one);
- a deep K cut into chunks in the streaming variants (``load_ref``, ``double_buffer``,
  ``prefetch``): 32x2112x32, 33 tile-ops per output tile, a chunk of 32 and a last chunk of
  one (only ``resident``'s panel mode ran chunks in a gated config, whole ones);
- ``resident``'s panel mode whose rows the fast path jumps, beyond the data replay's
  ``FUNCTIONAL_MAX_TILE_OPS``: 2048x1024x1024, 32768 tile-ops in about 20 ms;
- a compute-bound run whose data is replayed, for the overlap modes that had none
  (``double_buffer``: every tile-PE config is DMA-bound, the PE's 16 ns a tile-op against
  the DMA's 32; ``resident``'s panel mode: HBM-bound): on the systolic PE (``os``, named so
  that it runs beside the variant :mod:`benches._gemm_systolic` pairs) the loads run ahead
  of the compute, where a load that overwrites a buffer still to be read shows in the data.
  128x128x128 ``double_buffer`` (32 tile-ops) and 512x4096x32 ``resident`` (panels, 1024
  tile-ops, the cheapest compute-bound panel shape: about 0.25 s).
"""

from __future__ import annotations

from pytest_npubench import Sweep

SWEEP = [
    Sweep(
        {
            "shape": [(128, 128, 128)],
            "variant": ["prefetch"],
            "pe": ["systolic"],
            "dataflow": ["ws", "is"],
        },
        gated=True,
    ),
    Sweep(
        {
            "shape": [(32, 2112, 32)],
            "variant": ["load_ref", "double_buffer", "prefetch"],
            "pe": ["tile"],
        },
        gated=True,
    ),
    Sweep({"shape": [(2048, 1024, 1024)], "variant": ["resident"], "pe": ["tile"]}, gated=True),
    *(
        Sweep(
            {"shape": [shape], "variant": [variant], "pe": ["systolic"], "dataflow": ["os"]},
            gated=True,
        )
        for shape, variant in (((128, 128, 128), "double_buffer"), ((512, 4096, 32), "resident"))
    ),
]
