"""summary.md escapes what the plugin did not write itself (issue 22): config ids, messages and
explain= lines cannot add HTML, break the table, close a code span or make a link. GitHub
renders the file as Markdown with inline HTML ($GITHUB_STEP_SUMMARY)."""

from __future__ import annotations

import re

from toyproject import TOY, Project

EVIL = "`<script>alert(1)</script>` | [x](javascript:alert(1)) \\| *b* &amp;"
HOSTILE = f"""\
    config_id=lambda p: ({EVIL!r} if p["variant"] == "fast" else "plain") + f"-{{p['size']}}",
    explain=lambda cur, base: [{EVIL!r}, "second line"],
"""

UNESCAPED_PIPE = re.compile(r"(?<!\\)((?:\\\\)*)\|")
CODE_SPAN = re.compile(r"(?<![`\\])(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def _outside_code(line: str) -> str:
    """The line without its code spans (their content is literal text)."""
    return CODE_SPAN.sub("", line)


def _check_line(line: str) -> None:
    outside = _outside_code(line)
    assert "<script" not in outside and "</script" not in outside, line
    assert not re.search(r"(?<!\\)\]\(", outside), line  # no live [text](target) link
    assert not re.search(r"(?<!\\)`", outside), line  # every backtick is a span's, or escaped
    assert "&amp;" not in outside.replace("&amp;amp;", ""), line  # & is escaped
    for span in CODE_SPAN.findall(line):
        assert "javascript" not in span[1] and "<" not in span[1], line


def test_hostile_ids_messages_and_explanations_are_inert_in_summary_md(project: Project) -> None:
    """A bench whose ids, failure message and explain= lines hold HTML, pipes, backticks and a
    javascript: link: summary.md shows them as text. Each table row keeps its six cell
    borders; outside code spans nothing is live; and index.html stays escaped too."""
    project.write("benches/toy.py", TOY.format(name="toy", extra=HOSTILE))
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=2.0, message=EVIL + "\nnext line")
    project.run("--npubench", "toy").assert_outcomes(failed=4)
    summary = project.read("npubench-artifacts/summary.md")
    rows = [line for line in summary.splitlines() if line.startswith("| toy |")]
    assert len(rows) == 4, summary
    for row in rows:
        assert len(UNESCAPED_PIPE.findall(row)) == 6, (
            row
        )  # five columns: bench, config, verdict, what moved, note
    assert "### Where the changes came from" in summary
    for line in summary.splitlines():
        _check_line(line)
    assert "alert(1)" in summary  # shown, as text
    html = project.read("npubench-artifacts/index.html")
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)" in html


def test_the_escaping_keeps_ordinary_text_and_neutralises_the_rest() -> None:
    """Ordinary ids pass unchanged (summary.md of a normal run stays byte for byte the same);
    every character that Markdown or HTML would act on is escaped, a backslash too (else
    ``\\|`` would turn the escape of the pipe back off)."""
    from pytest_npubench.markdown import md_code, md_text

    for plain in ("16-fast", "m1024xk512_fp16", "ring.8chips", "tp_layer"):
        assert md_text(plain) == plain
        assert md_code(plain) == f"`{plain}`"
    assert md_text("a\\|b") == "a\\\\\\|b"
    assert md_text("<b>&</b>") == "&lt;b&gt;&amp;&lt;/b&gt;"
    assert md_text("[x](javascript:y)") == "\\[x\\](javascript:y)"
    assert md_text("one\ntwo\r\nthree") == "one two three"
    assert md_text("`*x*`") == "\\`\\*x\\*\\`"
    assert md_code("a`b") == "<code>a\\`b</code>"
    assert md_code("a|b") == "<code>a\\|b</code>"
    assert md_code("<script>") == "`<script>`"  # literal inside a code span
