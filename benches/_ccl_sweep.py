"""The ccl bench's axes (not a bench: the name starts with ``_``): message sizes,
interconnects, chip counts, the collectives beside allreduce and which configs are gated;
shared by the bench and its figures."""

from __future__ import annotations

from typing import Any

KIB, MIB = 1024, 1024 * 1024
SIZES = [KIB * 4**i for i in range(10)]  # 1 KiB .. 256 MiB, nccl-tests style
TOPOLOGIES = ["ring", "fully_connected", "switch", "torus2d"]
CHIPS = [4, 6, 8, 9, 12, 16]
GATED_CHIPS = 8  # the chip count the figures draw
GATED_SIZES = {
    8: (4 * KIB, 256 * KIB, 16 * MIB),
    4: (64 * MIB,),
    16: (64 * KIB,),
    6: (MIB,),
    9: (MIB,),
}
TORUS_DIMS = {4: (2, 2), 6: (2, 3), 8: (2, 4), 9: (3, 3), 12: (3, 4), 16: (4, 4)}


def gated(params: dict[str, Any]) -> bool:
    """Whether a config is gated (runs in every ``--npubench ccl``), per the module docstring."""
    return params["size"] in GATED_SIZES.get(params["chips"], ())


def size_label(nbytes: int) -> str:
    """1 KiB, 4 KiB, ..., 256 MiB: sizes as powers of 1024, as nccl-tests sweeps them."""
    if nbytes >= MIB and nbytes % MIB == 0:
        return f"{nbytes // MIB} MiB"
    return f"{nbytes // KIB} KiB" if nbytes % KIB == 0 else f"{nbytes} B"


#: the collectives beside allreduce (``sim.collectives.catalog``), each a sweep group of its own
#: per interconnect with every algorithm it runs; their configs carry a ``collective`` param
MORE_COLLECTIVES = ["all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv"]
#: their chip counts: GATED_CHIPS at every size (the figures), the others at every other
#: size by x16 (1 KiB .. 64 MiB), so that their regen-only configs stay few enough that a
#: gated run does not pay much for skipping them
MORE_CHIPS = [4, 6, 9, 16]
MORE_SIZES = SIZES[::2]
#: gated sizes of those: one per chip-count class (a power of two, even, odd), small enough
#: that their 180 configs add a few seconds to the gated run
MORE_GATED_SIZES = {8: (MIB,), 6: (16 * KIB,), 9: (16 * KIB,)}


def gated_more(params: dict[str, Any]) -> bool:
    """Whether a config of another collective is gated (:data:`MORE_GATED_SIZES`)."""
    return params["size"] in MORE_GATED_SIZES.get(params["chips"], ())
