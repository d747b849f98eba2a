"""What ``python -m pytest_npubench history`` writes: history.md, history.html, history.json
and one figure per bench (``history-<bench>.png``), from :mod:`pytest_npubench.history`.

The table is asv's regressions list: per commit that moved a gated metric beyond its
tolerance, the commit, its date and subject, and per metric how many configs moved, the
median and the worst change, and the worst config. Topology and schema changes, renames,
added and removed configs, unreadable versions are listed as events, never as regressions.
The figure draws each selected metric over the commits (small multiples, one panel per
metric, one line per config, values relative to the config's first version), with the
commits as tick labels (short hash and date) and topology changes as dashed lines.
"""

from __future__ import annotations

import html
import json
import statistics
from collections.abc import Sequence
from pathlib import Path

from pytest_npubench.baseline import write_atomic
from pytest_npubench.history import BenchHistory, Commit, Move
from pytest_npubench.numbers import format_percent

#: Lines drawn per panel at most; more configs are named in the page, not drawn.
MAX_LINES = 10


def _pct(change: float | None) -> str:
    return format_percent(change)  # the reports' one formatter


def grouped(history: BenchHistory) -> list[tuple[Commit, str, list[Move]]]:
    """Moves per (commit, metric, verdict), in commit order, regressions first in a commit."""
    order = {v.commit.sha: i for i, v in enumerate(history.versions)}
    groups: dict[tuple[str, str, str], list[Move]] = {}
    for move in history.moves:
        groups.setdefault((move.commit.sha, move.metric, move.verdict), []).append(move)
    rank = {"regression": 0, "changed": 1, "improved": 2}

    def key(item: tuple[tuple[str, str, str], list[Move]]) -> tuple[int, int, str]:
        (sha, metric, verdict), _ = item
        return (order.get(sha, 0), rank.get(verdict, 3), metric)

    return [
        (moves[0].commit, metric, moves)
        for (_, metric, _), moves in sorted(groups.items(), key=key)
    ]


def _worst(moves: Sequence[Move]) -> Move:
    return max(moves, key=lambda m: abs(m.change) if m.change is not None else float("inf"))


def _summary(moves: Sequence[Move]) -> tuple[str, str, str, str]:
    verdicts = sorted({m.verdict for m in moves})
    changes = [m.change for m in moves if m.change is not None]
    median = _pct(statistics.median(changes)) if changes else "from 0"
    worst = _worst(moves)
    return "/".join(verdicts), median, _pct(worst.change), worst.config


def markdown(histories: Sequence[BenchHistory], notes: Sequence[str]) -> str:
    lines = ["# Performance history (from the committed baselines)", ""]
    lines += [f"- {note}" for note in notes]
    for h in histories:
        readable = [v for v in h.versions if v.file is not None]
        lines += ["", f"## {h.bench} (`{h.path}`: {len(readable)} versions)", ""]
        groups = grouped(h)
        if not groups:
            lines.append("No gated metric moved beyond its tolerance between these versions.")
        else:
            lines += [
                "| commit | date | subject | metric | verdict | configs | median | worst | "
                "worst config |",
                "|---|---|---|---|---|---:|---:|---:|---|",
            ]
            for commit, metric, moves in groups:
                verdict, median, worst, config = _summary(moves)
                lines.append(
                    f"| `{commit.short}` | {commit.date[:10]} | {_md(commit.subject, 70)} | "
                    f"`{metric}` | {verdict} | {len(moves)} | {median} | {worst} | `{config}` |"
                )
        if h.events:
            lines += ["", "Not regressions (marked in the figure):", ""]
            for e in h.events:
                lines.append(
                    f"- `{e.commit.short}` {e.commit.date[:10]} **{e.kind}**: {_md(e.text, 200)}"
                )
    return "\n".join(lines) + "\n"


def _md(text: str, most: int) -> str:
    text = text if len(text) <= most else text[: most - 3] + "..."
    return text.replace("|", "\\|").replace("\n", " ")


def page(histories: Sequence[BenchHistory], notes: Sequence[str], figures: dict[str, str]) -> str:
    e = html.escape
    out = [
        "<!doctype html><html><head><meta charset='utf-8'><title>npubench history</title>",
        "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}"
        "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;"
        "padding:2px 6px}img{max-width:100%}.regression{color:#b00}.improved{color:#070}"
        "</style></head><body><h1>Performance history</h1><ul>",
    ]
    out += [f"<li>{e(n)}</li>" for n in notes]
    out.append("</ul>")
    for h in histories:
        out.append(f"<h2 id='{e(h.bench)}'>{e(h.bench)} <small>({e(h.path)})</small></h2>")
        if h.bench in figures:
            out.append(f"<img src='{e(figures[h.bench])}' alt='{e(h.bench)} history'>")
        out.append(
            "<table><tr><th>commit</th><th>date</th><th>subject</th><th>metric</th>"
            "<th>verdict</th><th>configs</th><th>median</th><th>worst</th><th>details</th></tr>"
        )
        for commit, metric, moves in grouped(h):
            verdict, median, worst, _ = _summary(moves)
            rows = "".join(
                f"<tr><td>{e(m.config)}</td><td>{m.old!r}</td><td>{m.new!r}</td>"
                f"<td>{_pct(m.change)}</td><td>{e(m.verdict)}</td></tr>"
                for m in sorted(moves, key=lambda m: -abs(m.change or 0))
            )
            out.append(
                f"<tr class='{e(verdict.split('/')[0])}'><td><code>{e(commit.short)}</code></td>"
                f"<td>{e(commit.date[:10])}</td><td>{e(commit.subject)}</td>"
                f"<td><code>{e(metric)}</code></td><td>{e(verdict)}</td><td>{len(moves)}</td>"
                f"<td>{median}</td><td>{worst}</td><td><details><summary>configs</summary>"
                f"<table><tr><th>config</th><th>old</th><th>new</th><th>change</th>"
                f"<th>verdict</th></tr>{rows}</table></details></td></tr>"
            )
        out.append("</table>")
        if h.events:
            out.append("<h3>Not regressions</h3><ul>")
            out += [
                f"<li><code>{e(ev.commit.short)}</code> {e(ev.commit.date[:10])} "
                f"<b>{e(ev.kind)}</b>: {e(ev.text)}</li>"
                for ev in h.events
            ]
            out.append("</ul>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def data(histories: Sequence[BenchHistory], notes: Sequence[str]) -> str:
    def commit(c: Commit) -> dict[str, object]:
        return {"sha": c.sha, "date": c.date, "subject": c.subject}

    return (
        json.dumps(
            {
                "notes": list(notes),
                "benches": {
                    h.bench: {
                        "path": h.path,
                        "versions": [
                            {
                                **commit(v.commit),
                                "readable": v.file is not None,
                                "problem": v.problem,
                                "via": v.via,
                            }
                            for v in h.versions
                        ],
                        "moves": [
                            {
                                **commit(m.commit),
                                "config": m.config,
                                "metric": m.metric,
                                "old": m.old,
                                "new": m.new,
                                "change": m.change,
                                "verdict": m.verdict,
                                "tolerance": m.tolerance,
                            }
                            for m in h.moves
                        ],
                        "events": [
                            {**commit(ev.commit), "kind": ev.kind, "text": ev.text}
                            for ev in h.events
                        ],
                    }
                    for h in histories
                },
            },
            indent=1,
            sort_keys=True,
            allow_nan=False,
        )
        + "\n"
    )


def chosen(
    h: BenchHistory, metrics: Sequence[str], configs: Sequence[str] | None
) -> tuple[list[str], list[str]]:
    """The metrics and configs the figure draws: those asked for, else those that moved most."""
    moved: dict[str, int] = {}
    for m in h.moves:
        moved[m.metric] = moved.get(m.metric, 0) + 1
    names = list(metrics) or sorted(moved, key=lambda k: (-moved[k], k))[:4]
    if not names:
        latest = next((v.file for v in reversed(h.versions) if v.file is not None), None)
        first = next(iter(latest.entries.values()), None) if latest else None
        names = sorted(first["metrics"])[:1] if first else []
    if configs is None:
        count: dict[str, int] = {}
        for m in h.moves:
            if m.metric in names:
                count[m.config] = count.get(m.config, 0) + 1
        configs = sorted(count, key=lambda k: (-count[k], k)) or h.configs()
    return names, list(configs)


def figure(h: BenchHistory, metrics: Sequence[str], configs: Sequence[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    versions = [v for v in h.versions if v.file is not None]
    index = {v.commit.sha: i for i, v in enumerate(versions)}
    panels = max(1, len(metrics))
    fig, axes = plt.subplots(
        panels,
        1,
        figsize=(max(6.0, 0.45 * len(versions) + 3), 2.6 * panels + 1.2),
        squeeze=False,
        sharex=True,
    )
    drawn = list(configs)[:MAX_LINES]
    for ax, metric in zip(axes[:, 0], metrics, strict=False):
        for config in drawn:
            points = [(index[c.sha], v) for c, v in h.series(config, metric) if v is not None]
            if not points:
                continue
            base = points[0][1]
            ys = [(v / base - 1) * 100 if base else 0.0 for _, v in points]
            ax.plot([x for x, _ in points], ys, marker="o", markersize=3, label=config)
        for ev in h.events:
            if ev.kind in ("topology", "schema") and ev.commit.sha in index:
                ax.axvline(index[ev.commit.sha], color="grey", linestyle="--", linewidth=1)
        ax.set_ylabel("% vs first version")
        ax.set_title(f"{h.bench}: {metric}", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, loc="best")
    bottom = axes[-1, 0]
    bottom.set_xticks(range(len(versions)))
    bottom.set_xticklabels(
        [f"{v.commit.short}\n{v.commit.date[:10]}" for v in versions], rotation=90, fontsize=7
    )
    hidden = len(configs) - len(drawn)
    note = "dashed: topology change (not a regression)"
    if hidden > 0:
        note += f"; {hidden} more configs not drawn (select with -k)"
    fig.text(0.01, 0.005, note, fontsize=7)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)


def write(
    out: Path,
    histories: Sequence[BenchHistory],
    notes: Sequence[str],
    metrics: Sequence[str],
    configs_for: dict[str, list[str] | None],
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    figures: dict[str, str] = {}
    written: list[Path] = []
    for h in histories:
        names, configs = chosen(h, metrics, configs_for.get(h.bench))
        if names and any(version.file is not None for version in h.versions):
            png = out / f"history-{h.bench}.png"
            figure(h, names, configs, png)
            figures[h.bench] = png.name
            written.append(png)
    for name, text in (
        ("history.md", markdown(histories, notes)),
        ("history.html", page(histories, notes, figures)),
        ("history.json", data(histories, notes)),
    ):
        write_atomic(out / name, text)
        written.append(out / name)
    return written
