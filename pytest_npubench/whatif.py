"""A hardware what-if, summarised once (issue 27): which topology constants changed, and per
bench how many configs moved and the median and worst change of its headline metric, before
any per-config line."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from pytest_npubench.baseline import topology_diff
from pytest_npubench.bench import Bench
from pytest_npubench.headline import GATE_VERDICTS
from pytest_npubench.numbers import format_percent
from pytest_npubench.outcome import ConfigResult
from pytest_npubench.report import regen_command
from pytest_npubench.run_baselines import RunBaselines


def constant_changes(baselines: RunBaselines, bench: Bench) -> list[str] | None:
    """``key old -> new`` of each topology constant this run changed against the bench's
    baseline; None if the run is no what-if for this bench ([] if the file holds no topology)."""
    if not baselines.whatif_lines(bench):
        return None
    file = baselines.file(bench)
    old = None if file is None else file.topology
    return topology_diff(old, baselines.topology_content(bench))


def bench_effect(bench: Bench, results: Mapping[str, ConfigResult]) -> str:
    """``gemm: 30 of 35 configs run moved beyond tolerance; latency_ns median +0.58 %, worst
    +0.60 % (100x300x200-load_ref)``."""
    measured = [r for r in results.values() if r.source == "run"]
    moved = sum(r.verdict in GATE_VERDICTS for r in measured)
    head = bench.headline_metric
    changes = [(r.comparisons[head].change, r.config_id) for r in measured if head in r.comparisons]
    text = f"{bench.name}: {moved} of {len(measured)} configs run moved beyond tolerance"
    finite = [(c, cid) for c, cid in changes if c is not None]
    if finite:
        median = statistics.median(c for c, _ in finite)
        worst, where = max(finite, key=lambda cw: abs(cw[0]))
        text += (
            f"; {head}: median {format_percent(median)}, worst {format_percent(worst)} ({where})"
        )
    if len(finite) < len(changes):
        text += f"; {len(changes) - len(finite)} from 0"
    return text


def summary_lines(
    benches: Sequence[tuple[Bench, Mapping[str, ConfigResult], list[str] | None]],
) -> list[str]:
    """The what-if block: per distinct set of changed constants one head line, then each
    bench's effect, then the command that accepts the new numbers ([] if no what-if)."""
    groups: dict[tuple[str, ...], list[tuple[Bench, Mapping[str, ConfigResult]]]] = {}
    for bench, results, changes in benches:
        if changes is not None:
            groups.setdefault(tuple(changes), []).append((bench, results))
    lines: list[str] = []
    for keys, members in groups.items():
        what = ", ".join(keys) if keys else "(the baseline does not record which)"
        count = f"{len(keys)} constant{'s' if len(keys) != 1 else ''}" if keys else "some keys"
        lines.append(f"what-if: the topology differs from the baseline's in {count}: {what}")
        lines += [f"  {bench_effect(bench, results)}" for bench, results in members]
        names = ",".join(b.name for b, _ in members)
        lines.append(f"  if the new hardware is intended, accept it: {regen_command(names)}")
    return lines
