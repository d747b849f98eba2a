"""index.html's bench sections: the configs that failed this run lead each bench's table, and a
bench with more than 200 rows has its table collapsed (a <details> that says what is in it)."""

from __future__ import annotations

import re

from toyproject import TOY, Project

ROW = re.compile(
    r'<tr class="row ([a-z-]+)"><td class="id" data-v="\d+">[a-z-]+</td>'
    r'<td class="id"><code>([^<]+)</code>'
)


def section_rows(html: str, bench: str) -> list[tuple[str, str]]:
    """(verdict, config) of each row of the bench's own table, top to bottom."""
    start = html.index(f'<h2 id="{bench}">')
    end = html.find("<h2 ", start + 1)
    return ROW.findall(html[start : end if end > 0 else len(html)])


def test_failing_configs_lead_the_section_in_the_order_of_this_run(project: Project) -> None:
    """With improvements allowed, 32-slow (improved) passes and 16-new (no baseline) fails: the
    failures (a regression, a new config) come first, then what passed (improved, pass)."""
    project.bench()
    project.run("--regen-baselines", "-k", "not 16-slow").assert_outcomes(passed=3)
    project.knobs(override={"latency_ns": 32.0})  # 16-fast slower, 32-fast same, 32-slow faster
    project.run("--npubench", "toy", "--npubench-allow-improvements").assert_outcomes(
        failed=2, passed=2
    )
    rows = section_rows(project.read("npubench-artifacts/index.html"), "toy")
    assert rows == [
        ("regression", "16-fast"),
        ("new", "16-slow"),
        ("improved", "32-slow"),
        ("pass", "32-fast"),
    ]
    assert "<details" not in project.read("npubench-artifacts/index.html").split('id="toy"')[1]


def test_a_bench_of_more_than_200_rows_has_its_table_collapsed(project: Project) -> None:
    """202 configs: the table is inside a closed <details> whose summary counts the rows and the
    failing ones; the 4-config bench beside it stays open."""
    many = TOY.format(name="many", extra="").replace(
        '"size": [16, 32]', '"size": list(range(1, 102))'
    )
    project.write("benches/many.py", many)
    project.bench("toy")
    project.run("--regen-baselines").assert_outcomes(passed=206)
    project.knobs("many", override={"latency_ns": 1000.0})  # every many config slower
    project.run("--npubench", "all").assert_outcomes(failed=202, passed=4)
    html = project.read("npubench-artifacts/index.html")
    many_section = html[html.index('<h2 id="many">') :]
    many_section = many_section[: many_section.find("<h2 ", 1)]
    collapsed = re.search(
        r"<details><summary>([^<]*)</summary>\s*<table class=\"configs\">", many_section
    )
    assert collapsed is not None, many_section[:2000]
    assert collapsed.group(1) == "202 configs (202 failed, listed first): show the table"
    assert len(section_rows(html, "many")) == 202  # collapsed, not cut
    toy_section = html[html.index('<h2 id="toy">') :]
    assert "<details>" not in toy_section[: toy_section.find("<h2 ", 1)]
    assert len(section_rows(html, "toy")) == 4
