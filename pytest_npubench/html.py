"""index.html: one self-contained page per run, written by the controller next to the figures.

A banner with each bench's counts (measured / reused / failed), a sticky nav, then an overview
of the failures with one command that accepts them all, each failure's details (collapsed),
then per bench its figures at full width with captions and its table of configs (reused rows
marked; columns sortable and rows filterable by a few lines of inline script, the page reads
the same without it). Files are linked by relative paths, so the folder works when downloaded
as a CI artifact; no external resources, no timestamps: ``-n 0`` and ``-n 2`` write the same
bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from html import escape
from pathlib import Path

from pytest_npubench.bench import Bench
from pytest_npubench.compare import ConfigResult
from pytest_npubench.headline import GATE_VERDICTS, headline_line, ranked_metrics
from pytest_npubench.numbers import column_header
from pytest_npubench.report import (
    bench_line,
    explanation,
    failing_verdicts,
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
table.text th, table.text td { text-align: left; }
tr.regression td, tr.failed-check td, tr.error td { background: #fdecea; }
tr.improved td { background: #eaf6ea; } tr.new td { background: #fff7e0; }
.card { border: 1px solid #e3b3ae; border-radius: 6px; padding: .4em 1em; margin: .8em 0; }
.why { margin: .2em 0 .6em; } code { background: #f4f4f4; padding: 0 .25em; }
figure { margin: 1em 0 1.6em; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { color: #444; max-width: 60em; }
nav { position: sticky; top: 0; background: #fff; border-bottom: 1px solid #ccc;
      padding: .4em 0; z-index: 1; } nav a { margin-right: 1.2em; }
tr.reused-baseline td, tr.missing-baseline td { color: #777; background: #f6f6f6;
      font-style: italic; }
td.id code { white-space: nowrap; } th { cursor: pointer; background: #f4f4f4; }
details { margin: .4em 0; } summary { cursor: pointer; font-weight: 600; }
.banner li { margin: .15em 0; } input.filter { margin: .3em 0; padding: .2em .4em; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; max-width: 100%; overflow-x: auto; }
details.bench > summary { font-size: 1.1em; }
"""

#: Sorts a table by the clicked column (numbers by value) and filters rows by a text box.
SCRIPT = """
document.querySelectorAll("table.configs").forEach(function (t) {
  var box = document.createElement("input");
  box.className = "filter"; box.placeholder = "filter rows (id or verdict)";
  t.parentNode.insertBefore(box, t);
  box.addEventListener("input", function () {
    var q = box.value.toLowerCase();
    t.querySelectorAll("tr.row").forEach(function (r) {
      r.style.display = r.textContent.toLowerCase().indexOf(q) < 0 ? "none" : "";
    });
  });
  t.querySelectorAll("th").forEach(function (th, i) {
    th.addEventListener("click", function () {
      var rows = Array.prototype.slice.call(t.querySelectorAll("tr.row"));
      var up = th.dataset.up !== "1"; th.dataset.up = up ? "1" : "0";
      rows.sort(function (a, b) {
        var x = a.children[i].dataset.v || a.children[i].textContent;
        var y = b.children[i].dataset.v || b.children[i].textContent;
        var nx = parseFloat(x), ny = parseFloat(y);
        var c = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y, undefined, {numeric: true})
                                         : nx - ny;
        return up ? c : -c;
      });
      rows.forEach(function (r) { r.parentNode.appendChild(r); });
    });
  });
});
"""

FAILING = ("regression", "failed-check", "error")

#: a bench table of more rows than this is collapsed (a <details>) so the page stays readable
COLLAPSE_ROWS = 200

INTERRUPTED = (
    '<p class="status bad"><strong>INTERRUPTED</strong>: this run was stopped before it ended '
    "(Ctrl-C). The results below are partial: the configs that did not run are not judged, "
    "no baseline was rewritten and no figure was drawn from them.</p>"
)


def render_index(
    benches: Sequence[tuple[Bench, Mapping[str, ConfigResult], Sequence[Path]]],
    problems: Sequence[str],
    regen: bool,
    trace_link: TraceLink,
    notes: Mapping[str, Sequence[str]] | None = None,
    fail_improvements: bool = True,
    not_accepted: Collection[str] = (),
    drawn: Collection[str] = (),
    interrupted: bool = False,
) -> str:
    """The whole page as a string. ``drawn``: trace links whose timeline PNG exists;
    ``interrupted``: the run was stopped before it ended (the page says so first)."""
    verdicts = FAILING + (("changed",) if not regen else ())
    verdicts += ("improved",) if fail_improvements and not regen else ()
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
        *([INTERRUPTED] if interrupted else []),
        _nav(benches, failing, problems),
        _status(
            benches, failing, problems, regen and not not_accepted, interrupted, fail_improvements
        ),
    ]
    for name, lines in (notes or {}).items():
        parts.append(f'<div class="card"><h3>{escape(name)}: hardware what-if</h3>')
        parts.append(f"<pre>{escape(chr(10).join(lines))}</pre></div>")
    if failing:
        parts += _failure_overview(failing)
        parts += [_failure_card(bench, r, trace_link, drawn) for bench, r in failing]
    parts += _changes(benches, regen, not_accepted)
    fails = failing_verdicts(regen, fail_improvements)
    for bench, results, figures in benches:
        parts += _bench_section(bench, results, figures, trace_link, drawn, fails)
    if problems:
        parts.append('<h2 id="errors">Errors</h2><ul>')
        parts += [f"<li>{escape(p)}</li>" for p in problems]
        parts.append("</ul>")
    parts.append(f"<script>{SCRIPT}</script></body></html>")
    return "\n".join(parts) + "\n"


def _nav(
    benches: Sequence[tuple[Bench, Mapping[str, ConfigResult], Sequence[Path]]],
    failing: Sequence[tuple[Bench, ConfigResult]],
    problems: Sequence[str],
) -> str:
    links = [("failures", f"failures ({len(failing)})")] if failing else []
    links += [(b.name, b.name) for b, _, _ in benches]
    links += [("errors", f"errors ({len(problems)})")] if problems else []
    return "<nav>" + "".join(f'<a href="#{escape(a)}">{escape(t)}</a>' for a, t in links) + "</nav>"


def _status(
    benches: Sequence[tuple[Bench, Mapping[str, ConfigResult], Sequence[Path]]],
    failing: Sequence[tuple[Bench, ConfigResult]],
    problems: Sequence[str],
    regen: bool,
    interrupted: bool = False,
    fail_improvements: bool = True,
) -> str:
    measured = sum(r.source == "run" for _, results, _ in benches for r in results.values())
    reused = sum(r.source != "run" for _, results, _ in benches for r in results.values())
    if failing or problems:
        text = f"{len(failing)} of {measured} measured configs failed"
        if problems:
            text += f"; {len(problems)} error(s)"
        cls = "bad"
    elif interrupted:
        text = f"interrupted: {measured} configs were measured, none failed; the rest did not run"
        cls = "bad"
    else:
        text = f"all {measured} measured configs pass their gates"
        text += " (baselines rewritten)" if regen else ""
        cls = "good"
    if reused:
        text += f"; {reused} regen-only configs were not run (their baseline values are shown)"
    lines = "".join(
        f"<li>{escape(bench_line(b, results, regen, fail_improvements))}</li>"
        for b, results, _ in benches
    )
    return f'<p class="status {cls}">{escape(text)}</p><ul class="banner">{lines}</ul>'


def _failure_overview(failing: Sequence[tuple[Bench, ConfigResult]]) -> list[str]:
    rows = [["bench", "config", "verdict", "what moved (headline first)"]]
    for bench, r in failing:
        moved = headline_line(bench, r) if r.verdict in GATE_VERDICTS else r.message[:160]
        rows.append([bench.name, r.config_id, r.verdict, moved])
    names = sorted({bench.name for bench, r in failing if r.verdict in GATE_VERDICTS})
    accept = (
        f"<p>If every change is intended, accept them all with "
        f"<code>{escape(regen_command(','.join(names)))}</code></p>"
        if names
        else ""
    )
    return ['<h2 id="failures">Failures</h2>', _table(rows, text=True), accept]


def _failure_card(
    bench: Bench, result: ConfigResult, trace_link: TraceLink, drawn: Collection[str]
) -> str:
    title = f"{bench.name}[{result.config_id}]: {result.verdict}"
    body = [f'<details class="card"><summary>{escape(title)}</summary>']
    if result.verdict in GATE_VERDICTS:
        rows = metric_rows(
            bench, result, ranked_metrics(bench, result, gate_failures(bench, result))
        )
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
        picture = _timeline(link, drawn)
        if picture:
            body.append(f'<img src="{escape(picture)}" alt="timeline" style="max-width:100%">')
    body.append("</details>")
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
    drawn: Collection[str],
    fails: Collection[str] = (),
) -> list[str]:
    """The bench's figures and its table: the configs that failed this run (``fails``: their
    verdicts) first, then the rest, each worst first; more than :data:`COLLAPSE_ROWS` rows
    go in a closed <details> that counts them."""
    parts = [f'<h2 id="{escape(bench.name)}">{escape(bench.name)}</h2>']
    for fig in figures:
        src = escape(fig.as_posix())
        caption = (bench.captions or {}).get(fig.name, "")
        text = f"<b>{escape(fig.name)}</b>" + (f": {escape(caption)}" if caption else "")
        parts.append(
            f'<figure><a href="{src}"><img src="{src}" alt="{escape(fig.name)}"></a>'
            f"<figcaption>{text}</figcaption></figure>"
        )
    columns = summary_columns(bench)
    units = {c: bench.metrics[c].unit for c in columns}
    header = ["verdict", "config", *(column_header(c, units[c]) for c in columns), "trace"]
    rows = [f"<tr>{''.join(f'<th>{escape(h)}</th>' for h in header)}</tr>"]
    worst_first = ordered(results)
    failed = [r for r in worst_first if r.verdict in fails]
    for n, r in enumerate(failed + [r for r in worst_first if r.verdict not in fails]):
        cells = [
            f'<td class="id" data-v="{n:06d}">{escape(r.verdict)}</td>',
            f'<td class="id"><code>{escape(r.config_id)}</code></td>',
        ]
        cells += [
            f'<td data-v="{r.metrics.get(name, "")}">'
            f"{escape(metric_cell(r, name, units[name]))}</td>"
            for name in columns
        ]
        link = trace_link(bench, r.config_id)
        picture = _timeline(link, drawn) if link else None
        cell = f'<a href="{escape(link)}">trace</a>' if link else ""
        cell += f' <a href="{escape(picture)}">timeline</a>' if picture else ""
        cells.append(f"<td>{cell}</td>")
        rows.append(f'<tr class="row {escape(r.verdict)}">{"".join(cells)}</tr>')
    table = '<table class="configs">' + "\n".join(rows) + "</table>"
    if len(results) > COLLAPSE_ROWS:
        listed = f"{len(failed)} failed, listed first" if failed else "none failed"
        summary = f"{len(results)} configs ({listed}): show the table"
        table = f"<details><summary>{escape(summary)}</summary>\n{table}</details>"
    parts.append(table)
    return parts


def _timeline(link: str, drawn: Collection[str]) -> str | None:
    """The timeline PNG drawn beside a trace (``.json`` -> ``.png``), if it was drawn."""
    return link[: -len(".json")] + ".png" if link.endswith(".json") and link in drawn else None


def _table(rows: Sequence[Sequence[str]], text: bool = False) -> str:
    """A table; ``text``: its cells are words, not numbers, so every column is left-aligned."""
    head, *body = rows
    start = '<table class="text">' if text else "<table>"
    out = [start, "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in body]
    out.append("</table>")
    return "\n".join(out)
