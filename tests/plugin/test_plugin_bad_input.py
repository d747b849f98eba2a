"""Bad input gets one clear message, and no traceback from the plugin's internals."""

from __future__ import annotations

import json

import pytest
from toyproject import Project, assert_no_plugin_traceback, output

BAD_BENCH = """\
from pytest_npubench import Bench, Metric, Result

BENCH = Bench(
    name="bad",
    run=lambda p: Result(metrics={{"t": 1.0}}),
    metrics={{"t": Metric(unit="ns", direction="lower")}},
    fingerprint=lambda: "hw",
    {args}
)
"""


def test_syntax_error_in_a_bench_module_names_the_file(project: Project) -> None:
    """A bench module that does not parse stops the run with the file and line."""
    project.bench()
    project.write("benches/broken.py", "BENCH = Bench(\n")
    result = project.run("--npubench", "toy")
    assert result.ret == 4
    text = output(result)
    assert "ERROR: cannot import bench module benches/broken.py:" in text
    assert 'File "' in text and 'broken.py", line 1' in text
    assert "SyntaxError: '(' was never closed" in text
    assert_no_plugin_traceback(result)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("sweep={}", "bench 'bad': the sweep is empty"),
        (
            'sweep={"a": [1, 11], "b": [1, 11]}, config_id=lambda p: str(p["a"] + p["b"])',
            "bench 'bad': config ids must be unique, but '12' is the id of both",
        ),
    ],
    ids=["empty-sweep", "duplicate-ids"],
)
def test_bad_bench_definition_names_the_file_and_the_rule(
    project: Project, args: str, message: str
) -> None:
    """A Bench(...) that fails validation is reported as an import error of its module, with
    the line of the bench and the rule it broke."""
    project.write("benches/bad.py", BAD_BENCH.format(args=args))
    result = project.run("--npubench", "bad")
    assert result.ret == 4
    text = output(result)
    assert "ERROR: cannot import bench module benches/bad.py:" in text
    assert 'bad.py", line 3, in <module>' in text
    assert message in text
    assert_no_plugin_traceback(result)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        (
            {"drop": ["throughput"]},
            "bench 'toy', config '16-fast': metric 'throughput' is declared in metrics= but "
            "missing from the Result (returned: latency_ns, util)",
        ),
        (
            {"override": {"latency_ns": "fast"}},
            "bench 'toy', config '16-fast': metric 'latency_ns' is 'fast' (str); metric values "
            "must be finite real numbers (int or float; not bool, NaN or inf)",
        ),
        (
            {"override": {"latency_ns": float("nan")}},
            "bench 'toy', config '16-fast': metric 'latency_ns' is nan (float)*",
        ),
        (
            {"override": {"power_w": 3.0}},
            "bench 'toy', config '16-fast': metric 'power_w' is in the Result but not declared*",
        ),
    ],
    ids=["missing", "non-numeric", "nan", "undeclared"],
)
def test_invalid_result_fails_its_item_with_one_line(
    project: Project, knobs: dict[str, object], message: str
) -> None:
    """A run that returns bad metrics fails its item with one line naming bench, config and
    metric."""
    project.bench()
    project.write("benches/toy_knobs.json", json.dumps(knobs))
    result = project.run("--npubench", "toy", "-k", "16-fast")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["_*toy[[]16-fast[]]*_", message.replace("[", "[[]")])
    assert_no_plugin_traceback(result)


def test_corrupt_baseline_is_one_error_and_never_replaced_even_by_regen(
    project: Project,
) -> None:
    """A hand-broken baseline gives one collection error naming the file and the fix; neither a
    normal run nor --regen-baselines touches it (a regen never replaces a file it cannot read);
    once moved away, a regen re-measures every config."""
    project.bench()
    broken = '{"schema": 1, "configs": {\n  "16-fast": \n'
    project.write("baselines/toy.json", broken)
    for args in (["--npubench", "toy"], ["--npubench", "toy", "--regen-baselines"]):
        result = project.run(*args)
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines(
            [
                "bench 'toy': baselines/toy.json is not valid JSON (Expecting value at line 3 "
                "column 1); a regen never replaces a file it cannot read; fix that by hand, or "
                "move the file away (mv baselines/toy.json baselines/toy.json.broken) and "
                "re-measure every config with: pytest --npubench toy --regen-baselines"
            ]
        )
        assert project.read("baselines/toy.json") == broken
        assert_no_plugin_traceback(result)
    (project.path / "baselines/toy.json").rename(project.path / "baselines/toy.json.broken")
    project.run("--npubench", "toy", "--regen-baselines").assert_outcomes(passed=4)
    assert len(project.baseline()["configs"]) == 4


def test_baseline_from_a_newer_schema_is_refused_even_by_regen(project: Project) -> None:
    """A file written by a newer pytest-npubench is an error telling to upgrade, and regen does
    not downgrade it."""
    project.bench()
    newer = json.dumps({"schema": 99, "configs": {}, "fingerprint": "toy-hw:1"})
    project.write("baselines/toy.json", newer)
    for args in (["--npubench", "toy"], ["--npubench", "toy", "--regen-baselines"]):
        result = project.run(*args)
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines(
            [
                "bench 'toy': baselines/toy.json has schema version 99, but this pytest-npubench"
                " reads schema 1 at most; upgrade pytest-npubench"
            ]
        )
    assert project.read("baselines/toy.json") == newer


def test_two_benches_with_one_name_is_a_usage_error(project: Project) -> None:
    """Bench names key baseline files, so a duplicate name is refused, naming both files."""
    project.bench("toy")
    project.write("benches/again.py", project.read("benches/toy.py"))
    result = project.run("--npubench", "toy")
    assert result.ret == 4
    assert (
        "two benches are named 'toy' (benches/again.py and benches/toy.py); bench names must be"
        " unique" in output(result)
    )


def test_no_benches_at_all_is_a_usage_error(project: Project) -> None:
    """--npubench all with nothing to run says where it looked."""
    result = project.run("--npubench", "all")
    assert result.ret == 4
    assert "no benches found: no module-level pytest_npubench.Bench in benches" in output(result)
