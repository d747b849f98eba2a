"""Planted bugs in paths no gated config took before issue 26's path configs (class 2)."""

from __future__ import annotations

from bugs_registry import Bug


def _systolic_is_row_folds_floor_plus_one() -> None:
    """The ``is`` dataflow counts its row folds as ``Sr // rows + 1`` instead of
    ``ceil(Sr / rows)``: one fold too many whenever the array divides the operand (a 64-deep
    tile-K on a 32-row array: 3 folds, not 2). ``os`` and ``ws`` are untouched."""
    import sim.pe as pe
    from sim.systolic import _fold_cycles, _spatio_temporal

    original = pe.layer_cycles

    def layer_cycles(layer, array):  # type: ignore[no-untyped-def]
        if array.dataflow != "is":
            return original(layer, array)
        sr, sc, t = _spatio_temporal(layer, array.dataflow)
        folds = (sr // array.rows + 1) * -(-sc // array.cols)
        return folds * _fold_cycles(t, array)

    pe.layer_cycles = layer_cycles


def _chunk_count_rounded_down() -> None:
    """A deep K cut into chunks counts them as ``Kt // chunk`` (floor): when the chunk does
    not divide the tile-ops of an output tile, the last, short chunk is never built."""
    import sim.gemm.layout as layout

    original = layout.ProgramLayout.__init__

    def init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        original(self, *args, **kwargs)
        if self.chunks > 1 and self.Kt % self.chunk:
            self.chunks = self.Kt // self.chunk
            self.num_blocks = self.out_tiles * self.chunks

    layout.ProgramLayout.__init__ = init  # type: ignore[method-assign]


def _collective_time_in_32_bits() -> None:
    """ccl: a collective's time read through 32 bits of ps (``makespan & 0xFFFFFFFF``, a
    column narrowed on the way): right up to 4.3 ms, wrapped past it. Only the path config
    past 2^32 ps (the 4-chip switch direct allreduce at 256 MiB) runs that long."""
    import sim.collectives.run as run

    def time_ps(self: run.CollectiveRun) -> int:
        return max(self.launch_ps, self.log.makespan_ps) & 0xFFFFFFFF

    run.CollectiveRun.time_ps = property(time_ps)  # type: ignore[assignment, method-assign]


BUGS: dict[str, Bug] = {
    "gemm-systolic-is-row-folds-floor-plus-one": _systolic_is_row_folds_floor_plus_one,
    "gemm-chunk-count-rounded-down": _chunk_count_rounded_down,
    "ccl-collective-time-in-32-bits": _collective_time_in_32_bits,
}
