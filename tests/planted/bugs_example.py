"""Planted bugs used by the harness's own test (tests/planted/test_harness.py)."""

from __future__ import annotations

from bugs_registry import Bug


def _gemm_latency_one_percent_high() -> None:
    """gemm_metrics reports latency_ns 1 % above the simulated time."""
    import sim
    import sim.gemm.metrics as m

    original = m.gemm_metrics

    def patched(*args: object, **kwargs: object) -> dict[str, float]:
        out = dict(original(*args, **kwargs))  # type: ignore[arg-type]
        out["latency_ns"] = out["latency_ns"] * 1.01
        return out

    m.gemm_metrics = patched  # type: ignore[assignment]
    sim.gemm_metrics = patched  # type: ignore[attr-defined]


BUGS: dict[str, Bug] = {"example-gemm-latency-high": _gemm_latency_one_percent_high}
