"""``json.dumps(value, indent=N, allow_nan=False)``, byte for byte, in a fraction of its time.

CPython's C encoder serves only ``indent=None``; with an indent, ``json`` runs its pure-Python
encoder, about 1 µs per value: results.json (some 3,400 configs, each a few dicts of ~40
numbers) took about a second of the serial end of a run. Here every dict or list whose values
are all scalars (nearly all of results.json) goes through the C encoder in one call, with the
item separator set to ``",\\n"`` plus the indent of its level, which is exactly what the
Python encoder writes between its items; only the containers of containers are walked in
Python. ``tests/plugin/test_indented.py`` checks the bytes against ``json.dumps`` on real
results and on hostile values.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

_CONTAINERS = (dict, list, tuple)


class _Encoders:
    """A C encoder per nesting level (its item separator holds the level's indent)."""

    def __init__(self, indent: int) -> None:
        self.indent = indent
        self._by_level: list[json.JSONEncoder] = []

    def __getitem__(self, level: int) -> json.JSONEncoder:
        while len(self._by_level) <= level:
            pad = " " * (self.indent * len(self._by_level))
            self._by_level.append(json.JSONEncoder(separators=(",\n" + pad, ": "), allow_nan=False))
        return self._by_level[level]


def dumps(value: Any, indent: int = 2) -> str:
    """``json.dumps(value, indent=indent, allow_nan=False)`` for JSON data (dicts with string
    keys, lists, tuples, strings, numbers, booleans, None); anything else (other keys, other
    objects, NaN) is left to ``json.dumps``, which writes it or raises as it would have."""
    try:
        return _encode(value, 0, _Encoders(indent))
    except (TypeError, ValueError, RecursionError):
        return json.dumps(value, indent=indent, allow_nan=False)


def _encode(value: Any, level: int, encoders: _Encoders) -> str:
    values: Collection[Any]
    if isinstance(value, dict):
        if not value:
            return "{}"
        opening, closing, values = "{", "}", value.values()
    elif isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        opening, closing, values = "[", "]", value
    else:
        return encoders[0].encode(value)
    inner = encoders[level + 1]
    pad = " " * (encoders.indent * (level + 1))
    end = "\n" + " " * (encoders.indent * level) + closing
    if not any(issubclass(t, _CONTAINERS) for t in set(map(type, values))):
        # scalars only: one C call (it writes keys of other types as json does too)
        return opening + "\n" + pad + inner.encode(value)[1:-1] + end
    key = encoders[0].encode
    if opening == "{":
        if set(map(type, value)) != {str}:
            raise TypeError("a key that is not a str")  # json converts it: leave it to json
        parts = [key(k) + ": " + _encode(v, level + 1, encoders) for k, v in value.items()]
    else:
        parts = [_encode(v, level + 1, encoders) for v in value]
    return opening + "\n" + pad + (",\n" + pad).join(parts) + end
