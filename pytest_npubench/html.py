"""index.html: one self-contained page per run, written by the controller next to the figures.

Regressions and where they came from come first; then each bench's figures (linked by
relative paths, so the folder works when downloaded as a CI artifact), its table of configs
and links to traces. No scripts, no external resources, no timestamps: ``-n 0`` and ``-n 2``
write the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from html import escape
from pathlib import Path

from pytest_npubench.bench import Bench
from pytest_npubench.compare import ConfigResult
from pytest_npubench.report import (
    explanation,
    gate_failures,
    metric_cell,
    metric_rows,
    ordered,
    regen_command,
    summary_columns,
)

TraceLink = Callable[[Bench, str], str | None]

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 80em; color: #222; }
h1 { margin-bottom: .2em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; }
.status { font-size: 1.1em; padding: .5em .8em; border-radius: 4px; display: inline-block; }
.bad { background: #fde2e1; color: #8a1c13; } .good { background: #e3f4e1; color: #1d5e1a; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: right; }
th:first-child, td:first-child, td.id { text-align: left; }
tr.regression td, tr.failed-check td, tr.error td { background: #fdecea; }
tr.improved td { background: #eaf6ea; } tr.new td { background: #fff7e0; }
.card { border: 1px solid #e3b3ae; border-radius: 6px; padding: .4em 1em; margin: .8em 0; }
.why { margin: .2em 0 .6em; } code { background: #f4f4f4; padding: 0 .25em; }
figure { display: inline-block; margin: .5em; vertical-align: top; }
figure img { max-width: 38em; border: 1px solid #ddd; }
figcaption { font-size: .9em; color: #555; }
"""

FAILING = ("regression", "failed-check", "error")


def render_index(
    benches: Sequence[tuple[Bench, Mapping[str, ConfigResult], Sequence[Path]]],
    problems: Sequence[str],
    regen: bool,
    trace_link: TraceLink,
    notes: Mapping[str, Sequence[str]] | None = None,
    fail_improvements: bool = True,
    not_accepted: Collection[str] = (),
) -> str:
    """The whole page as a string."""
    verdicts = FAILING + (("improved",) if fail_improvements and not regen else ())
    failing = [
        (bench, r)
        for bench, results, _ in benches
        for r in ordered(results)
        if r.verdict in verdicts
    ]
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>npubench report</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>npubench report</h1>",
        _status(benches, failing, problems, regen and not not_accepted),
    ]
    for name, lines in (notes or {}).items():
        parts.append(f'<div class="card"><h3>{escape(name)}: hardware what-if</h3>')
        parts.append(f"<pre>{escape(chr(10).join(lines))}</pre></div>")
    if failing:
        parts.append("<h2>Regressions and failures</h2>")
        parts += [_failure_card(bench, r, trace_link) for bench, r in failing]
    parts += _changes(benches, regen, not_accepted)
    for bench, results, figures in benches:
        parts += _bench_section(bench, results, figures, trace_link)
    if problems:
        parts.append("<h2>Errors</h2><ul>")
        parts += [f"<li>{escape(p)}</li>" for p in problems]
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _status(
    benches: Sequence[tuple[Bench, Mapping[str, ConfigResult], Sequence[Path]]],
    failing: Sequence[tuple[Bench, ConfigResult]],
    problems: Sequence[str],
    regen: bool,
) -> str:
    total = sum(len(results) for _, results, _ in benches)
    names = ", ".join(escape(b.name) for b, _, _ in benches) or "none"
    if failing or problems:
        text = f"{len(failing)} of {total} configs failed"
        if problems:
            text += f"; {len(problems)} error(s)"
        cls = "bad"
    else:
        text = f"all {total} configs pass their gates" + (" (baselines rewritten)" if regen else "")
        cls = "good"
    return f'<p class="status {cls}">{escape(text)}</p><p>Benches: {names}</p>'


def _failure_card(bench: Bench, result: ConfigResult, trace_link: TraceLink) -> str:
    title = f"{bench.name}[{result.config_id}]: {result.verdict}"
    body = [f'<div class="card"><h3>{escape(title)}</h3>']
    if result.verdict in ("regression", "improved"):
        rows = metric_rows(bench, result, gate_failures(bench, result))
        body.append(_table(rows))
        why = explanation(bench, result)
        if why:
            body.append(
                '<p class="why"><b>Where it came from</b> (current vs baseline, largest '
                "change first):</p><ul>"
            )
            body += [f"<li>{escape(line)}</li>" for line in why]
            body.append("</ul>")
        body.append(
            "<p>If intended, accept with "
            f"<code>{escape(regen_command(bench.name, result.config_id))}</code></p>"
        )
    elif result.message:
        body.append(f"<pre>{escape(result.message)}</pre>")
    link = trace_link(bench, result.config_id)
    if link:
        body.append(f'<p><a href="{escape(link)}">trace of this config</a></p>')
    body.append("</div>")
    return "\n".join(body)


def _changes(
    benches: Sequence[tuple[Bench, Mapping[str, ConfigResult], Sequence[Path]]],
    regen: bool,
    not_accepted: Collection[str] = (),
) -> list[str]:
    items = []
    for bench, results, _ in benches:
        accepted = regen and bench.name not in not_accepted
        for r in ordered(results):
            if r.verdict == "improved":
                note = (
                    "accepted"
                    if accepted
                    else "NOT accepted"
                    if regen
                    else ("run --regen-baselines to accept")
                )
                why = "; ".join(explanation(bench, r))
                items.append(f"{bench.name}[{r.config_id}]: improved ({note}). {why}")
            elif r.verdict in ("new", "missing-baseline"):
                items.append(
                    f"{bench.name}[{r.config_id}]: no baseline yet: "
                    f"{regen_command(bench.name, r.config_id)}"
                )
    if not items:
        return []
    return [
        "<h2>Improvements and new configs</h2><ul>",
        *(f"<li>{escape(i)}</li>" for i in items),
        "</ul>",
    ]


def _bench_section(
    bench: Bench,
    results: Mapping[str, ConfigResult],
    figures: Sequence[Path],
    trace_link: TraceLink,
) -> list[str]:
    parts = [f'<h2 id="{escape(bench.name)}">{escape(bench.name)}</h2>']
    for fig in figures:
        src = escape(fig.as_posix())
        parts.append(
            f'<figure><a href="{src}"><img src="{src}" alt="{escape(fig.name)}"></a>'
            f"<figcaption>{escape(fig.name)}</figcaption></figure>"
        )
    columns = summary_columns(bench)
    header = ["verdict", "config", *(f"{c} [{bench.metrics[c].unit}]" for c in columns), "trace"]
    rows = [f"<tr>{''.join(f'<th>{escape(h)}</th>' for h in header)}</tr>"]
    for r in ordered(results):
        cells = [
            f'<td class="id">{escape(r.verdict)}</td>',
            f'<td class="id">{escape(r.config_id)}</td>',
        ]
        cells += [f"<td>{escape(metric_cell(r, name))}</td>" for name in columns]
        link = trace_link(bench, r.config_id)
        cells.append(f'<td><a href="{escape(link)}">trace</a></td>' if link else "<td></td>")
        rows.append(f'<tr class="{escape(r.verdict)}">{"".join(cells)}</tr>')
    parts.append("<table>" + "\n".join(rows) + "</table>")
    return parts


def _table(rows: Sequence[Sequence[str]]) -> str:
    head, *body = rows
    out = ["<table>", "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in body]
    out.append("</table>")
    return "\n".join(out)
