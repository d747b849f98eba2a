"""Fuzz: hostile command lines (issue 13). Every option value and combination below ends as a
pass, a gate failure or a usage error within 10 s: never an INTERNALERROR, never a traceback
through the plugin, never a changed baseline unless --regen-baselines was given."""

from __future__ import annotations

import itertools

import pytest
from fuzz_guard import time_limit
from toyproject import Project, assert_no_plugin_traceback

NAMES = ["", ",", "all,", ",toy", "toy,,toy", "a b", "../toy", "toy;rm", "x" * 300, "ジェム",
         "toy,nosuch", "all,nosuch", "ALL", "toy.json", "-", "--", "toy\t"]  # fmt: skip
LIMITS = ["0", "-1", "1", "1e3", "2" * 40, "", "nan", " 5", "0x10"]
ARTIFACTS = ["", " ", "out", "out/deep/er", "benches/toy.py", "/dev/null", "a" * 300, "~nobody"]
KEYWORDS = ["[", "not", "toy[", "16 and", "(", "x" * 500, "fast or slow", "toy[16-fast]"]
EXTRAS: list[list[str]] = [[], ["--regen-baselines"], ["--npubench-prune"], ["-q"], ["-v"]]

ALLOWED = {
    pytest.ExitCode.OK,
    pytest.ExitCode.TESTS_FAILED,
    pytest.ExitCode.INTERRUPTED,
    pytest.ExitCode.USAGE_ERROR,
    pytest.ExitCode.NO_TESTS_COLLECTED,
}


def command_lines() -> list[list[str]]:
    """At least 100 command lines: every hostile value of each option, some with extras."""
    lines: list[list[str]] = []
    lines += [["--npubench", n] for n in NAMES]
    lines += [["--npubench", f"{n}x"] for n in NAMES[:6]]
    lines += [
        ["--npubench", "toy", "--npubench-trace", "--npubench-trace-limit", v] for v in LIMITS
    ]
    lines += [["--npubench", "toy", f"--npubench-artifacts={v}"] for v in ARTIFACTS]
    lines += [["--npubench", "toy", "-k", k] for k in KEYWORDS]
    for value, extra in itertools.product(["toy", "all", "nosuch"], EXTRAS):
        lines.append(["--npubench", value, *extra])
    for extra in EXTRAS:
        lines.append(extra)  # no --npubench: plain test collection of the project
    lines += [["--npubench", "toy", "--regen-baselines", "-k", k] for k in KEYWORDS]
    lines += [["--regen-baselines", "--npubench-prune", "-k", k] for k in KEYWORDS[:4]]
    lines += [["--npubench", n, "--regen-baselines"] for n in NAMES]
    lines += [["--npubench-trace-limit", v] for v in LIMITS]  # an option without --npubench
    return lines


COMMAND_LINES = command_lines()


def test_the_catalogue_has_at_least_100_command_lines() -> None:
    """As many as the issue asks, each different."""
    assert len(COMMAND_LINES) >= 100, len(COMMAND_LINES)
    assert len({tuple(c) for c in COMMAND_LINES}) == len(COMMAND_LINES)


def test_every_command_line_ends_cleanly(project: Project) -> None:
    """Each command line runs in-process on the toy project within 10 s and exits with a
    verdict or a usage error; the baseline changes only under --regen-baselines."""
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    baseline = project.path / "baselines" / "toy.json"
    exits: dict[str, int] = {}
    for args in COMMAND_LINES:
        before = baseline.read_bytes()
        with time_limit():
            result = project.run(*args)
        assert result.ret in ALLOWED, (args, result.ret)
        assert_no_plugin_traceback(result)
        if "--regen-baselines" not in args:
            assert baseline.read_bytes() == before, args
        exits[pytest.ExitCode(result.ret).name] = exits.get(pytest.ExitCode(result.ret).name, 0) + 1
    assert exits.get("USAGE_ERROR", 0) >= 20, exits  # the hostile values are refused, not run
