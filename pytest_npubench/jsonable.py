"""JSON-friendly copies of bench values: parameters, topology content (baselines, results)."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any


def json_value(value: Any) -> Any:
    """A JSON-friendly copy of a parameter value: tuples become lists, unknown objects strings."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return str(value)


def flat_content(content: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as one flat dict of dotted keys (``{"dma": {"setup_ns": 32}}`` ->
    ``{"dma.setup_ns": 32}``), values JSON-friendly."""
    flat: dict[str, Any] = {}
    for key, value in content.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flat_content(value, f"{name}."))
        else:
            flat[name] = json_value(value)
    return flat


def json_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The params of a config in JSON-friendly form (for baselines and results.json)."""
    return {name: json_value(v) for name, v in params.items()}
