"""What a new user reads before running anything (issue 27, "First steps"): ``pytest --help``
agrees with the README and with the files the plugin writes, names the project's benches, and
``pytest benches/x.py`` without ``--npubench`` says how to run the bench instead of a bare
``collected 0 items``."""

from __future__ import annotations

import re
from pathlib import Path

from toyproject import TOY, Project, output

README = Path(__file__).resolve().parents[2] / "README.md"
TRACE = "    trace=lambda params, path, limit: path.write_text('{\"traceEvents\": []}'),"


def _flat(text: str) -> str:
    """Help text with argparse's line wrapping undone."""
    return " ".join(text.split())


def _trace_template(text: str) -> str:
    """The trace file path a text promises: ``<artifacts>/<bench>/traces/<...>.json``."""
    found = re.findall(r"<artifacts>/<bench>/traces/(\S+?\.json)", _flat(text))
    assert found, text
    assert len(set(found)) == 1, found
    return str(found[0])


def test_help_trace_path_is_the_readmes_and_the_written_files(project: Project) -> None:
    """``pytest --help`` and the README give one trace path template, and a traced run
    writes exactly that name (``<config>-<hash>.json``)."""
    project.write("benches/toy.py", TOY.format(name="toy", extra=TRACE))
    helped = project.run("--help")
    template = _trace_template(helped.stdout.str())
    assert template == _trace_template(README.read_text())
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.run("--npubench", "toy", "-k", "16-fast", "--npubench-trace").assert_outcomes(passed=1)
    written = [p.name for p in (project.path / "npubench-artifacts/toy/traces").glob("*.json")]
    pattern = re.escape(template).replace(re.escape("<config>"), re.escape("16-fast"))
    pattern = pattern.replace(re.escape("<hash>"), "[0-9a-f]{10}")
    assert len(written) == 1 and re.fullmatch(pattern, written[0]), (template, written)


def test_help_lists_the_benches_of_the_project(project: Project) -> None:
    """The benches found in the ini's bench paths are named in ``pytest --help``, with the
    command that runs one."""
    project.bench("toy")
    project.bench("other")
    text = _flat(project.run("--help").stdout.str())
    assert "benches in this project (npubench_paths: benches): other, toy" in text, text
    assert "pytest --npubench other" in text


def test_help_with_a_broken_bench_module_still_shows_help(project: Project) -> None:
    """A bench module that does not import costs the list, not the help."""
    project.write("benches/broken.py", "raise RuntimeError('no')\n")
    result = project.run("--help")
    assert result.ret == 0
    text = _flat(result.stdout.str())
    assert "--npubench-trace" in text
    assert "benches in this project: could not import them" in text, text


def test_a_bench_path_without_npubench_says_how_to_run_the_bench(project: Project) -> None:
    """``pytest benches/toy.py`` collects nothing (a bench module has no tests); the run
    says so and gives the command, naming the bench the module defines."""
    project.bench("toy")
    result = project.run("benches/toy.py")
    text = output(result)
    assert "collected 0 items" in text
    assert "benches/toy.py is a bench module, not a test file" in text, text
    assert "pytest --npubench toy" in text, text


def test_the_bench_folder_without_npubench_names_every_bench(project: Project) -> None:
    """``pytest benches`` gives the command for every bench under it, once."""
    project.bench("toy")
    project.bench("other")
    text = output(project.run("benches", xdist=True))
    assert text.count("pytest --npubench other,toy") == 1, text


def test_no_hint_for_ordinary_test_paths(project: Project) -> None:
    """A plain test run says nothing about benches."""
    project.bench("toy")
    project.write("tests/test_a.py", "def test_a():\n    pass\n")
    result = project.run("tests")
    result.assert_outcomes(passed=1)
    assert "--npubench" not in output(result)
