"""Dotted keys in a topology's YAML text: find a value, change it, tag its line.

A key is a dotted path with list indices, ``chips.link_bw_gbs``,
``collectives.protocols.ll.efficiency``, ``chips.dimensions[0].link_bw_gbs``; it names one
plain (unquoted) numeric scalar of the file. Edits work on the text itself, not on a re-dumped
document, so every comment, the key order and the layout of the file survive; a calibrated
value's line gets the preset comment convention of docs/adr/0021 decision 4
(``# [calibrated: ...]``) in place of its old comment.

The file is read for positions only (YAML's node marks); what the values mean is the
topology loader's business (:func:`sim.topology.load_topology`), which sees every edited text.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import yaml

from sim.errors import InputError, short_repr

__all__ = ["Spot", "edit", "find", "leaf_keys", "split_key"]

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[[0-9]+\])*)")
_INDEX = re.compile(r"\[([0-9]+)\]")
_INT = re.compile(r"[-+]?[0-9]+")


def split_key(key: str) -> list[str | int]:
    """``chips.dimensions[0].size`` -> ``["chips", "dimensions", 0, "size"]``."""
    parts: list[str | int] = []
    for segment in key.split("."):
        m = _SEGMENT.fullmatch(segment)
        if not m:
            raise InputError(
                f"key {short_repr(key)} must be a dotted path of names with optional [index], "
                "e.g. chips.link_bw_gbs or chips.dimensions[0].link_bw_gbs"
            )
        parts.append(m.group(1))
        parts += [int(i) for i in _INDEX.findall(m.group(2))]
    return parts


@dataclass(frozen=True)
class Spot:
    """Where a key's value is: 0-based line and columns of the scalar, its text and number."""

    key: str
    line: int
    start: int
    end: int
    text: str
    value: float
    is_int: bool


def _compose(text: str, source: str) -> yaml.Node:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise InputError(f"{source}: not valid YAML ({exc}); fix the syntax") from None
    if not isinstance(node, yaml.MappingNode):
        raise InputError(f"{source}: a topology is a YAML mapping of sections")
    return node


def _children(node: yaml.Node) -> Iterator[tuple[str | int, yaml.Node]]:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode):
                yield str(k.value), v
    elif isinstance(node, yaml.SequenceNode):
        yield from enumerate(node.value)


def _leaves(node: yaml.Node, prefix: str = "") -> Iterator[tuple[str, yaml.ScalarNode]]:
    for name, child in _children(node):
        key = f"{prefix}[{name}]" if isinstance(name, int) else f"{prefix}.{name}".lstrip(".")
        if isinstance(child, yaml.ScalarNode):
            yield key, child
        else:
            yield from _leaves(child, key)


def leaf_keys(text: str, source: str) -> list[str]:
    """Every scalar's dotted key, in file order."""
    return [key for key, _node in _leaves(_compose(text, source))]


def _similar(key: str, keys: list[str]) -> list[str]:
    leaf = key.rsplit(".", 1)[-1]
    close = difflib.get_close_matches(key, keys, n=6, cutoff=0.6)
    same_leaf = [k for k in keys if k.rsplit(".", 1)[-1] == leaf and k not in close]
    return (close + same_leaf)[:8]


def find(text: str, source: str, key: str) -> Spot:
    """The plain numeric scalar ``key`` names; an error naming the key and similar keys if
    there is none."""
    node: yaml.Node = _compose(text, source)
    walked: list[str] = []
    for part in split_key(key):
        children = dict(_children(node))
        found = children.get(part)
        if found is None:
            similar = _similar(key, leaf_keys(text, source))
            where = ".".join(walked) or "the top level"
            names = ", ".join(str(c) for c in children) or "nothing"
            hint = f"similar keys: {', '.join(similar)}" if similar else f"{where} has {names}"
            raise InputError(
                f"{source}: has no key {key!r} (no {part!r} in {where}); {hint}. A key the "
                "file leaves at its default must be written into the YAML (with a starting "
                "value) to be fitted."
            )
        walked.append(f"[{part}]" if isinstance(part, int) else str(part))
        node = found
    if not isinstance(node, yaml.ScalarNode):
        raise InputError(f"{source}: {key} is a section, not a value; name one of its values")
    start, end = node.start_mark, node.end_mark
    number: float | None = None
    if node.style is None and start.line == end.line:
        try:
            number = float(node.value)
        except ValueError:
            number = None
    if number is None or number != number or number in (float("inf"), float("-inf")):
        raise InputError(
            f"{source}: {key} = {short_repr(node.value)} (line {start.line + 1}) is not a plain "
            "number; only numeric values can be fitted"
        )
    return Spot(
        key=key,
        line=start.line,
        start=start.column,
        end=end.column,
        text=node.value,
        value=number,
        is_int=bool(_INT.fullmatch(node.value)),
    )


def _comment_at(line: str, after: int) -> int:
    """Where the line's trailing comment starts (a ``#`` after a blank), else its length."""
    for at in range(after, len(line)):
        if line[at] == "#" and (at == 0 or line[at - 1] in " \t"):
            return at
    return len(line)


def edit(
    text: str,
    values: Mapping[Spot, str],
    tag: str | None = None,
) -> str:
    """``text`` with each spot's scalar replaced by its new literal; with ``tag``, each edited
    line's trailing comment becomes ``# [<tag>] (<name> was <old value>)``."""
    lines = text.split("\n")
    by_line: dict[int, list[Spot]] = {}
    for spot in values:
        by_line.setdefault(spot.line, []).append(spot)
    for number, spots in by_line.items():
        line = lines[number]
        spots.sort(key=lambda s: s.start)
        if tag is None:
            for spot in reversed(spots):
                line = line[: spot.start] + values[spot] + line[spot.end :]
            lines[number] = line
            continue
        column = _comment_at(line, spots[-1].end)
        code = line[:column].rstrip()
        for spot in reversed(spots):
            code = code[: spot.start] + values[spot] + code[spot.end :]
        was = ", ".join(f"{s.key.rsplit('.', 1)[-1]} was {s.text}" for s in spots)
        lines[number] = f"{code.ljust(max(len(code) + 2, column))}# [{tag}] ({was})"
    return "\n".join(lines)
