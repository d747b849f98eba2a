"""The real_systems bench's figure (not a bench): published against simulated busbw."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_npubench import ConfigResult
from pytest_npubench.plotting import log_axis, mark_failed, measured, provenance, save
from sim.calibrate.nccltests import bus_factor

MIB = 1 << 20


def _curves(
    results: Mapping[str, ConfigResult],
) -> dict[str, dict[int, tuple[float, float, bool, ConfigResult]]]:
    """Per system: size -> (published us, simulated us, measured in this run, its config)."""
    from benches.real_systems import ALL_SIZES, size_key

    out: dict[str, dict[int, tuple[float, float, bool, ConfigResult]]] = {}
    for r in results.values():
        for size in ALL_SIZES:
            pub = r.metrics.get(f"published_us_{size_key(size)}", 0.0)
            sim = r.metrics.get(f"sim_us_{size_key(size)}", 0.0)
            if pub > 0 and sim > 0:
                out.setdefault(r.params["system"], {})[size] = (pub, sim, measured(r), r)
    return out


def figures(results: dict[str, ConfigResult], outdir: Path) -> Sequence[Path]:
    """One figure: per system, busbw published vs simulated, and their time ratio."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = _curves(results)
    outdir.mkdir(parents=True, exist_ok=True)
    if not curves:
        return []
    fig, axes = plt.subplots(
        2,
        len(curves),
        figsize=(7 * len(curves), 8),
        squeeze=False,
        sharex="col",
        gridspec_kw={"height_ratios": [3, 1.3]},
    )
    errors = {
        (r.params["system"], r.params["band"]): r.metrics.get("error") for r in results.values()
    }
    for col, (system, rows) in enumerate(sorted(curves.items())):
        sizes = sorted(rows)
        factor = bus_factor("allreduce", 8)
        pub = [s / (rows[s][0] * 1e3) * factor for s in sizes]
        sim = [s / (rows[s][1] * 1e3) * factor for s in sizes]
        top, bottom = axes[0][col], axes[1][col]
        top.plot(sizes, pub, "k-o", ms=4, label="published (rccl-tests, out of place)")
        for s, b in zip(sizes, sim, strict=True):
            filled = rows[s][2]
            top.plot([s], [b], "o", ms=5, color="#dd8452", mfc="#dd8452" if filled else "none")
        logs = [abs(math.log(rows[s][1] / rows[s][0])) for s in sizes]
        overall = math.expm1(sum(logs) / len(logs))
        bands = (
            ", ".join(
                f"{band} {100 * e:.1f} %"
                for (sys_, band), e in errors.items()
                if sys_ == system and e is not None
            )
            + f"; all {100 * overall:.1f} %"
        )
        top.plot(sizes, sim, "-", color="#dd8452", label=f"simulated ({bands})")
        mark_failed(top, sizes, sim, [rows[s][3] for s in sizes])
        log_axis(top, "x", base=2)
        log_axis(top, "y", minor_grid=0.3)
        top.set_ylabel("busbw (GB/s, nccl-tests)")
        top.set_title(f"{system}: published vs simulated allreduce")
        top.legend(loc="upper left", fontsize=8)
        top.grid(True, which="both", alpha=0.3)
        ratio = [rows[s][1] / rows[s][0] for s in sizes]
        bottom.plot(sizes, ratio, "-o", ms=3, color="#dd8452")
        bottom.axhline(1.0, color="k", lw=0.8)
        for edge in (MIB, 64 * MIB):
            bottom.axvline(edge, color="grey", ls=":", lw=0.8)
            top.axvline(edge, color="grey", ls=":", lw=0.8)
        log_axis(bottom, "x", base=2)
        bottom.set_ylabel("simulated / published time")
        bottom.set_xlabel("message size (bytes)")
        bottom.grid(True, which="both", alpha=0.3)
    fig.suptitle(provenance(results.values()), fontsize=9)
    fig.tight_layout()
    return [save(fig, outdir / "published_vs_simulated.png", dpi=110)]
