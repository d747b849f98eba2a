"""Planted bugs whose numbers read as improvements (issue 26, class 5): an exact counter goes
down, and before counters were judged as ``changed`` the gate called it "improved" (and with
``--npubench-allow-improvements`` passed it). Each patches a metrics function the way a real
accounting slip would, so the data replay (which never reads these counters) cannot see it."""

from __future__ import annotations

from typing import Any

from bugs_registry import Bug


def _gemm_last_writeback_uncounted() -> None:
    """The GEMM's HBM write bytes stop one C writeback short (a loop over the dma_out records
    that ends at ``len - 1``): fewer bytes written, the rest of the run unchanged."""
    import sim
    import sim.gemm.metrics as m

    original = m.gemm_metrics

    def patched(*args: Any, **kwargs: Any) -> dict[str, float]:
        out = dict(original(*args, **kwargs))
        records = int(out["dma_out.records"])
        last = out["hbm_write_bytes"] // records if records else 0
        out["hbm_write_bytes"] -= last
        out["hbm_bytes"] -= last
        return out

    m.gemm_metrics = patched  # type: ignore[assignment]
    sim.gemm_metrics = patched  # type: ignore[attr-defined]


def _collective_last_reduction_step_uncounted() -> None:
    """A ring collective's transfer and link-byte counts skip its last reduction step (the
    step loop runs ``p - 2`` times): fewer transfers and link bytes, the same time."""
    import sim
    import sim.collectives.metrics as m

    original = m.collective_metrics

    def patched(run: Any) -> dict[str, float]:
        out = dict(original(run))
        steps = run.chips - 1
        if steps > 1:
            for name in ("transfers", "link_bytes_total"):
                out[name] = float(out[name] * (steps - 1) // steps)
        return out

    m.collective_metrics = patched  # type: ignore[assignment]
    sim.collective_metrics = patched  # type: ignore[attr-defined]


def _invariants_off(bug: Bug) -> Bug:
    """The same bug with ``benches._invariants`` switched off (its derived-metric check
    recomputes these counters from the log's records and names the bug first): the metric
    comparison alone must still call the counter ``changed``."""
    from bugs_derived import _before_26

    def planted() -> None:
        bug()
        _before_26()

    return planted


_BUGS: dict[str, Bug] = {
    "counters-gemm-last-writeback-uncounted": _gemm_last_writeback_uncounted,
    "counters-collective-last-reduction-step-uncounted": _collective_last_reduction_step_uncounted,
}

BUGS: dict[str, Bug] = {
    **_BUGS,
    **{f"{name}+invariants-off": _invariants_off(bug) for name, bug in _BUGS.items()},
}
