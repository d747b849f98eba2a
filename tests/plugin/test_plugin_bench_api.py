"""The Bench API on its own: sweep expansion, ids, and eager validation of bad definitions."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from pytest_npubench import Bench, Metric, Result
from pytest_npubench.bench import ResultError

METRICS = {"latency_ns": Metric(unit="ns", direction="lower", tolerance=0.001)}


def make(**kwargs: Any) -> Bench:
    args: dict[str, Any] = {
        "name": "gemm",
        "sweep": {"shape": [(16, 32, 16), (32, 64, 32)], "variant": ["load_ref", "resident"]},
        "run": lambda p: Result(metrics={"latency_ns": 1.0}),
        "metrics": METRICS,
        "fingerprint": lambda: "hw:1",
    }
    args.update(kwargs)
    return Bench(**args)


def test_sweep_is_the_cartesian_product_in_dict_order() -> None:
    """Configs are the product of the sweep lists, first parameter varying slowest."""
    bench = make(config_id=lambda p: "x".join(map(str, p["shape"])) + "-" + p["variant"])
    assert [c.config_id for c in bench.configs] == [
        "16x32x16-load_ref",
        "16x32x16-resident",
        "32x64x32-load_ref",
        "32x64x32-resident",
    ]
    assert bench.configs[0].params == {"shape": (16, 32, 16), "variant": "load_ref"}


def test_default_config_id_joins_str_of_values() -> None:
    """Without config_id=, the id is '-'.join(str(v) for v in params.values())."""
    bench = make(sweep={"size": [1024, 4096], "algo": ["ring"]})
    assert [c.config_id for c in bench.configs] == ["1024-ring", "4096-ring"]


def test_exclude_and_regen_only_predicates() -> None:
    """exclude= drops points of the product; regen_only= flags the heavy ones."""
    bench = make(
        sweep={"size": [1, 2, 3]},
        exclude=lambda p: p["size"] == 2,
        regen_only=lambda p: p["size"] == 3,
    )
    assert [(c.config_id, c.regen_only) for c in bench.configs] == [("1", False), ("3", True)]
    assert bench.has_config("3") and not bench.has_config("2")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sweep": {}}, "the sweep is empty"),
        ({"sweep": {"size": []}}, "sweep parameter 'size' has no values"),
        ({"sweep": {"size": "abc"}}, "sweep parameter 'size' must be a list of values"),
        (
            {"sweep": {"a": [1, 11], "b": [1, 11]}, "config_id": lambda p: str(p["a"] + p["b"])},
            "config ids must be unique, but '12' is the id of both",
        ),
        ({"sweep": {"a": [1]}, "exclude": lambda p: True}, "exclude= removes every config"),
        ({"name": "all"}, "reserved"),
        ({"name": "no spaces"}, "Bench name 'no spaces' is invalid"),
        ({"metrics": {}}, "must declare at least one Metric"),
        ({"summary_metrics": ["nope"]}, "summary metric 'nope' is not declared"),
        ({"config_id": lambda p: ""}, "a config id is a non-empty one-line string"),
    ],
)
def test_bad_bench_definitions_fail_when_built(kwargs: dict[str, Any], message: str) -> None:
    """Each bad definition raises at construction with a message that names the problem."""
    with pytest.raises((ValueError, TypeError), match=message.replace("(", r"\(")):
        make(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"direction": "down"}, "use 'lower' or 'higher'"),
        ({"tolerance": -0.1}, "relative tolerance >= 0"),
        ({"tolerance": math.nan}, "relative tolerance >= 0"),
    ],
)
def test_bad_metric_specs_fail_when_built(kwargs: dict[str, Any], message: str) -> None:
    """A Metric with a bad direction or tolerance raises at construction."""
    with pytest.raises(ValueError, match=message):
        Metric(**{"unit": "ns", "direction": "lower", **kwargs})


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ({}, "metric 'latency_ns' is declared in metrics= but missing from the Result"),
        ({"latency_ns": 1.0, "extra": 2.0}, "metric 'extra' is in the Result but not declared"),
        ({"latency_ns": "fast"}, "metric 'latency_ns' is 'fast' \\(str\\)"),
        ({"latency_ns": True}, "metric 'latency_ns' is True \\(bool\\)"),
        ({"latency_ns": math.nan}, "metric 'latency_ns' is nan"),
        ({"latency_ns": math.inf}, "metric 'latency_ns' is inf"),
    ],
)
def test_bad_results_name_bench_config_and_metric(metrics: dict[str, Any], message: str) -> None:
    """An invalid Result raises ResultError naming the bench, the config and the metric."""
    bench = make()
    with pytest.raises(ResultError, match="bench 'gemm', config '.*': " + message):
        bench.check_result(bench.configs[0].config_id, Result(metrics=metrics))


def test_numpy_scalars_are_real_numbers() -> None:
    """numpy ints and floats are accepted and stored as plain floats."""
    bench = make()
    cid = bench.configs[0].config_id
    assert bench.check_result(cid, Result(metrics={"latency_ns": np.float32(2.5)})) == {
        "latency_ns": 2.5
    }
    assert bench.check_result(cid, Result(metrics={"latency_ns": np.int64(3)})) == {
        "latency_ns": 3.0
    }
    with pytest.raises(ResultError, match=r"expected pytest_npubench\.Result"):
        bench.check_result(cid, {"latency_ns": 1.0})
