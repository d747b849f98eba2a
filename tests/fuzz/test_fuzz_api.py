"""API fuzzing: hostile arguments to run_gemm, GemmShape, the collectives and load_topology.

Table-driven (each row: a call and what it must give) plus hypothesis (shape strings and
message sizes). Every case ends in success or in ``sim.NpuSimError`` within 10 s; the
rows of issue 13 also check the error's class and message.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from fuzz_guard import CASE_SECONDS, run_case
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import (
    BudgetError,
    GemmShape,
    InputError,
    NpuSimError,
    ShapeError,
    TopologyError,
    all_gather,
    allreduce,
    load_topology,
    reduce_scatter,
    run_gemm,
)
from sim.collectives import CollectiveError
from sim.limits import MEMORY_BUDGET_ENV, OPS_BUDGET_ENV

TOPO = load_topology()
REPO = Path(__file__).resolve().parents[2]
OK = "ok"
Expect = str | tuple[type[NpuSimError], tuple[str, ...]]
Case = tuple[str, Callable[[], object], Expect]


def _gemm(shape: object, variant: object = "double_buffer", **kw: object) -> Callable[[], object]:
    return lambda: run_gemm(shape, variant, TOPO, **kw)  # type: ignore[arg-type]


def _ar(
    nbytes: object, algorithm: object = "ring", topo: object = TOPO, **kw: object
) -> Callable[[], object]:
    return lambda: allreduce(topo, nbytes, algorithm, **kw)  # type: ignore[arg-type]


def _chips(**changes: object) -> Callable[[], object]:
    return lambda: allreduce(TOPO.replace_chips(**changes), 4096, "ring")


GEMM_CASES: list[Case] = [
    # shapes that must work, in every accepted form
    ("gemm_text", _gemm("64x128x64"), OK),
    ("gemm_text_spaces", _gemm(" 64 x 128 x 64 "), OK),
    ("gemm_text_upper_x", _gemm("64X128X64"), OK),
    ("gemm_tuple", _gemm((64, 128, 64)), OK),
    ("gemm_list", _gemm([64, 128, 64]), OK),
    ("gemm_np_int64_tuple", _gemm((np.int64(64), np.int64(128), np.int64(64))), OK),
    ("gemm_np_int32_tuple", _gemm((np.int32(16), np.int32(32), np.int32(16))), OK),
    (
        "gemm_shape_np",
        lambda: run_gemm(GemmShape(np.int64(64), 128, 64), "load_ref", TOPO),  # type: ignore[arg-type]
        OK,
    ),
    ("gemm_1x1x1", _gemm("1x1x1"), OK),
    ("gemm_odd", _gemm("33x65x31", "resident"), OK),
    ("gemm_load_ref", _gemm("16x32x16", "load_ref"), OK),
    ("gemm_no_extrapolate", _gemm("64x64x64", extrapolate=False), OK),
    # issue 13: the API bullets
    ("gemm_superscript", _gemm("\u00b2x2x2"), (ShapeError, ("must look like MxKxN",))),
    ("gemm_superscript_mid", _gemm("2x\u00b3x2"), (ShapeError, ("MxKxN",))),
    ("gemm_arabic_digits", _gemm("\u0661\u0662x2x2"), (ShapeError, ("MxKxN",))),
    ("gemm_fullwidth", _gemm("\uff11\uff16x2x2"), (ShapeError, ("MxKxN",))),
    (
        "gemm_100000_cubed",
        _gemm("100000x100000x100000"),
        (BudgetError, ("GiB", MEMORY_BUDGET_ENV, "before allocating")),
    ),
    ("gemm_dim_1e22_tuple", _gemm((10**22, 2, 2)), (BudgetError, ("GEMM", MEMORY_BUDGET_ENV))),
    ("gemm_dim_1e22_text", _gemm("10000000000000000000000x2x2"), (ShapeError, ("MxKxN",))),
    ("gemm_dim_1e22_float", _gemm((1e22, 2, 2)), (ShapeError, ("whole number",))),
    ("gemm_dim_huge_int", _gemm((10**5000, 2, 2)), (BudgetError, ("GEMM",))),
    (
        "gemm_no_extrapolate_huge",
        _gemm("4096x4096x4096", extrapolate=False),
        (BudgetError, (OPS_BUDGET_ENV,)),
    ),
    # malformed shapes
    ("gemm_empty", _gemm(""), (ShapeError, ())),
    ("gemm_x", _gemm("x"), (ShapeError, ())),
    ("gemm_two_dims", _gemm("2x2"), (ShapeError, ())),
    ("gemm_four_dims", _gemm("2x2x2x2"), (ShapeError, ())),
    ("gemm_zero", _gemm("0x4x4"), (ShapeError, ("at least 1",))),
    ("gemm_negative", _gemm("-1x2x2"), (ShapeError, ())),
    ("gemm_decimal", _gemm("1.5x2x2"), (ShapeError, ())),
    ("gemm_exponent", _gemm("1e3x2x2"), (ShapeError, ())),
    ("gemm_trailing_junk", _gemm("2x2x2 junk"), (ShapeError, ())),
    ("gemm_5000_digits", _gemm("9" * 5000 + "x2x2"), (ShapeError, ())),
    ("gemm_long_text", _gemm("x" * 100_000), (ShapeError, ())),
    ("gemm_nul", _gemm("2x2\x00x2"), (ShapeError, ())),
    ("gemm_none", _gemm(None), (ShapeError, ())),
    ("gemm_int", _gemm(64), (ShapeError, ())),
    ("gemm_float", _gemm(64.0), (ShapeError, ())),
    ("gemm_bytes", _gemm(b"64x64x64"), (ShapeError, ())),
    ("gemm_tuple_short", _gemm((64, 128)), (ShapeError, ())),
    ("gemm_tuple_long", _gemm((64, 128, 64, 1)), (ShapeError, ())),
    ("gemm_tuple_float", _gemm((64.0, 128, 64)), (ShapeError, ("whole number",))),
    ("gemm_tuple_bool", _gemm((True, 1, 1)), (ShapeError, ())),
    ("gemm_tuple_str", _gemm(("64", "128", "64")), (ShapeError, ())),
    ("gemm_tuple_zero", _gemm((0, 1, 1)), (ShapeError, ())),
    ("gemm_tuple_nested", _gemm(((64,), 128, 64)), (ShapeError, ())),
    ("gemm_dict", _gemm({"M": 1}), (ShapeError, ())),
    ("gemm_object", _gemm(object()), (ShapeError, ())),
    ("gemm_np_array", _gemm(np.array([64, 128, 64])), (ShapeError, ())),
    ("gemm_set", _gemm({1, 2, 3}), (ShapeError, ())),
    # variants, topology, flags
    ("gemm_variant_unknown", _gemm("64x64x64", "nosuch"), (ShapeError, ("choose one of",))),
    ("gemm_variant_none", _gemm("64x64x64", None), (ShapeError, ())),
    ("gemm_variant_int", _gemm("64x64x64", 3), (ShapeError, ())),
    ("gemm_variant_list", _gemm("64x64x64", ["load_ref"]), (ShapeError, ())),
    ("gemm_variant_empty", _gemm("64x64x64", ""), (ShapeError, ())),
    (
        "gemm_topo_none",
        lambda: run_gemm("64x64x64", "load_ref", None),
        (InputError, ("sim.Topology",)),
    ),  # type: ignore[arg-type]
    (
        "gemm_topo_str",
        lambda: run_gemm("64x64x64", "load_ref", "npu-1h"),
        (InputError, ("load_topology",)),
    ),  # type: ignore[arg-type]
    (
        "gemm_extrapolate_str",
        _gemm("64x64x64", extrapolate="yes"),
        (InputError, ("True or False",)),
    ),
    # resident streams like prefetch when not even two panels fit (ADR 0006): no error
    ("gemm_resident_streams_when_panels_do_not_fit", _gemm("32x1000000x32", "resident"), OK),
    # GemmShape itself
    ("shape_np_int", lambda: GemmShape(np.int64(3), 1, 1), OK),  # type: ignore[arg-type]
    ("shape_zero", lambda: GemmShape(0, 1, 1), (ShapeError, ())),
    ("shape_float", lambda: GemmShape(1.5, 1, 1), (ShapeError, ())),  # type: ignore[arg-type]
    ("shape_bool", lambda: GemmShape(True, 1, 1), (ShapeError, ())),
    ("shape_str", lambda: GemmShape("3", 1, 1), (ShapeError, ())),  # type: ignore[arg-type]
    ("shape_none", lambda: GemmShape(None, 1, 1), (ShapeError, ())),  # type: ignore[arg-type]
    ("parse_none", lambda: GemmShape.parse(None), (ShapeError, ())),  # type: ignore[arg-type]
    ("parse_int", lambda: GemmShape.parse(123), (ShapeError, ())),  # type: ignore[arg-type]
    ("parse_superscript", lambda: GemmShape.parse("\u00b2x2x2"), (ShapeError, ())),
]

COLLECTIVE_CASES: list[Case] = [
    ("ar_ring", _ar(4096), OK),
    ("ar_zero_bytes", _ar(0), OK),
    ("ar_one_element", _ar(2), OK),
    ("ar_direct", _ar(4096, "direct"), OK),
    ("ar_halving_doubling", _ar(4096, "halving_doubling"), OK),
    ("ar_double_binary_tree", _ar(4096, "double_binary_tree"), OK),
    ("ar_tree_renamed", _ar(4096, "tree"), (CollectiveError, ("double_binary_tree",))),
    ("ar_np_int64", _ar(np.int64(4096)), OK),
    ("ar_np_int32", _ar(np.int32(4096)), OK),
    ("ar_np_uint64", _ar(np.uint64(4096)), OK),
    ("ar_chunk_np", _ar(8192, chunk_bytes=np.int64(1024)), OK),
    ("ar_chunk_huge", _ar(8192, chunk_bytes=10**30), OK),
    ("rs_np", lambda: reduce_scatter(TOPO, np.int64(4096)), OK),
    ("ag_np", lambda: all_gather(TOPO, np.int64(4096)), OK),
    (
        "rs_chunk_float",
        lambda: reduce_scatter(TOPO, 4096, chunk_bytes=2.5),
        (InputError, ("chunk_bytes", "whole number")),
    ),  # type: ignore[arg-type]
    ("ag_size_float", lambda: all_gather(TOPO, 4096.0), (InputError, ("whole number",))),  # type: ignore[arg-type]
    # issue 13: the API bullets
    (
        "ar_chunk_2_5",
        _ar(4096, chunk_bytes=2.5),
        (InputError, ("chunk_bytes", "2.5", "whole number")),
    ),
    ("ar_1_tib", _ar(1 << 40), (BudgetError, ("1099511627776 bytes", "GiB", MEMORY_BUDGET_ENV))),
    ("ar_1_tib_direct", _ar(1 << 40, "direct"), (BudgetError, (MEMORY_BUDGET_ENV,))),
    ("ar_1000_chips_ring", _chips(count=1000), (BudgetError, ("1000 chips", "budget"))),
    ("ar_1000_chips_switch", _chips(count=1000, topology="switch"), (BudgetError, ("1000 chips",))),
    (
        "ar_1000_chips_torus",
        _chips(count=1000, topology="torus2d", torus_dims=(25, 40)),
        (BudgetError, ("1000 chips",)),
    ),
    (
        "ar_1000_chips_fully_connected",
        _chips(count=1000, topology="fully_connected"),
        (TopologyError, ("'chips.count'", "links")),
    ),
    ("ar_16000_chips_ring", _chips(count=16000), (BudgetError, ("16000 chips",))),
    ("ar_10_30_bytes", _ar(10**30), (BudgetError, ())),
    ("ar_10_5000_bytes", _ar(10**5000), (BudgetError, ())),
    # sizes and chunks
    ("ar_float_size", _ar(4096.0), (InputError, ("whole number",))),
    ("ar_half_size", _ar(2.5), (InputError, ())),
    ("ar_str_size", _ar("4096"), (InputError, ())),
    ("ar_none_size", _ar(None), (InputError, ())),
    ("ar_bool_size", _ar(True), (InputError, ())),
    ("ar_negative", _ar(-2), (InputError, ("at least 0",))),
    ("ar_odd_bytes", _ar(1001), (CollectiveError, ("whole number of 2-byte elements",))),
    ("ar_list_size", _ar([4096]), (InputError, ())),
    ("ar_np_float", _ar(np.float64(4096)), (InputError, ())),
    ("ar_np_array", _ar(np.array([4096])), (InputError, ())),
    ("ar_chunk_zero", _ar(4096, chunk_bytes=0), (InputError, ("at least 1",))),
    ("ar_chunk_negative", _ar(4096, chunk_bytes=-1), (InputError, ())),
    ("ar_chunk_str", _ar(4096, chunk_bytes="1k"), (InputError, ())),
    ("ar_chunk_bool", _ar(4096, chunk_bytes=True), (InputError, ())),
    (
        "ar_chunk_one_byte",
        _ar(4096, chunk_bytes=1),
        (CollectiveError, ("smaller than one element",)),
    ),
    # algorithms and topologies
    ("ar_alg_none", _ar(4096, None), (InputError, ("string",))),
    ("ar_alg_int", _ar(4096, 3), (InputError, ())),
    ("ar_alg_list", _ar(4096, ["ring"]), (InputError, ())),
    ("ar_alg_unknown", _ar(4096, "butterfly"), (CollectiveError, ("unknown algorithm",))),
    (
        "ar_alg_torus_on_ring",
        _ar(4096, "torus2d"),
        (CollectiveError, ("needs chips.topology torus2d",)),
    ),
    ("ar_topo_none", _ar(4096, topo=None), (InputError, ("sim.Topology",))),
    ("ar_topo_str", _ar(4096, topo="npu-1h"), (InputError, ())),
    # replace_chips with hostile values
    ("chips_np_count", _chips(count=np.int64(4)), OK),
    ("chips_one", _chips(count=1), OK),
    ("chips_float_count", _chips(count=2.5), (TopologyError, ("'chips.count'", "integer"))),
    ("chips_str_count", _chips(count="8"), (TopologyError, ())),
    ("chips_huge_count", _chips(count=10**5000), (TopologyError, ("digits",))),
    ("chips_dims_scalar", _chips(torus_dims=5), (TopologyError, ("'chips.torus_dims'",))),
    ("chips_dims_short", _chips(torus_dims=(2,)), (TopologyError, ())),
    (
        "chips_dims_mismatch",
        _chips(topology="torus2d", torus_dims=(3, 3)),
        (TopologyError, ("rows x cols",)),
    ),
    ("chips_mesh", _chips(topology="mesh"), (TopologyError, ("one of",))),
    ("chips_topology_list", _chips(topology=["ring"]), (TopologyError, ())),
    ("chips_nan_bw", _chips(link_bw_gbs=float("nan")), (TopologyError, ("finite",))),
    ("chips_huge_bw", _chips(link_bw_gbs=10**400), (TopologyError, ("too large",))),
    ("chips_tiny_bw", _chips(link_bw_gbs=1e-12), (TopologyError, ("at least",))),
    ("chips_unknown_key", _chips(nosuch=1), (TopologyError, ("unknown key",))),
]

LOAD_CASES: list[Case] = [
    ("load_name", lambda: load_topology("npu-1h"), OK),
    (
        "load_path",
        lambda: load_topology(Path(__file__).parents[2] / "sim/topologies/npu-1h.yaml"),
        OK,
    ),
    ("load_tmp_dir", lambda: load_topology("/tmp"), (TopologyError, ("/tmp: is a directory",))),
    (
        "load_tmp_dir_path",
        lambda: load_topology(Path("/tmp")),
        (TopologyError, ("is a directory",)),
    ),
    ("load_dot", lambda: load_topology("."), (TopologyError, ("is a directory",))),
    (
        "load_missing",
        lambda: load_topology("/nonexistent/x.yaml"),
        (TopologyError, ("no such topology file",)),
    ),
    ("load_unknown_name", lambda: load_topology("npu-9z"), (TopologyError, ("Known topologies",))),
    ("load_none", lambda: load_topology(None), (TopologyError, ("shipped name",))),  # type: ignore[arg-type]
    ("load_int", lambda: load_topology(42), (TopologyError, ())),  # type: ignore[arg-type]
    ("load_empty", lambda: load_topology(""), (TopologyError, ())),
    ("load_nul", lambda: load_topology("bad\x00name"), (TopologyError, ("not a valid path",))),
    ("load_long_name", lambda: load_topology("a" * 5000), (TopologyError, ())),
    ("load_long_path", lambda: load_topology("/tmp/" + "a" * 5000 + ".yaml"), (TopologyError, ())),
    (  # a device is never read (ADR 0019), even one that would read as an empty file
        "load_dev_null",
        lambda: load_topology("/dev/null"),
        (TopologyError, ("/dev/null", "character device", "not a regular file")),
    ),
]

CASES = GEMM_CASES + COLLECTIVE_CASES + LOAD_CASES


def test_api_table_has_at_least_100_inputs() -> None:
    """The table is as large as the issue asks (the count is quoted in the closing note)."""
    counts = f"{len(GEMM_CASES)} GEMM, {len(COLLECTIVE_CASES)} collective, {len(LOAD_CASES)} load"
    print(f"API table: {len(CASES)} inputs ({counts})")
    assert len(CASES) >= 100
    assert len({name for name, _, _ in CASES}) == len(CASES)


@pytest.mark.parametrize(("name", "call", "expect"), CASES, ids=[c[0] for c in CASES])
def test_api_input(name: str, call: Callable[[], object], expect: Expect) -> None:
    """Success where the table says so, else the project error with the promised words."""
    out = run_case(call)
    assert out.seconds < CASE_SECONDS
    if expect == OK:
        assert out.error is None, f"{name}: {out.error}"
        return
    kind, needles = expect
    assert isinstance(out.error, kind), f"{name}: got {out.error!r}, expected {kind.__name__}"
    msg = str(out.error)
    assert len(msg) <= 1000, msg[:300]
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"


_PART = st.text(alphabet="0123456789\u00b2\u0661\uff11 -+.e\n", max_size=5)


@settings(max_examples=120, derandomize=True, deadline=None)
@given(parts=st.lists(_PART, min_size=2, max_size=4), upper=st.booleans())
def test_random_shape_strings(parts: list[str], upper: bool) -> None:
    """Shape-like strings (odd digits, signs, spaces): a run or a project error, nothing else."""
    text = ("X" if upper else "x").join(parts)
    run_case(lambda: run_gemm(text, "load_ref", TOPO))


@settings(max_examples=80, derandomize=True, deadline=None)
@given(
    nbytes=st.one_of(st.integers(min_value=-10, max_value=1 << 44), st.floats(), st.none()),
    chunk=st.one_of(st.none(), st.integers(min_value=-4, max_value=1 << 62), st.floats()),
    algorithm=st.sampled_from(["ring", "direct", "halving_doubling", "tree", "torus2d", "x"]),
)
def test_random_collective_arguments(nbytes: object, chunk: object, algorithm: str) -> None:
    """Random sizes, chunks and algorithms: a run, or a project error, never a raw exception."""
    run_case(lambda: allreduce(TOPO, nbytes, algorithm, chunk_bytes=chunk))  # type: ignore[arg-type]


def test_npubench_topology_directory_is_named_as_a_directory() -> None:
    """``NPUBENCH_TOPOLOGY=/tmp``: the bench's topology load says "is a directory"."""
    env = {**os.environ, "NPUBENCH_TOPOLOGY": "/tmp"}
    code = (
        "import os; from sim import load_topology; load_topology(os.environ['NPUBENCH_TOPOLOGY'])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0
    assert "TopologyError: /tmp: is a directory" in proc.stderr
    assert "/tmp.yaml" not in proc.stderr


def test_budget_is_raised_by_its_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variable a BudgetError names really moves the budget (and a bad value is refused)."""
    monkeypatch.setenv(MEMORY_BUDGET_ENV, "1")
    with pytest.raises(BudgetError, match=MEMORY_BUDGET_ENV):
        run_gemm("4096x4096x4096", "double_buffer", TOPO)
    monkeypatch.setenv(MEMORY_BUDGET_ENV, "lots")
    with pytest.raises(BudgetError, match="must be a positive integer"):
        run_gemm("64x64x64", "double_buffer", TOPO)
    monkeypatch.setenv(OPS_BUDGET_ENV, str(10**12))
    monkeypatch.setenv(MEMORY_BUDGET_ENV, str(1 << 30))
    from sim.collectives.budget import check_collective

    assert check_collective(TOPO.replace_chips(count=1000), 4096, "ring", None) == (4096, None)


def test_cli_skips_an_over_budget_shape(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m sim gemm 100000x100000x100000`` prints the budget refusal, no traceback."""
    from sim.__main__ import main

    assert main(["gemm", "100000x100000x100000", "64x64x64", "--variant", "load_ref"]) == 0
    out = capsys.readouterr().out
    assert "skipped: GEMM 100000x100000x100000: needs about" in out
    assert MEMORY_BUDGET_ENV in out
