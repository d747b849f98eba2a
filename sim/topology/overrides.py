"""A topology with some of its keys replaced: what a hardware sweep runs on (issue 28).

``$NPUBENCH_TOPOLOGY_SET`` holds a JSON object of dotted keys to values
(``{"hbm.hbm_to_router_bw_gbs": 512}``); :func:`sim.topology.topology_from_env` applies it to
the topology ``$NPUBENCH_TOPOLOGY`` names before validating, so a variant is checked like any
topology file (a bad value names the key, the file and the fix). A key must already be in the
file: a sweep replaces what the hardware description says, it does not invent sections.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from sim.errors import TopologyError, short_repr

OVERRIDES_ENV = "NPUBENCH_TOPOLOGY_SET"

Scalar = int | float | str | bool


def parse_overrides(text: str, variable: str = OVERRIDES_ENV) -> dict[str, Any]:
    """The overrides of ``$NPUBENCH_TOPOLOGY_SET``: a JSON object of dotted key to value."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TopologyError(
            f"{variable}={short_repr(text)}: not a JSON object ({exc.msg}); give "
            '{"section.key": value, ...} or unset it'
        ) from None
    if not isinstance(data, dict) or not data:
        raise TopologyError(
            f"{variable}={short_repr(text)}: must be a non-empty JSON object of "
            '"section.key": value; unset it for the topology as written'
        )
    for key, value in data.items():
        if not isinstance(value, (int, float, str, bool, list)):
            raise TopologyError(
                f"{variable}: {key!r} = {short_repr(value)} must be a number, a string, "
                "a boolean or a list"
            )
    return data


def apply_overrides(data: object, overrides: Mapping[str, Any], source: str) -> Any:
    """A copy of a topology's parsed YAML with every dotted key replaced."""
    out = copy.deepcopy(data)
    for dotted, value in overrides.items():
        parts = dotted.split(".") if isinstance(dotted, str) else []
        if not parts or not all(parts):
            raise TopologyError(
                f"{source}: override key {short_repr(dotted)} is not a dotted key "
                "(e.g. hbm.hbm_to_router_bw_gbs)"
            )
        node = out
        for depth, part in enumerate(parts):
            where = ".".join(parts[:depth]) or "the top level"
            if not isinstance(node, dict) or part not in node:
                have = sorted(node) if isinstance(node, dict) else []
                raise TopologyError(
                    f"{source}: cannot set {dotted}: {where} has no key {part!r} "
                    f"(it has: {', '.join(map(str, have)) or 'no keys'}); a sweep replaces "
                    "keys the file already has"
                )
            if depth == len(parts) - 1:
                node[part] = value
            else:
                node = node[part]
    return out


def describe(overrides: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in overrides.items())
