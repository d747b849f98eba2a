"""results.json is written by :mod:`pytest_npubench.indented`: the bytes ``json.dumps(indent=2,
allow_nan=False)`` writes, by another road (the C encoder per level of scalars)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pytest_npubench import artifacts, indented
from pytest_npubench.bench import Bench, Metric, Result
from pytest_npubench.compare import Comparison, ConfigResult

ROOT = Path(__file__).resolve().parents[2]


def _same(value: Any, indent: int = 2) -> None:
    assert indented.dumps(value, indent) == json.dumps(value, indent=indent, allow_nan=False)


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "baselines").glob("*.json")))
def test_the_committed_baselines_are_written_as_json_writes_them(name: str) -> None:
    """Every value the benches measure, as committed (a few thousand configs, ~100k numbers)."""
    _same(json.loads((ROOT / "baselines" / name).read_text(encoding="utf-8")))


HOSTILE: list[Any] = [
    {},
    [],
    (),
    "",
    0,
    -0.0,
    None,
    True,
    'naïve \u2028 \x00 " \\ / \n \ud83d',
    {"a": {}, "b": [], "c": [{}], "d": [[], [[]]], "e": {"f": {"g": {}}}},
    {"x": [1, 2.5, -0.0, 1e300, 5e-324, 2**70, -(2**63), True, False, None, "s"]},
    [{"a": 1}, [1, [2, [3, {"b": (4, 5)}]]], ("t", ["u"])],
    {"ключ": "значение", "emoji \U0001f600": ["\U0001f600"]},
    {3: "int key", 2.5: "float key", True: "bool key", None: "none key"},
    {"nested": {1: [1], 2.5: {"k": 1}, False: {}}},
    {"flat": {1: 1, 2.0: 2, None: 3}},
    [[1.0, 0.1, 1 / 3, 123456789.123456789, 1e-7, 1e16, float(2**53 + 1)]],
]


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("indent", [1, 2, 4])
def test_hostile_values_are_written_as_json_writes_them(value: Any, indent: int) -> None:
    _same(value, indent)


@pytest.mark.parametrize("bad", [math.nan, [1.0, math.inf], {"a": {"b": -math.inf}}])
def test_a_number_json_cannot_hold_raises_as_json_does(bad: Any) -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        indented.dumps(bad)


def test_an_object_json_cannot_hold_raises_as_json_does() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        indented.dumps({"a": [1, {"b": object()}]})


def test_a_circular_value_raises_as_json_does() -> None:
    loop: list[Any] = [1]
    loop.append([loop])
    with pytest.raises(ValueError, match="Circular reference"):
        indented.dumps(loop)


def test_results_json_holds_the_bytes_json_dumps_writes_for_its_data() -> None:
    """The document itself: a bench with measured, reused and failed configs."""
    bench = Bench(
        name="toy",
        sweep={"n": [1, 2, 10], "mode": ["a", "b"]},
        run=lambda p: Result({"t_ns": 1.0}),
        metrics={"t_ns": Metric("ns", "lower", 0.01), "bytes": Metric("B", "lower", gate=False)},
        fingerprint=lambda: "fp",
    )
    results = {}
    for k, config in enumerate(bench.configs):
        metrics = {"t_ns": 1.5 * k + 0.1, "bytes": 2**40 + k}
        results[config.config_id] = ConfigResult(
            bench="toy",
            config_id=config.config_id,
            params=config.params,
            metrics=metrics if k != 3 else {},
            baseline=None if k == 1 else {"t_ns": 1.5 * k, "bytes": 2**40},
            verdict=("pass", "new", "regression", "error", "reused-baseline", "pass")[k],
            source="baseline" if k == 4 else "run",
            message="boom ü" if k == 3 else "",
            comparisons={"t_ns": Comparison("pass", 0.0 if k else None)},
        )
    art = artifacts.BenchArtifacts(
        bench, results, "fp", "baselines/toy.json", [Path("toy/a.png")], ["note"], {"k": 1}
    )
    text = artifacts.results_document([art], {"command": "pytest", "versions": {"x": None}})
    assert text == json.dumps(json.loads(text), indent=2, allow_nan=False) + "\n"
    first = json.loads(text)["benches"]["toy"]["configs"][bench.configs[0].config_id]
    assert first["metrics"]["bytes"] == 2**40
