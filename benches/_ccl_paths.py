"""The ccl bench's path configs (not a bench: the name starts with ``_``): regen-only configs
gated because each takes a code path no other gated config takes (issue 26;
``tests/benches/test_path_coverage.py`` derives the paths from each config's schedule and
network and fails for a path no gated config takes). The cheapest config of each path:

- the 3 x 4 torus (12 chips), every allreduce algorithm at 4 KiB: a rectangular torus whose
  two dimensions both have wrap links, and whose ring order is the transposed snake
  (``sim.fabric.network.torus_cycle``: odd rows, even columns), which no other torus of the
  sweep takes;
- the 2 x 2 torus (4 chips) for every collective beside allreduce at 1 KiB: a square torus
  without wrap links (those ran on 2 x 3 and 3 x 3 only);
- messages of many chunks (``chips.chunk_kib``, not the staging depth) that are one element
  apart: the 6-chip fully connected ring allreduce at 64 MiB;
- a run past 2**32 ps (4.3 ms; 32 bits of ps no longer hold it): the 4-chip switch direct
  allreduce at 256 MiB.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

KIB, MIB = 1024, 1024 * 1024
OTHERS = "*beside allreduce"

PATH_CONFIGS: list[dict[str, Any]] = [
    {"collective": "allreduce", "topology": "torus2d", "chips": 12, "size": 4 * KIB},
    {"collective": OTHERS, "topology": "torus2d", "chips": 4, "size": KIB},
    {
        "collective": "allreduce",
        "topology": "fully_connected",
        "chips": 6,
        "algorithm": "ring",
        "size": 64 * MIB,
    },
    {
        "collective": "allreduce",
        "topology": "switch",
        "chips": 4,
        "algorithm": "direct",
        "size": 256 * MIB,
    },
]


def _matches(params: Mapping[str, Any], spec: Mapping[str, Any]) -> bool:
    collective = params.get("collective", "allreduce")
    for key, value in spec.items():
        got = collective if key == "collective" else params.get(key)
        if value == OTHERS and key == "collective":
            if got == "allreduce":
                return False
        elif got != value:
            return False
    return True


def path_gated(params: Mapping[str, Any]) -> bool:
    """Whether a config is one of :data:`PATH_CONFIGS`."""
    return any(_matches(params, spec) for spec in PATH_CONFIGS)


def with_paths(rule: Callable[[dict[str, Any]], bool]) -> Callable[[dict[str, Any]], bool]:
    """A sweep group's gate rule, and the path configs gated besides."""

    def gated(params: dict[str, Any]) -> bool:
        return rule(params) or path_gated(params)

    return gated
