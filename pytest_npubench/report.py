"""Text for people: failure tables, the terminal summary, the regen report (summary.md is in
markdown.py)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from pytest_npubench.baseline import BaselineError, Delta, RegenReport
from pytest_npubench.bench import Bench
from pytest_npubench.compare import ConfigResult, relative_change, verdict_rank
from pytest_npubench.headline import (
    COUNTER_NOTE,
    GATE_VERDICTS,
    counters_changed,
    headline_line,
    ranked_metrics,
)
from pytest_npubench.numbers import column_header, format_change, format_percent, format_value

_K_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.[]+:/")


def number(value: float | None, unit: str = "1") -> str:
    """A value in engineering units for its metric's unit (:mod:`pytest_npubench.numbers`)."""
    return format_value(value, unit)


def human(value: float | None, unit: str) -> str:
    """The same as :func:`number` (kept for callers of the old name)."""
    return format_value(value, unit)


def percent(change: float | None) -> str:
    """A signed percentage (:func:`pytest_npubench.numbers.format_percent`)."""
    return format_percent(change)


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
        unit = bench.metrics[name].unit
        rows.append(
            [
                name,
                number(baseline.get(name), unit),
                number(result.metrics.get(name), unit),
                percent(comparison.change) if comparison else "-",
                f"{bench.metrics[name].tolerance * 100:g} %",
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
    bad = GATE_VERDICTS if strict else ("regression", "changed")
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
        f"{name} {percent(change)} "
        f"({format_change(baseline[name], current[name], bench.metrics[name].unit)})"
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
    """Why an item failed its gate, headline first: one line (the headline metric's change and
    how many more moved), the moved metrics ranked (headline pinned first), where the time
    went, what a changed counter means, and only then the command that accepts it."""
    name = item_name(bench.name, result.config_id)
    failing = gate_failures(bench, result, strict)
    verdicts = {result.comparisons[n].verdict for n in failing}
    what = {"regression": "got worse", "improved": "got better"}.get(
        verdicts.pop() if len(verdicts) == 1 else "", "changed"
    )
    counters = counters_changed(bench, result)
    lines = [
        f"{name}: {len(failing)} gated metric(s) {what} beyond tolerance: "
        f"{headline_line(bench, result)}",
        *table(metric_rows(bench, result, ranked_metrics(bench, result, failing))),
        "where it came from (current vs baseline, largest change first):",
        *(f"  {line}" for line in explanation(bench, result)),
    ]
    if counters:
        lines.append(COUNTER_NOTE.format(names=", ".join(counters)))
    if "improved" in {result.comparisons[n].verdict for n in failing}:
        lines.append(IMPROVEMENT_NOTE)
    lines.append(f"baseline: {baseline_path}")
    lines.append(
        f"if the change is intended, accept it with: {regen_command(bench.name, result.config_id)}"
    )
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
    """A metric's value for a table in engineering units (of ``unit``, else a plain number),
    with its change against the baseline when it moved."""
    value = number(result.metrics.get(name), unit or "1")
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


#: how a count line names n configs of a verdict
_NOUNS = {
    "regression": ("regression", "regressions"),
    "changed": ("counter change", "counter changes"),
    "improved": ("improvement", "improvements"),
    "failed-check": ("failed check", "failed checks"),
    "error": ("error", "errors"),
    "new": ("new (no baseline)", "new (no baseline)"),
}


def failing_verdicts(regen: bool = False, fail_improvements: bool = True) -> tuple[str, ...]:
    """The verdicts that fail their item in this run (what pytest counts as failed)."""
    if regen:
        return ("failed-check", "error")
    gate = GATE_VERDICTS if fail_improvements else ("regression", "changed")
    return (*gate, "failed-check", "error", "new")


def _counted(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {_NOUNS[v][n != 1]}" for v, n in counts.items() if v in _NOUNS)


def bench_line(
    bench: Bench,
    results: Mapping[str, ConfigResult],
    regen: bool = False,
    fail_improvements: bool = True,
) -> str:
    """``gemm: 35 run: 5 passed, 30 failed (30 regressions) | 32 regen-only not run``."""
    return f"{bench.name}: {bench_counts(results, regen, fail_improvements)}"


def bench_counts(
    results: Mapping[str, ConfigResult], regen: bool = False, fail_improvements: bool = True
) -> str:
    """The counts of a bench's line, which add up and agree with pytest's: ``N run: P passed,
    F failed (...)`` (P + F = N), what a regen found against the old baseline, and the
    regen-only configs that were not run (their baseline values are reused)."""
    measured = [r for r in results.values() if r.source == "run"]
    counts = verdict_counts({r.config_id: r for r in measured})
    fails = failing_verdicts(regen, fail_improvements)
    failed = {v: n for v, n in counts.items() if v in fails}
    passed = {v: n for v, n in counts.items() if v not in fails}
    n_failed = sum(failed.values())
    text = f"{len(measured)} run: {len(measured) - n_failed} passed"
    text += f", {n_failed} failed ({_counted(failed)})" if n_failed else ""
    moved = {v: n for v, n in passed.items() if v != "pass"}
    if moved and regen:
        differ = sum(moved.values())
        text += (
            f"; vs the old baseline: {differ} differ ({_counted(moved)}), "
            f"{passed.get('pass', 0)} unchanged (--regen-baselines accepts them)"
        )
    elif moved:
        text += f" ({_counted(moved)} allowed)"
    parts = [text]
    reused = sum(r.verdict == "reused-baseline" for r in results.values())
    missing = sum(r.verdict == "missing-baseline" for r in results.values())
    if reused:
        parts.append(f"{reused} regen-only not run (baseline values reused)")
    if missing:
        parts.append(f"{missing} regen-only not run and without a baseline")
    return " | ".join(parts)


def bench_table(
    bench: Bench, results: Mapping[str, ConfigResult], everything: bool = False
) -> list[str]:
    """The terminal table of one bench: the configs that are not a plain pass (every config
    when ``everything``), key metrics in engineering units and their changes; [] if none.
    Configs that failed on their metrics are not in it: :func:`headline_lines` lists them."""
    columns = summary_columns(bench)
    units = {c: bench.metrics[c].unit for c in columns}
    rows = [["verdict", "config", *(column_header(c, units[c]) for c in columns)]]
    for result in ordered(results):
        if result.verdict in GATE_VERDICTS and not everything:
            continue
        if everything or result.verdict not in ("pass", "reused-baseline"):
            cells = [metric_cell(result, name, units[name]) for name in columns]
            rows.append([result.verdict, result.config_id, *cells])
    return table(rows) if len(rows) > 1 else []


def headline_lines(bench: Bench, results: Mapping[str, ConfigResult]) -> list[str]:
    """One line per config that failed on its metrics, headline first, worst verdict first."""
    moved = [r for r in ordered(results) if r.verdict in GATE_VERDICTS and r.source == "run"]
    if not moved:
        return []
    width = max(len(r.verdict) for r in moved)
    return [f"  {r.verdict.ljust(width)}  {r.config_id}: {headline_line(bench, r)}" for r in moved]


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

    def unit(d: Delta) -> str:
        return bench.metrics[d.name].unit if bench is not None and d.name in bench.metrics else "1"

    text = ", ".join(
        f"{d.name} {format_change(d.old, d.new, unit(d))} ({percent(d.change)})" for d in shown
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
