"""What a hardware sweep writes (:mod:`pytest_npubench.sweep`): ``results.json`` (every
variant's measured metrics under its topology fingerprint), ``sweep.md`` (per bench, the
headline metric of every measured config on every variant, and its ratio to the first
variant) and ``<bench>/sweep.png`` (the headline metrics against the swept value: a thin line
per config, a thick one per config family, the median of the family, relative to the first
variant, so a bandwidth-bound config that speeds up and a compute-bound one that does not
read apart at a glance).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_npubench.artifacts import run_metadata
from pytest_npubench.baseline import write_atomic
from pytest_npubench.numbers import format_value
from pytest_npubench.sweep_runs import VariantRun

#: Params that name a config's family when a bench has one (else: the param with the fewest
#: distinct values above one).
FAMILY_PARAMS = ("variant", "algorithm", "mode", "collective", "layer")


def headline_metrics(config: pytest.Config, runs: Sequence[VariantRun]) -> dict[str, list[str]]:
    """Per bench, the metrics the sweep draws: the bench's headline (or first summary metric),
    then its other summary metrics, two at most."""
    from pytest_npubench.discover import discover
    from pytest_npubench.state import bench_paths

    declared: dict[str, list[str]] = {}
    try:
        for bench, _ in discover(bench_paths(config), config.rootpath):
            names = [getattr(bench, "headline", None), *(bench.summary_metrics or ())]
            gated = [n for n, m in bench.metrics.items() if m.gate]
            picked = [n for n in dict.fromkeys(names) if isinstance(n, str)] or gated[:1]
            declared[bench.name] = picked[:2]
    except Exception:  # the sweep's own figures must not hide its numbers
        declared = {}
    return headline_from_results(runs, declared)


def headline_from_results(
    runs: Sequence[VariantRun], declared: dict[str, list[str]] | None = None
) -> dict[str, list[str]]:
    """The drawn metrics: the benches' declarations where known, else the time metric."""
    declared = declared or {}
    out: dict[str, list[str]] = {}
    for run in runs:
        for name, content in run.benches.items():
            if name in out:
                continue
            metrics = list((content.get("metrics") or {}).keys())
            out[name] = (
                declared.get(name)
                or [m for m in ("latency_ns", "time_ns") if m in metrics][:1]
                or metrics[:1]
            )
    return out


def measured(run: VariantRun, bench: str) -> dict[str, dict[str, Any]]:
    """The configs this variant measured (never reused baseline numbers)."""
    configs = (run.benches.get(bench) or {}).get("configs") or {}
    return {
        cid: entry
        for cid, entry in configs.items()
        if isinstance(entry, dict) and entry.get("source") == "run" and entry.get("metrics")
    }


def _family_param(entries: Sequence[dict[str, Any]]) -> str | None:
    values: dict[str, set[str]] = {}
    for entry in entries:
        for k, v in (entry.get("params") or {}).items():
            values.setdefault(k, set()).add(json.dumps(v, sort_keys=True))
    for name in FAMILY_PARAMS:
        if len(values.get(name, ())) > 1:
            return name
    several = [(len(v), k) for k, v in values.items() if len(v) > 1]
    return min(several)[1] if several else None


def _fmt(value: float, unit: str) -> str:
    return format_value(value, unit)  # the reports' one formatter (engineering units)


def _x(runs: Sequence[VariantRun]) -> tuple[list[float], list[str], str]:
    keys = list(runs[0].variant.values) if runs else []
    xs = [float(i) for i in range(len(runs))]
    labels = [r.variant.label for r in runs]
    if len(keys) == 1:
        values = [r.variant.values[keys[0]] for r in runs]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            return [float(v) for v in values], [f"{v:g}" for v in values], keys[0]
        labels = [str(v) for v in values]
    return xs, labels, "variant" if len(keys) != 1 else keys[0]


def figure(bench: str, runs: Sequence[VariantRun], metrics: Sequence[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in runs if measured(r, bench)]
    xs_all, labels, xlabel = _x(ok)
    first = measured(ok[0], bench)
    family_of = _family_param(list(first.values()))
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.2 * len(metrics), 4.4), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers, styles = "osD^vP*X", ("-", "--", "-.", ":")
    positive = all(x > 0 for x in xs_all) and len(xs_all) > 1
    logx = positive and max(xs_all) / min(xs_all) >= 4 and xlabel != "variant"
    for ax, metric in zip(axes[0], metrics, strict=True):
        unit = _unit(ok[0], bench, metric)
        higher = _direction(ok[0], bench, metric) == "higher"
        families: dict[str, list[list[float]]] = {}
        for cid, entry in first.items():
            base = entry["metrics"].get(metric)
            if not isinstance(base, (int, float)) or base == 0:
                continue
            ys = []
            for r in ok:
                e = measured(r, bench).get(cid)
                v = e["metrics"].get(metric) if e else None
                ys.append((v / base if higher else base / v) if v else float("nan"))
            fam = str(entry.get("params", {}).get(family_of, bench)) if family_of else bench
            families.setdefault(fam, []).append(ys)
        for i, (fam, lines) in enumerate(sorted(families.items())):
            colour = colours[i % len(colours)]
            for ys in lines:
                ax.plot(xs_all, ys, color=colour, alpha=0.25, linewidth=0.8)
            median = [statistics.median(col) for col in zip(*lines, strict=True)]
            ax.plot(
                xs_all,
                median,
                color=colour,
                linewidth=2.2,
                marker=markers[i % len(markers)],
                linestyle=styles[i % len(styles)],
                markersize=6 + 2 * (i % 3),
                markerfacecolor="none" if i % 2 else colour,
                label=f"{fam} (median of {len(lines)})",
            )
        ax.axhline(1.0, color="black", linewidth=0.6)
        if logx:
            ax.set_xscale("log", base=2)
            ax.minorticks_off()
        ax.set_xticks(xs_all)
        ax.set_xticklabels(labels, rotation=30 if len(labels) > 4 else 0, fontsize=8)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"speed-up of {metric} vs {labels[0]} (x)" if unit else metric)
        ax.set_title(
            f"{bench}: {metric} ({'higher' if higher else 'lower'} is better; "
            f"first variant {ok[0].variant.label})",
            fontsize=9,
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, title=family_of, title_fontsize=7)
    fig.suptitle(
        f"{bench}: hardware sweep, {len(first)} measured configs (thin: one config; thick: "
        "family median)",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)


def _declared(run: VariantRun, bench: str, metric: str) -> dict[str, Any]:
    found = ((run.benches.get(bench) or {}).get("metrics") or {}).get(metric)
    return found if isinstance(found, dict) else {}


def _unit(run: VariantRun, bench: str, metric: str) -> str:
    return str(_declared(run, bench, metric).get("unit", ""))


def _direction(run: VariantRun, bench: str, metric: str) -> str:
    return str(_declared(run, bench, metric).get("direction", "lower"))


def table(runs: Sequence[VariantRun], heads: dict[str, list[str]]) -> str:
    lines = ["# Hardware sweep", ""]
    lines += [
        f"- `{r.variant.id}` {r.variant.label}: exit {r.exit_code}, {r.wall_s:.1f} s"
        + "".join(
            f"; {b} on `{(r.benches.get(b) or {}).get('fingerprint')}`" for b in sorted(r.benches)
        )
        for r in runs
    ]
    ok = [r for r in runs if r.benches]
    for bench, metrics in heads.items():
        if not ok or not metrics:
            continue
        metric = metrics[0]
        unit = _unit(ok[0], bench, metric)
        first = measured(ok[0], bench)
        lines += ["", f"## {bench}: `{metric}` per variant", ""]
        lines.append("| config | " + " | ".join(r.variant.label for r in ok) + " | last / first |")
        lines.append("|---|" + "---:|" * (len(ok) + 1))
        for cid in first:
            values = []
            for r in ok:
                e = measured(r, bench).get(cid)
                values.append(e["metrics"].get(metric) if e else None)
            cells = [_fmt(v, unit) if isinstance(v, (int, float)) else "-" for v in values]
            a, b = values[0], values[-1]
            ratio = (
                f"{b / a:.3g}"
                if isinstance(a, (int, float)) and a and isinstance(b, (int, float))
                else "-"
            )
            lines.append(f"| `{cid}` | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines) + "\n"


def summary_lines(runs: Sequence[VariantRun], heads: dict[str, list[str]]) -> list[str]:
    """Per bench and variant: the headline's median and range against the first variant."""
    out = []
    ok = [r for r in runs if r.benches]
    for bench, metrics in heads.items():
        if not ok or not metrics:
            continue
        metric = metrics[0]
        first = measured(ok[0], bench)
        for r in ok[1:]:
            now = measured(r, bench)
            ratios = [
                now[c]["metrics"][metric] / e["metrics"][metric]
                for c, e in first.items()
                if c in now and e["metrics"].get(metric) and metric in now[c]["metrics"]
            ]
            if ratios:
                out.append(
                    f"npubench sweep: {bench} {metric} on {r.variant.label} vs "
                    f"{ok[0].variant.label}: median x{statistics.median(ratios):.3g}, "
                    f"range x{min(ratios):.3g} .. x{max(ratios):.3g} over {len(ratios)} configs"
                )
    return out


def write_report(
    root: Path,
    runs: Sequence[VariantRun],
    heads: dict[str, list[str]],
    wall_s: float,
    args: list[str],
) -> list[Path]:
    written: list[Path] = []
    data: dict[str, Any] = {
        "schema": 1,
        "run": {**run_metadata(args, root), "wall_s": round(wall_s, 3)},
        "sweep": [
            {
                "id": r.variant.id,
                "set": r.variant.values,
                "exit": r.exit_code,
                "wall_s": round(r.wall_s, 3),
                "folder": f"variants/{r.variant.id}",
            }
            for r in runs
        ],
        "benches": {},
    }
    for r in runs:
        for bench, content in r.benches.items():
            slot = data["benches"].setdefault(
                bench, {"headline": heads.get(bench, []), "variants": {}}
            )
            slot["variants"][str(content.get("fingerprint"))] = {
                "id": r.variant.id,
                "set": r.variant.values,
                "configs": {cid: e["metrics"] for cid, e in measured(r, bench).items()},
            }
    write_atomic(root / "results.json", json.dumps(data, indent=1, sort_keys=True) + "\n")
    written.append(root / "results.json")
    write_atomic(root / "sweep.md", table(runs, heads))
    written.append(root / "sweep.md")
    for bench, metrics in heads.items():
        if metrics and sum(1 for r in runs if measured(r, bench)) >= 1:
            png = root / bench / "sweep.png"
            figure(bench, runs, metrics, png)
            written.append(png)
    return written
