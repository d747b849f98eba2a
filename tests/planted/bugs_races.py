"""Planted races (issue 26, class 1): dependencies that a comm-bound replay never exposes.

Each bug keeps every gated number of main's gate (the symmetric chips or the GEMM-first
timing hide it) and breaks the data only under another timing; the dependency check
(``sim.tp.depcheck``) fails it in every run, naming both ops.
"""

from __future__ import annotations

from bugs_registry import Bug


def _gemm_ar_gated_on_neighbour() -> None:
    """gemm_ar: each chip's allreduce ops of a chunk wait for its ring *neighbour's* GEMM of
    that chunk instead of its own (the chip index and the ring position mixed up)."""
    import sim.tp.build as b

    original = b._Builder.rows_ready

    def allreduce_rows(self: b._Builder, r0: int, r1: int) -> None:
        def neighbours(chip: int, stage: str, lo: int, hi: int) -> list[int]:
            return original(self, (chip + 1) % self.p, stage, lo, hi)

        self.rows_ready = neighbours  # type: ignore[method-assign]
        try:
            unpatched(self, r0, r1)
        finally:
            del self.rows_ready

    unpatched = b._Builder.allreduce_rows
    b._Builder.allreduce_rows = allreduce_rows  # type: ignore[method-assign]


def _ag_rs_second_half_waits_first() -> None:
    """ag_rs: a reduce-scatter step's reduction into half 1 waits for the step's GEMM block
    of half 0 (``ids[0:1]`` for both halves), so it can land before half 1's partial is
    computed and the GEMM then overwrites the sum."""
    import sim.tp.build as b

    land = b._Builder.land

    Ops = dict[tuple[int, int], list[int]]

    def patched_land(self: b._Builder, buf: str, sent: Ops, reduce: bool, gemm_of: Ops) -> Ops:
        if reduce and self.gemm:
            gemm_of = {(c, h): gemm_of.get((c, 0), []) if h else v for (c, h), v in gemm_of.items()}
        return land(self, buf, sent, reduce, gemm_of)

    b._Builder.land = patched_land  # type: ignore[method-assign]


def _ccl_send_reads_before_the_reduction() -> None:
    """ccl: a reduce-scatter step's send forwards the chunk the step before *received*, waiting
    for its arrival instead of its reduction (recvReduceSend waiting on the recv): it reads the
    buffer before the previous step's sum is in it. The reduction ends one burst after the
    arrival and the send's last byte leaves far later, so the replay still reads the sum
    where the chunks are large."""
    import dataclasses

    import sim.collectives.lockstep as lockstep
    from sim.fabric import REDUCTION, TRANSFER

    build = lockstep.fabric_program

    def early_sends(schedule):  # type: ignore[no-untyped-def]
        compiled = build(schedule)
        prog = compiled.program
        deps = list(prog.deps)
        for i, kind in enumerate(prog.kind):
            if kind == TRANSFER and deps[i] and all(prog.kind[d] == REDUCTION for d in deps[i]):
                deps[i] = tuple(sorted({prog.consumes[d] for d in deps[i]}))
        return dataclasses.replace(compiled, program=dataclasses.replace(prog, deps=deps))

    lockstep.fabric_program = early_sends


def _gemm_a_load_ignores_its_buffers_reader() -> None:
    """GEMM, the streaming modes: a tile-op's A load does not wait for the fetch that last
    read its buffer (tile-op ``i - buffers``'s), only its B load does, so A's buffer can be
    overwritten before its reader fetched it. The replay's WAR check names A's buffer and
    both ops in every streamed config, the compute-bound ones included."""
    import sim.gemm.blocks as blocks
    from sim.core import Op

    load = blocks.BlockBuilder._load_tile

    def patched(self, ops, acc, i, freed_by):  # type: ignore[no-untyped-def]
        load(self, ops, acc, i, freed_by)
        if freed_by >= 0:
            a = ops[-2]
            ops[-2] = tuple.__new__(Op, (a[0], a[1], (), *a[3:]))

    blocks.BlockBuilder._load_tile = patched  # type: ignore[method-assign]


def _ccl_ring_quotient_rings_mixed_up() -> None:
    """ccl, the symmetric ring fast path: from the second step on, each ring-1 send of chip
    0's quotient program waits for the ring-0 receive of its chunk instead of its own ring's
    (an index off by one between the interleaved rings). The data the sends forward is
    usually there anyway: the replay passes the large and the all-gather configs."""
    import sim.collectives.fast as fast
    from sim.fabric import TRANSFER

    build = fast.quotient_program

    def patched(case):  # type: ignore[no-untyped-def]
        prog = build(case)
        per_step = 4 * len(case.sizes)
        for i, kind in enumerate(prog.kind):
            step, rest = divmod(i, per_step)
            if kind == TRANSFER and step >= 1 and rest % 2 == 1 and prog.deps[i]:
                prog.deps[i] = tuple(d - 1 for d in prog.deps[i])
        return prog

    fast.quotient_program = patched


BUGS: dict[str, Bug] = {
    "tp-gemm-ar-gated-on-neighbour": _gemm_ar_gated_on_neighbour,
    "tp-ag-rs-second-half-waits-first": _ag_rs_second_half_waits_first,
    "ccl-send-reads-before-the-reduction": _ccl_send_reads_before_the_reduction,
    "ccl-ring-quotient-rings-mixed-up": _ccl_ring_quotient_rings_mixed_up,
    "gemm-a-load-ignores-its-buffers-reader": _gemm_a_load_ignores_its_buffers_reader,
}
