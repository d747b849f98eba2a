"""Shared fixtures: the default topology and small variants of it written to tmp files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.topology import TOPOLOGY_DIR, Topology, load_topology


@pytest.fixture(scope="session")
def topo() -> Topology:
    return load_topology("npu-1h")


@pytest.fixture(scope="session")
def make_topo(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Topology]:
    """Build a topology from npu-1h with some ``section__key`` (or top-level) values changed."""

    def make(**changes: Any) -> Topology:
        data = yaml.safe_load((TOPOLOGY_DIR / "npu-1h.yaml").read_text())
        for dotted, value in changes.items():
            if "__" not in dotted:
                data[dotted] = value
                continue
            section, key = dotted.split("__")
            data[section][key] = value
        path: Path = tmp_path_factory.mktemp("topo") / "variant.yaml"
        path.write_text(yaml.safe_dump(data))
        return load_topology(path)

    return make
