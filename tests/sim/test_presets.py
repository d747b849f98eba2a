"""The real-system presets (ADR 0021 decision 4): every value line says what kind of number
it is and where it comes from, at most three values in all presets are calibrated, and every
preset loads and runs a checked allreduce."""

from __future__ import annotations

import re

import pytest

from sim import allreduce, load_topology
from sim.topology import TOPOLOGY_DIR

PRESETS = ["mi300x-8", "mi350x-8", "h100-sxm-8", "h100-sxm-8x4"]
KINDS = ("datasheet", "paper", "nccl", "rccl", "measured", "calibrated", "model")
VALUE = re.compile(r"^\s*(- )?[a-z_0-9]+:\s*[^\s#]")  # a key with a value on its line
TAG = re.compile(r"#\s*\[(" + "|".join(KINDS) + r"): [^\]]+\]")


def value_lines(name: str) -> list[tuple[int, str]]:
    text = (TOPOLOGY_DIR / f"{name}.yaml").read_text(encoding="utf-8")
    return [(i, line) for i, line in enumerate(text.splitlines(), 1) if VALUE.match(line)]


@pytest.mark.parametrize("name", PRESETS)
def test_every_value_of_a_preset_carries_its_kind_and_source(name: str) -> None:
    untagged = [
        f"{name}.yaml:{i}: {line.strip()}"
        for i, line in value_lines(name)
        if not line.lstrip().startswith("name:") and not TAG.search(line)
    ]
    assert untagged == [], "values without a [kind: source] tag:\n" + "\n".join(untagged)


def test_the_tag_check_catches_an_untagged_value() -> None:
    assert not TAG.search("  link_bw_gbs: 48.4   # from somewhere")
    assert not TAG.search("  link_bw_gbs: 48.4   # [guess: it felt right]")
    assert TAG.search("  link_bw_gbs: 48.4   # [measured: TransferBench 48.4 GB/s]")


def test_at_most_three_values_in_all_presets_are_calibrated() -> None:
    calibrated = [
        f"{name}:{i}" for name in PRESETS for i, line in value_lines(name) if "[calibrated:" in line
    ]
    assert 1 <= len(calibrated) <= 3, calibrated


@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_loads_and_runs_a_checked_allreduce(name: str) -> None:
    topo = load_topology(name)
    run = allreduce(topo, 1 << 20)
    assert run.wrong == 0
    assert run.time_ps >= topo.collectives.launch_ps > 0
