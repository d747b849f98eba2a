"""--npubench: which items exist, what they are called, what else gets deselected."""

from __future__ import annotations

import pytest
from toyproject import Project, assert_no_plugin_traceback, output


def test_without_the_option_pytest_is_the_plain_test_suite(project: Project) -> None:
    """No --npubench: bench modules are not collected (not even imported); tests run as usual."""
    project.bench()
    project.write("benches/boom.py", "raise RuntimeError('must not be imported')\n")
    project.write("tests/test_plain.py", "def test_plain():\n    pass\n")
    result = project.run()
    result.assert_outcomes(passed=1)
    assert "toy[" not in output(result)


def test_one_item_per_config_with_bench_ids_and_markers(project: Project) -> None:
    """Items are named bench[config_id], carry the npubench marker, and regen-only ones 'regen'."""
    project.bench(regen_only=True)
    result = project.run("--npubench", "toy", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "benches/toy.py::toy[16-fast]",
            "benches/toy.py::toy[16-slow]",
            "benches/toy.py::toy[32-fast]",
            "benches/toy.py::toy[32-slow]",
        ]
    )
    regen = project.run("--npubench", "toy", "--collect-only", "-q", "-m", "regen")
    regen.stdout.fnmatch_lines(["benches/toy.py::toy[32-slow]", "*1/4 tests collected*"])
    marked = project.run("--npubench", "toy", "--collect-only", "-q", "-m", "npubench")
    marked.stdout.fnmatch_lines(["*4 tests collected*"])


def test_benches_come_from_the_bench_paths_whatever_the_cli_paths(project: Project) -> None:
    """With --npubench, the bench items are collected even when the CLI names another folder,
    and no other test is collected (not even imported)."""
    project.bench()
    project.write("tests/test_plain.py", "def test_plain():\n    pass\n")
    result = project.run("--npubench", "toy", "tests", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["benches/toy.py::toy[16-fast]", "4 tests collected*"])
    assert "test_plain" not in output(result)


def test_ini_settings_choose_bench_and_baseline_folders(project: Project) -> None:
    """npubench_paths and npubench_baselines (relative to the ini file) are honoured."""
    project.pytester.makeini(
        "[pytest]\nnpubench_paths = suite/perf\nnpubench_baselines = data/perf\n"
    )
    project.bench()
    (project.path / "benches" / "toy.py").rename(project.path / "suite_perf_toy.py")
    project.write("suite/perf/toy.py", project.read("suite_perf_toy.py"))
    result = project.run("--npubench", "toy", "--regen-baselines")
    result.assert_outcomes(passed=4)
    assert (project.path / "data" / "perf" / "toy.json").is_file()


def test_all_and_comma_separated_names(project: Project) -> None:
    """--npubench all selects every bench; a comma list selects exactly those."""
    project.bench("toy")
    project.bench("other")
    project.bench("third")
    everything = project.run("--npubench", "all", "--collect-only", "-q")
    everything.stdout.fnmatch_lines(["*12 tests collected*"])
    two = project.run("--npubench", "toy,third", "--collect-only", "-q")
    two.stdout.fnmatch_lines(["*8 tests collected*"])
    assert "other[" not in output(two)


def test_unknown_bench_is_a_usage_error_listing_the_known_ones(project: Project) -> None:
    """A misspelt bench name stops the run with one line naming the known benches."""
    project.bench("toy")
    project.bench("other")
    result = project.run("--npubench", "toyy")
    assert result.ret == 4
    assert "--npubench: unknown bench 'toyy'; known benches: other, toy" in output(result)
    assert_no_plugin_traceback(result)


def test_malformed_bench_name_value_is_a_usage_error(project: Project) -> None:
    """A value that cannot be a bench name is rejected by the option parser, with the fix."""
    project.bench()
    result = project.run("--npubench", "toy,,gemm")
    assert result.ret == 4
    assert "give bench names separated by commas" in output(result)


def test_help_shows_one_npubench_group(project: Project) -> None:
    """pytest --help lists the plugin's options in one group."""
    result = project.run("--help")
    result.stdout.fnmatch_lines(
        [
            "pytest-npubench: performance benches and baselines:",
            "*--npubench=NAME*",
            "*--regen-baselines*",
            "*--npubench-strict*",
            "*--npubench-prune*",
            "*--npubench-artifacts=DIR*",
        ]
    )


def test_all_with_an_unknown_name_is_a_usage_error(project: Project) -> None:
    """``all,nosuch`` is a typo, not "all": it is refused, listing the known benches."""
    project.bench()
    result = project.run("--npubench", "all,nosuch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--npubench: unknown bench 'nosuch'; known benches: toy" in output(result)


@pytest.mark.parametrize("xdist", [False, True], ids=["n0", "n2"])
def test_a_broken_test_file_or_conftest_cannot_stop_a_bench_run(
    project: Project, xdist: bool
) -> None:
    """Bench runs import no ordinary test file or conftest below the rootdir, so a broken one
    (found by the walk, or named on the command line) neither aborts the run nor a regen."""
    project.bench()
    project.write("tests/test_broken.py", "import nosuchmodule\n")
    project.write("tests/sub/conftest.py", "raise RuntimeError('broken conftest')\n")
    project.run("--regen-baselines", xdist=xdist).assert_outcomes(passed=4)
    result = project.run("--npubench", "toy", "tests/test_broken.py", xdist=xdist)
    result.assert_outcomes(passed=4)
    assert "nosuchmodule" not in output(result)


REPORT_PLUGINS = """
def pytest_sessionfinish(session):
    has = session.config.pluginmanager.has_plugin("hypothesispytest")
    print(f"\\nhypothesis plugin registered: {has}")
"""


@pytest.mark.parametrize("bench_run", [False, True], ids=["plain", "--npubench"])
def test_a_bench_run_drops_the_hypothesis_plugin_a_plain_run_keeps_it(
    pytester: pytest.Pytester, bench_run: bool
) -> None:
    """A bench run collects no ordinary test, so hypothesis's plugin (whose end-of-run summary
    imports all of hypothesis) is unregistered; a plain run keeps it (ADR 0013)."""
    project = Project(pytester)
    project.bench()
    project.write("conftest.py", REPORT_PLUGINS)
    project.write("tests/test_plain.py", "def test_plain():\n    pass\n")
    args = ["--npubench", "toy", "--regen-baselines"] if bench_run else []
    result = pytester.runpytest_inprocess(*args, "-s")
    assert result.ret == 0, output(result)
    result.stdout.fnmatch_lines([f"hypothesis plugin registered: {not bench_run}"])
