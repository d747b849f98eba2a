"""`python -m sim gemm`: the library demo prints a table and rejects bad input clearly."""

from __future__ import annotations

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
