"""index.html: self-contained, relative links, regressions first, and it renders in Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread
from toyproject import REGEN_ONLY, TOY, Project

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium; .ci/run does)"
)


def render(page: Path, tmp_path: Path) -> tuple[np.ndarray, list[str]]:
    """Screenshot a page in headless Chromium with no network; return pixels and console lines."""
    assert CHROMIUM is not None
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,1600",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shot.is_file(), proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return imread(shot), console


def failing_project(project: Project, xdist: bool = False) -> Path:
    project.bench(figures=True)
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=2.0, util=0.25)
    project.run("--npubench", "toy", xdist=xdist).assert_outcomes(failed=4)
    return project.path / "npubench-artifacts" / "index.html"


def test_page_links_only_files_in_the_artifact_folder(project: Project) -> None:
    """Every src/href is relative and points at a file that exists (or an anchor of the page),
    so the folder works when downloaded as a CI artifact; no external resources; the one inline
    script only sorts and filters the tables (the page reads the same without it)."""
    index = failing_project(project)
    html = index.read_text()
    links = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert "toy/latency.png" in links
    for link in links:
        assert "://" not in link and not link.startswith("/"), link
        if link.startswith("#"):
            assert f'id="{link[1:]}"' in html, link
        else:
            assert (index.parent / link).is_file(), link
    assert html.count("<script") == 1 and "src=" not in html.split("<script")[1].split(">")[0]


def test_regressions_come_first_with_their_explanation(project: Project) -> None:
    """The status line counts failures; an overview table of the failures with one command
    that accepts them all, then each regression's card (collapsed, with its table and its
    explanation), precede the bench's figures and table."""
    html = failing_project(project).read_text()
    assert '<p class="status bad">4 of 4 measured configs failed</p>' in html
    assert "<li>toy: 4 run: 0 passed, 4 failed (4 regressions)</li>" in html
    assert '<nav><a href="#failures">failures (4)</a><a href="#toy">toy</a></nav>' in html
    overview = html.index('<h2 id="failures">')
    assert html.index("accept them all with <code>pytest --npubench toy --regen-baselines") > (
        overview
    )
    first_card = html.index("toy[16-fast]: regression")
    assert overview < first_card and "<details" in html[overview:first_card]
    assert first_card < html.index('<h2 id="toy">') < html.index("<img")
    assert "util -50.00 % (0.5 -&gt; 0.25)" in html[first_card:]
    # the overview is text (ids, verdicts, sentences): left-aligned, unlike the number tables
    assert '<table class="text">' in html[overview:first_card]
    assert "table.text th, table.text td { text-align: left; }" in html


def test_page_is_identical_under_xdist(project: Project) -> None:
    """-n 0 and -n 2 write the same index.html."""
    index = failing_project(project)
    first = index.read_bytes()
    project.run("--npubench", "toy", xdist=True).assert_outcomes(failed=4)
    assert index.read_bytes() == first


@needs_chromium
def test_page_renders_in_headless_chromium(project: Project, tmp_path: Path) -> None:
    """The screenshot is not blank (ink and colour in it) and the console stays silent."""
    pixels, console = render(failing_project(project), tmp_path)
    rgb = pixels[..., :3]
    ink = np.mean(np.any(rgb < 0.9, axis=-1))
    assert ink > 0.02, f"only {ink:.1%} of the page has ink"
    assert np.ptp(rgb) > 0.5
    assert console == []


@needs_chromium
def test_console_check_can_fail(tmp_path: Path) -> None:
    """The console check sees a script error (so a silent console means something)."""
    page = tmp_path / "broken.html"
    page.write_text("<!doctype html><p>x</p><script>notDefined();</script>")
    _, console = render(page, tmp_path)
    assert any("notDefined" in line for line in console)


def test_reused_rows_are_marked_and_ids_do_not_wrap(project: Project) -> None:
    """Regen-only configs not run are counted in the banner and their rows carry their own
    class (greyed); config ids are code that does not wrap; figures carry their caption."""
    project.write(
        "benches/toy.py",
        TOY.format(
            name="toy",
            extra=REGEN_ONLY + "\n    figures=figures,\n"
            '    captions={"latency.png": "latency of every config; lower is better"},',
        ),
    )
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.run("--npubench", "toy").assert_outcomes(passed=3, skipped=1)
    html = project.read("npubench-artifacts/index.html")
    assert "all 3 measured configs pass their gates; 1 regen-only configs were not run" in html
    assert '<tr class="row reused-baseline">' in html
    assert '<td class="id"><code>32-slow</code></td>' in html
    assert "td.id code { white-space: nowrap; }" in html
    assert "<b>latency.png</b>: latency of every config; lower is better" in html


@needs_chromium
def test_dom_after_scripts_counts_rows_and_adds_the_filter(
    project: Project, tmp_path: Path
) -> None:
    """Chromium's DOM of the page (after the inline script ran): one filter box per table,
    one row per config with its verdict class, every link resolving to a file or an anchor."""
    assert CHROMIUM is not None
    project.write(
        "benches/toy.py", TOY.format(name="toy", extra=REGEN_ONLY + "\n    figures=figures,")
    )
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=2.0)
    project.run("--npubench", "toy").assert_outcomes(failed=3, skipped=1)
    index = project.path / "npubench-artifacts" / "index.html"
    dom = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            index.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    ).stdout
    assert dom.count('class="filter"') == 1
    assert dom.count('<tr class="row regression">') == 3
    assert dom.count('<tr class="row reused-baseline">') == 1
    for link in re.findall(r'(?:src|href)="([^"]+)"', dom):
        target = link[1:] if link.startswith("#") else None
        assert (f'id="{target}"' in dom) if target else (index.parent / link).is_file(), link
