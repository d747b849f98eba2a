"""Topology fuzzing: every mutant of npu-1h.yaml loads and runs, or is refused clearly.

A mutant that loads is exercised with a small GEMM and a small allreduce. Every case ends
in success or in ``sim.NpuSimError`` within 10 s; a refusal at load names the file and
stays short (the value is quoted truncated, never in full).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzz_guard import CASE_SECONDS, Outcome, run_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from topology_mutants import BASE_TEXT, LEAVES, catalogue

from sim import TopologyError, allreduce, load_topology, run_gemm

CATALOGUE = catalogue()
MIN_MUTANTS = 500
MAX_MESSAGE_CHARS = 1000


def exercise(path: Path) -> str:
    """Load the topology; if it loads, run a small GEMM and a small allreduce on it."""
    topo = load_topology(path)
    run_gemm("64x128x64", "double_buffer", topo)
    allreduce(topo, 1024 * topo.bpe, "ring")
    return topo.fingerprint


def check(path: Path, out: Outcome) -> None:
    assert out.seconds < CASE_SECONDS
    if out.error is None:
        return
    msg = str(out.error)
    assert len(msg) <= MAX_MESSAGE_CHARS, f"message of {len(msg)} chars: {msg[:200]}..."
    if isinstance(out.error, TopologyError):
        assert str(path) in msg, msg


def test_catalogue_has_at_least_500_mutants() -> None:
    """The table-driven catalogue is as large as the issue asks (the count is quoted)."""
    print(f"topology mutant catalogue: {len(CATALOGUE)} mutants of {len(LEAVES)} keys")
    assert len(CATALOGUE) >= MIN_MUTANTS


@pytest.mark.parametrize(("mutant_id", "raw"), CATALOGUE, ids=[i for i, _ in CATALOGUE])
def test_topology_mutant_runs_or_is_refused(tmp_path: Path, mutant_id: str, raw: bytes) -> None:
    """Success or a project error naming the file, within the time limit; nothing else."""
    path = tmp_path / "mutant.yaml"
    path.write_bytes(raw)
    check(path, run_case(lambda: exercise(path)))


# --- the hostile inputs of issue 13, each with the message it must give ----------------------
ISSUE_CASES = {
    "pe.stage_ns=nan": ["'pe.stage_ns'", "nan", "finite"],
    "hbm.latency_ns=inf": ["'hbm.latency_ns'", "inf", "finite"],
    "fetch.fetch_gbs=nan": ["'fetch.fetch_gbs'", "finite"],
    "chips.link_bw_gbs=inf": ["'chips.link_bw_gbs'", "finite"],
    "pe.stage_ns=e16": ["'pe.stage_ns'", "at most"],
    "hbm.latency_ns=e30": ["'hbm.latency_ns'", "at most"],
    "fetch.fetch_gbs=tiny": ["'fetch.fetch_gbs'", "at least"],
    "dma.engines=int_1e6": ["'dma.engines'", "at most"],
    "dma.engines=int_10_30": ["'dma.engines'", "at most"],
    "hbm.num_pcs=int_1e8": ["'hbm.num_pcs'", "at most"],
    "chips.count=int_1e6": ["'chips.count'", "at most"],
    "pe.stage_ns=alias_bomb": ["'pe.stage_ns'", "must be a number"],
    "chips.topology=alias_bomb": ["'chips.topology'", "must be one of"],
    "pe.stage_ns=sexagesimal": ["'pe.stage_ns'", "'1:30'", "sexagesimal"],
    "dma.engines=sexagesimal": ["'dma.engines'", "'1:30'", "sexagesimal"],
    "utf16": ["UTF-16", "UTF-8"],
    "latin1": ["not UTF-8", "byte 0x"],
    "random_bytes_0": ["UTF-8"],
    "nul_byte": ["binary", "NUL"],
    "deep_nesting_100k": ["nested too deeply"],
    "pe.stage_ns=int_5000_digits": ["'pe.stage_ns'", "digits"],
}


@pytest.mark.parametrize(("mutant_id", "needles"), sorted(ISSUE_CASES.items()))
def test_issue_inputs_are_refused_with_a_clear_message(
    tmp_path: Path, mutant_id: str, needles: list[str]
) -> None:
    """NaN/inf, int64-ps overflow, hang-sized counts, bombs, 1:30, bad encodings: refused."""
    raw = dict(CATALOGUE)[mutant_id]
    path = tmp_path / "mutant.yaml"
    path.write_bytes(raw)
    out = run_case(lambda: load_topology(path), seconds=5)
    assert isinstance(out.error, TopologyError), f"{mutant_id} was accepted"
    msg = str(out.error)
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"
    assert "Fix" in msg or "fix" in msg or "save" in msg or "use" in msg, msg


def test_bad_encodings_still_accept_utf8_bom_and_crlf(tmp_path: Path) -> None:
    """A UTF-8 BOM, CRLF line ends and accented UTF-8 comments are fine: same fingerprint."""
    base = load_topology().fingerprint
    for mutant_id in ("utf8_bom", "crlf", "utf8_accented_ok"):
        path = tmp_path / f"{mutant_id}.yaml"
        path.write_bytes(dict(CATALOGUE)[mutant_id])
        assert load_topology(path).fingerprint == base


# --- hypothesis: random values at random keys, written by yaml.safe_dump ---------------------
_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=1, max_value=64),
    st.text(max_size=12),
    st.booleans(),
    st.none(),
    st.lists(st.integers(min_value=-3, max_value=40), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
_KEYS = [key for _, key in LEAVES]


@settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(changes=st.lists(st.tuples(st.sampled_from(_KEYS), _VALUES), min_size=1, max_size=3))
def test_random_values_at_random_keys(tmp_path: Path, changes: list[tuple[str, Any]]) -> None:
    """Up to three keys set to random YAML values: runs or a project error, in time."""
    data = yaml.safe_load(BASE_TEXT)
    for key, value in changes:
        section, _, leaf = key.rpartition(".")
        (data[section] if section else data)[leaf] = value
    path = tmp_path / "hypo.yaml"
    path.write_text(yaml.safe_dump(data))
    out = run_case(lambda: exercise(path))
    check(path, out)
    numbers = [v for _, v in changes if isinstance(v, float)]
    if any(math.isnan(v) or math.isinf(v) for v in numbers):
        assert out.error is not None


def test_clock_ghz_is_used_so_it_may_change_the_fingerprint(tmp_path: Path) -> None:
    """clock_ghz is checked against pe.stage_ns (whole cycles), as the YAML comment says."""
    path = tmp_path / "clock.yaml"
    path.write_text(BASE_TEXT.replace("clock_ghz: 1.0 ", "clock_ghz: 3.0 "))
    assert load_topology(path).fingerprint != load_topology().fingerprint  # 48 cycles: fine
    path.write_text(BASE_TEXT.replace("clock_ghz: 1.0 ", "clock_ghz: 0.3 "))
    with pytest.raises(TopologyError, match=r"'clock_ghz' = 0\.3: pe\.stage_ns .* clock cycles"):
        load_topology(path)
    assert "pe.stage_ns must be a whole number of cycles" in BASE_TEXT


def test_sexagesimal_is_never_ninety(tmp_path: Path) -> None:
    """YAML 1.1 reads 1:30 as 90; here it is text, so a ns key refuses it (and so does !!int)."""
    path = tmp_path / "sexa.yaml"
    for token in ("1:30", "90"):
        path.write_text(BASE_TEXT.replace("latency_ns: 120 ", f"latency_ns: {token} ", 1))
        if token == "90":
            assert load_topology(path).hbm.latency_ns == 90
        else:
            with pytest.raises(TopologyError, match="sexagesimal"):
                load_topology(path)
