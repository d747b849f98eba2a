"""`python -m sim gemm`: the library demo prints a table and rejects bad input clearly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sim.__main__ import main


def test_prints_one_row_per_shape_and_variant(capsys: pytest.CaptureFixture[str]) -> None:
    """Two shapes x one variant give a header and two rows with the topology fingerprint."""
    assert main(["gemm", "32x64x32", "64x128x64", "--variant", "load_ref"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("topology npu-1h:")
    assert [line.split()[:2] for line in out[2:]] == [
        ["32x64x32", "load_ref"],
        ["64x128x64", "load_ref"],
    ]


def test_bad_shape_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """A malformed shape exits with status 2 and says what a shape looks like."""
    with pytest.raises(SystemExit) as info:
        main(["gemm", "12x3"])
    assert info.value.code == 2
    assert "must look like MxKxN" in capsys.readouterr().err


def _help(*argv: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", [(), ("gemm",), ("scalesim",), ("calibrate",)])
def test_help_is_plain_text(command: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m sim [CMD] --help`` shows no reStructuredText markup (double backticks,
    roles, ``::`` literal-block markers): it is read in a terminal, not rendered."""
    text = _help(*command, capsys=capsys)
    assert "``" not in text and ":mod:" not in text and ":func:" not in text, text
    assert not any(line.rstrip().endswith("::") for line in text.splitlines()), text


def test_help_names_every_command_the_readme_gives(capsys: pytest.CaptureFixture[str]) -> None:
    """Every ``python -m sim CMD`` of the README is a command the help describes."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    commands = set(re.findall(r"python -m sim (\w+)", readme))
    assert commands == {"gemm", "scalesim", "calibrate"}
    text = _help(capsys=capsys)
    for command in commands:
        assert f"python -m sim {command}" in " ".join(text.split()), command
