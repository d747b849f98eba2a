"""summary.md: the run in Markdown, for a CI job's step summary (GitHub renders it as Markdown
with inline HTML).

Every string the plugin did not write itself (config ids, metric names, messages, ``explain=``
lines, errors) goes through :func:`md_text`, the one escaping function, either directly or
through :func:`md_code` (which keeps it literal in a code span when that is safe, and escapes
it otherwise) or :func:`md_fence` (literal lines in a fence no content can close). Ordinary
text (letters, digits, ``_-.x``) passes unchanged, so a normal run's file keeps its bytes.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from pytest_npubench.bench import Bench
from pytest_npubench.compare import ConfigResult
from pytest_npubench.headline import GATE_VERDICTS, headline_line
from pytest_npubench.report import (
    bench_counts,
    explanation,
    ordered,
    regen_command,
)

#: what Markdown or HTML would act on: HTML (``<>&``), links (``[]``), code spans, emphasis,
#: table cells (``|``) and the backslash itself (else ``\\|`` would undo the escape of ``|``)
_HTML = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_SPECIAL = re.compile(r"[\\`*\[\]|<>&]|\r\n|\r|\n")
#: a code span holds these literally, in a table too (no backtick, pipe or line break)
_CODE_UNSAFE = re.compile(r"[`|\r\n]")
_BACKTICKS = re.compile(r"`+")


def md_text(text: str) -> str:
    """``text`` as one line of inline Markdown that renders as exactly this text: HTML
    characters as entities, Markdown punctuation backslash-escaped, line breaks as spaces."""

    def escaped(match: re.Match[str]) -> str:
        char = match.group()
        if char in _HTML:
            return _HTML[char]
        return " " if char in ("\r\n", "\r", "\n") else "\\" + char

    return _SPECIAL.sub(escaped, text)


def md_code(text: str) -> str:
    """``text`` as a code span when it holds it literally, else as escaped text in ``<code>``."""
    if text and not _CODE_UNSAFE.search(text) and text.strip() == text:
        return f"`{text}`"
    return f"<code>{md_text(text)}</code>"


def md_fence(lines: Sequence[str]) -> list[str]:
    """A fenced block of literal lines, its fence longer than any run of backticks in them."""
    longest = max((len(run) for line in lines for run in _BACKTICKS.findall(line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, *(line.replace("\r", "") for line in lines), fence]


Rows = Sequence[tuple[Bench, Mapping[str, ConfigResult], Sequence[Path]]]


def summary_markdown(
    benches: Rows,
    problems: Sequence[str],
    regen: bool = False,
    notes: Mapping[str, Sequence[str]] | None = None,
    not_accepted: Collection[str] = (),
    interrupted: bool = False,
    fail_improvements: bool = True,
) -> str:
    """summary.md: counts per bench, then regressions, improvements and new configs.

    ``not_accepted``: benches whose baseline a regen could not write (their changes are not
    called accepted). ``interrupted``: the run was stopped (Ctrl-C) before it ended; the file
    says so first, and never calls the partial result clean."""
    lines = ["# npubench summary", ""]
    if interrupted:
        lines += [INTERRUPTED_NOTE, ""]
    lines += [
        f"- **{md_text(b.name)}: {bench_counts(results, regen, fail_improvements)}**"
        for b, results, _ in benches
    ]
    lines.append("")
    for name, note_lines in (notes or {}).items():
        lines += [f"**{md_text(name)}: hardware what-if**", "", *md_fence(note_lines), ""]
    if regen and interrupted:
        lines += ["Baselines NOT rewritten: the --regen-baselines run was interrupted.", ""]
    elif regen:
        lines += ["Baselines rewritten (--regen-baselines): changes are against the old ones."]
        if not_accepted:
            names = ", ".join(md_text(n) for n in sorted(not_accepted))
            lines.append(f"NOT written (see Errors): {names}.")
        lines.append("")
    lines += _notable_markdown(benches, regen, not_accepted, interrupted)
    to_accept = [
        bench.name
        for bench, results, _ in benches
        if any(r.verdict in (*GATE_VERDICTS, "new") for r in results.values())
    ]
    if to_accept and not regen:
        lines += [
            "If every change above is intended, accept them all with:",
            "",
            f"    pytest --npubench {','.join(to_accept)} --regen-baselines",
            "",
        ]
    figures = sum(len(f) for _, _, f in benches)
    lines.append(
        f"The {figures} figure(s), results.json and index.html are in the artifact folder "
        "beside this file (in CI: the uploaded artifact); a step summary cannot show them."
    )
    if problems:
        lines += ["", "## Errors", "", *(f"- {md_text(p)}" for p in problems)]
    return "\n".join(lines).rstrip() + "\n"


INTERRUPTED_NOTE = (
    "**INTERRUPTED: this run was stopped before it ended (Ctrl-C). The results below are "
    "partial: the configs that did not run are not judged, no baseline was rewritten and no "
    "figure was drawn from them. Run it again to the end.**"
)


#: with more configs than this moving, summary.md lists them without their explanations
EXPLAIN_MOST = 10


def _notable_markdown(
    benches: Rows, regen: bool, not_accepted: Collection[str], interrupted: bool
) -> list[str]:
    rows = [
        "| " + " | ".join(row) + " |"
        for bench, results, _ in benches
        for result in ordered(results)
        if result.verdict not in ("pass", "reused-baseline")
        for row in _notable_rows(bench, result, regen, bench.name in not_accepted)
    ]
    if not rows and interrupted:
        return ["Nothing changed beyond tolerance in the configs that ran before the stop.", ""]
    if not rows:
        return ["No regressions, improvements or new configs.", ""]
    moved = [
        (bench, result)
        for bench, results, _ in benches
        for result in ordered(results)
        if result.verdict in GATE_VERDICTS and result.baseline
    ]
    why = [
        f"- **{md_text(bench.name)} {md_code(result.config_id)}** ({result.verdict}): "
        + "; ".join(md_text(line) for line in explanation(bench, result))
        for bench, result in moved
    ]
    if len(why) > EXPLAIN_MOST:
        why = [f"{len(why)} configs moved: each one's table and explanation is in index.html."]
    return [
        "## Regressions, changes, improvements and new configs",
        "",
        "One row per config, headline metric first; full tables are in index.html and "
        "results.json.",
        "",
        "| bench | config | verdict | what moved (headline first) | note |",
        "|---|---|---|---|---|",
        *rows,
        "",
        *(["### Where the changes came from", "", *why, ""] if why else []),
    ]


def _notable_rows(
    bench: Bench, result: ConfigResult, regen: bool, write_failed: bool = False
) -> list[list[str]]:
    """The table rows of one config, every cell Markdown (untrusted text escaped)."""
    if regen and write_failed and result.verdict in ("new", *GATE_VERDICTS):
        note = "NOT accepted: the baseline could not be written (see Errors)"
    elif regen and result.verdict in ("new", *GATE_VERDICTS):
        note = "accepted (baseline rewritten)"
    elif result.verdict in GATE_VERDICTS:
        note = "see below; accept with --regen-baselines if intended"
    elif result.verdict == "new":
        note = md_code(regen_command(bench.name, result.config_id))
    else:
        note = md_text((result.message.splitlines() or [""])[0])
    base = [md_text(bench.name), md_code(result.config_id), result.verdict]
    what = headline_line(bench, result) if result.verdict in GATE_VERDICTS else ""
    return [[*base, md_text(what), note]]
