"""Text for people: failure tables, the terminal summary, the regen report (summary.md is in
markdown.py)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from pytest_npubench.baseline import BaselineError, Delta, RegenReport
from pytest_npubench.bench import Bench
from pytest_npubench.compare import ConfigResult, relative_change, verdict_rank

_K_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.[]+:/")


def number(value: float | None) -> str:
    """A compact, readable number (6 significant digits)."""
    return "-" if value is None else f"{value:.6g}"


_TIME_UNITS = (("s", 1e9), ("ms", 1e6), ("us", 1e3))
_BYTE_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
_DIMENSIONLESS = ("", "1")


def _sig3(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1e15 else f"{value:.2e}"


def human(value: float | None, unit: str) -> str:
    """A value for a reader: ns as ns/us/ms/s and bytes as B/KiB/MiB/GiB to 3 significant
    figures; whole numbers below 10,000 (and byte counts that are whole KiB/MiB) exactly."""
    if value is None:
        return "-"
    whole = float(value).is_integer()
    if unit == "ns":
        for name, scale in _TIME_UNITS:
            if abs(value) >= 10 * scale if name == "us" else abs(value) >= scale:
                return f"{_sig3(value / scale)} {name}"
        return f"{int(value)} ns" if whole else f"{_sig3(value)} ns"
    if unit == "B":
        for name, scale in _BYTE_UNITS:
            if abs(value) >= scale:
                exact = whole and int(value) % scale == 0
                return f"{int(value) // scale if exact else _sig3(value / scale)} {name}"
        return f"{int(value)} B" if whole else f"{_sig3(value)} B"
    text = str(int(value)) if whole and abs(value) < 1e15 else _sig3(value)
    return text if unit in _DIMENSIONLESS else f"{text} {unit}"


def percent(change: float | None) -> str:
    """A signed percentage; 'inf' for a change from zero."""
    return "inf" if change is None else f"{change * 100:+.2f}%"


def item_name(bench: str, config_id: str) -> str:
    """The pytest item name of a config: ``bench[config_id]``."""
    return f"{bench}[{config_id}]"


def regen_command(bench: str, config_id: str | None = None) -> str:
    """The command that (re)writes the baseline of a bench, or of one config of it."""
    command = f"pytest --npubench {bench} --regen-baselines"
    name = item_name(bench, config_id) if config_id is not None else ""
    if config_id is not None and set(name) <= _K_SAFE:
        command += f" -k {shlex.quote(name)}"
    return command


def table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Left-aligned columns, two spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        (indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))).rstrip()
        for row in rows
    ]


def metric_rows(bench: Bench, result: ConfigResult, names: Sequence[str]) -> list[list[str]]:
    """One row per metric: metric, baseline, current, change, tolerance, verdict."""
    rows = [["metric", "baseline", "current", "change", "tolerance", "verdict"]]
    baseline = result.baseline or {}
    for name in names:
        comparison = result.comparisons.get(name)
        rows.append(
            [
                name,
                number(baseline.get(name)),
                number(result.metrics.get(name)),
                percent(comparison.change) if comparison else "-",
                f"{bench.metrics[name].tolerance * 100:.2f}%",
                comparison.verdict if comparison else "new",
            ]
        )
    return rows


IMPROVEMENT_NOTE = (
    "an improvement beyond tolerance fails until accepted: left unaccepted, it would hide a "
    "later regression of the same size (--npubench-allow-improvements lets it pass)"
)


def gate_failures(bench: Bench, result: ConfigResult, strict: bool = True) -> list[str]:
    """The gated metrics that fail this result: changed beyond tolerance (only worse ones when
    improvements are allowed, ``strict=False``)."""
    bad = ("regression", "improved") if strict else ("regression",)
    return [n for n, c in result.comparisons.items() if c.verdict in bad and bench.metrics[n].gate]


def default_explanation(
    bench: Bench, current: Mapping[str, float], baseline: Mapping[str, float], most: int = 6
) -> list[str]:
    """The recorded (ungated) metrics that changed most, largest relative change first."""
    changes = []
    for name, spec in bench.metrics.items():
        if spec.gate or name not in current or name not in baseline:
            continue
        change = relative_change(baseline[name], current[name])
        if change != 0.0:
            size = float("inf") if change is None else abs(change)
            changes.append((-size, name, change))
    changes.sort()
    return [
        f"{name} {percent(change)} ({number(baseline[name])} -> {number(current[name])} "
        f"{bench.metrics[name].unit})"
        for _, name, change in changes[:most]
    ] or ["no recorded metric besides the gated ones changed"]


def explanation(bench: Bench, result: ConfigResult) -> list[str]:
    """Where a change came from: the bench's ``explain`` function, else the default."""
    if not result.baseline or not result.metrics:
        return []
    if bench.explain is not None:
        try:
            return [str(line) for line in bench.explain(result.metrics, result.baseline)]
        except Exception as exc:  # a broken explain must not hide the verdict itself
            return [f"the explain function of bench {bench.name!r} raised {exc!r}"]
    return default_explanation(bench, result.metrics, result.baseline)


def failure_message(bench: Bench, result: ConfigResult, baseline_path: str, strict: bool) -> str:
    """Why an item failed its gate: a small table, where the time went, the accepting command."""
    name = item_name(bench.name, result.config_id)
    failing = gate_failures(bench, result, strict)
    improved = any(result.comparisons[n].verdict == "improved" for n in failing)
    worse = any(result.comparisons[n].verdict == "regression" for n in failing)
    what = "got worse" if not improved else "got better" if not worse else "changed"
    lines = [
        f"{name}: {len(failing)} gated metric(s) {what} beyond tolerance "
        f"(baseline: {baseline_path})",
        *table(metric_rows(bench, result, failing)),
        "where it came from (current vs baseline, largest change first):",
        *(f"  {line}" for line in explanation(bench, result)),
        f"if the change is intended, accept it with: {regen_command(bench.name, result.config_id)}",
    ]
    if improved:
        lines.append(IMPROVEMENT_NOTE)
    return "\n".join(lines)


def missing_baseline_message(bench: Bench, result: ConfigResult, baseline_path: str) -> str:
    """Why a config without a baseline entry fails, with the command that creates it."""
    name = item_name(bench.name, result.config_id)
    missing = [
        m for m, spec in bench.metrics.items() if spec.gate and m not in (result.baseline or {})
    ]
    what = "no entry" if result.baseline is None else f"no value of {', '.join(missing)}"
    return (
        f"{name}: {baseline_path} has {what} for this config; create it with:\n"
        f"  {regen_command(bench.name, result.config_id)}"
    )


def summary_columns(bench: Bench) -> list[str]:
    """The metrics a bench's summary table shows: its summary_metrics, else its first three."""
    return list(bench.summary_metrics or list(bench.metrics)[:3])


def ordered(results: Mapping[str, ConfigResult]) -> list[ConfigResult]:
    """Results worst first; within a verdict, in sweep order."""
    ranked = sorted(
        enumerate(results.values()), key=lambda ir: (verdict_rank(ir[1].verdict), ir[0])
    )
    return [r for _, r in ranked]


def metric_cell(result: ConfigResult, name: str, unit: str | None = None) -> str:
    """A metric's value for a table (in human units when ``unit`` is given), with its change
    against the baseline when it moved."""
    raw = result.metrics.get(name)
    value = number(raw) if unit is None else human(raw, unit)
    comparison = result.comparisons.get(name)
    if comparison is not None and comparison.change != 0.0:
        value += f" ({percent(comparison.change)})"
    return value


def verdict_counts(results: Mapping[str, ConfigResult]) -> dict[str, int]:
    """How many configs got each verdict, worst first."""
    counts: dict[str, int] = {}
    for r in ordered(results):
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    return counts


def bench_line(bench: Bench, results: Mapping[str, ConfigResult]) -> str:
    """``gemm: 24 measured: 24 pass | 27 reused | 0 regressions``: a bench at a glance."""
    return f"{bench.name}: {bench_counts(results)}"


def bench_counts(results: Mapping[str, ConfigResult]) -> str:
    """``24 measured: 24 pass | 27 reused | 0 regressions``: the counts of a bench's line."""
    measured = [r for r in results.values() if r.source == "run"]
    counts = verdict_counts({r.config_id: r for r in measured})
    regressions = counts.pop("regression", 0)
    parts = [", ".join(f"{n} {v}" for v, n in counts.items())] if counts else []
    reused = sum(r.verdict == "reused-baseline" for r in results.values())
    missing = sum(r.verdict == "missing-baseline" for r in results.values())
    if reused:
        parts.append(f"{reused} reused from the baseline (regen-only)")
    if missing:
        parts.append(f"{missing} regen-only without a baseline")
    parts.append(f"{regressions} regression{'' if regressions == 1 else 's'}")
    return f"{len(measured)} measured: " + " | ".join(parts)


def bench_table(
    bench: Bench, results: Mapping[str, ConfigResult], everything: bool = False
) -> list[str]:
    """The terminal table of one bench: the configs that are not a plain pass (every config
    when ``everything``), key metrics in human units and their changes; [] if none."""
    columns = summary_columns(bench)
    units = {c: bench.metrics[c].unit for c in columns}
    rows = [["verdict", "config", *columns]]  # the cells carry their (scaled) units
    for result in ordered(results):
        if everything or result.verdict not in ("pass", "reused-baseline"):
            cells = [metric_cell(result, name, units[name]) for name in columns]
            rows.append([result.verdict, result.config_id, *cells])
    return table(rows) if len(rows) > 1 else []


def regen_lines(
    report: RegenReport, relpath: str, verbose: bool, bench: Bench | None = None
) -> list[str]:
    """What a regen did to one baseline file; per changed config its gated metrics first, as
    ``old -> new (change)``, the rest behind -v."""
    head = f"wrote {relpath}" if report.written else f"{relpath}: unchanged"
    counts = f"{len(report.added)} added, {len(report.changed)} changed, "
    counts += f"{len(report.unchanged)} unchanged"
    lines = [f"{head}: {counts}"]
    if report.fingerprint_changed:
        lines.append(f"  fingerprint changed (was {report.old_fingerprint})")
        if report.topology_changes:
            lines.append(f"  topology changed: {', '.join(report.topology_changes)}")
    lines += _id_list("added", report.added)
    for cid, deltas in report.changed.items():
        lines.append(f"  changed    {cid}: {_delta_text(deltas, bench, verbose)}")
    lines += _id_list("unchanged", report.unchanged if verbose else [], len(report.unchanged))
    lines += _id_list("kept (not run)", report.kept if verbose else [], len(report.kept))
    lines += _id_list("not updated (failed)", report.not_updated)
    lines += _id_list("stale (no such config; kept, --npubench-prune drops)", report.stale)
    lines += _id_list("pruned", report.pruned)
    lines += _id_list("dropped (no such config, measured on the old topology)", report.dropped)
    return lines


def _delta_text(deltas: Sequence[Delta], bench: Bench | None, verbose: bool) -> str:
    def gated(d: Delta) -> bool:
        return bench is not None and d.name in bench.metrics and bench.metrics[d.name].gate

    first = [d for d in deltas if gated(d)]
    rest = [d for d in deltas if not gated(d)]
    shown = first + rest if verbose or not first else first
    text = ", ".join(
        f"{d.name} {number(d.old)} -> {number(d.new)} ({percent(d.change)})" for d in shown
    )
    hidden = len(deltas) - len(shown)
    if hidden:
        text += f" (+{hidden} ungated metric{'' if hidden == 1 else 's'}, -v lists them)"
    return text or "metric names only"


def unreadable_message(bench: str, relpath: str, error: BaselineError) -> str:
    """A baseline file that cannot be used: what is wrong, and how to fix it without loss."""
    advice = error.advice or (
        "a regen never replaces a file it cannot read; fix that by hand, or move the file "
        f"away (mv {relpath} {relpath}.broken) and re-measure every config with: "
        f"{regen_command(bench)}"
    )
    return f"{relpath} {error.problem}; {advice}"


def mixed_topology_message(bench: Bench, report: RegenReport, relpath: str) -> str:
    """Why a regen under a changed topology did not write: some configs were not re-measured."""
    ids = report.not_remeasured
    shown = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
    return (
        f"{relpath}: not written: it was measured on {report.old_fingerprint}, this run uses "
        f"another topology, and {len(ids)} config(s) of bench {bench.name!r} were not "
        f"re-measured ({shown}); a baseline holds one topology, so re-measure them all: "
        f"{regen_command(bench.name)} (without -k)"
    )


def _id_list(label: str, ids: Sequence[str], count: int = 0) -> list[str]:
    if ids:
        return [f"  {label}: {', '.join(ids)}"]
    if count:
        plural = "" if count == 1 else "s"
        return [f"  {label}: {count} config{plural} (-v lists them)"]
    return []
