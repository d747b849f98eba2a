"""Reading a topology: a shipped name or a path, a regular UTF-8 file under its size limit
(``sim.inputfile``), YAML 1.2 core-schema scalars, no key given twice; the environment's
``NPUBENCH_TOPOLOGY``."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from sim.errors import TopologyError, short_repr
from sim.inputfile import read_text
from sim.limits import MAX_TOPOLOGY_FILE_BYTES
from sim.topology.checks import MAX_INT_DIGITS, Oversized
from sim.topology.overrides import OVERRIDES_ENV, apply_overrides, describe, parse_overrides
from sim.topology.schema import Topology, build

__all__ = [
    "TOPOLOGY_DIR",
    "TOPOLOGY_ENV",
    "available_topologies",
    "load_topology",
    "topology_from_env",
]

TOPOLOGY_DIR = Path(__file__).resolve().parents[1] / "topologies"


def available_topologies() -> list[str]:
    """Names of the topologies shipped in ``sim/topologies``."""
    return sorted(p.stem for p in TOPOLOGY_DIR.glob("*.yaml"))


try:  # libyaml's parser is ~15x faster; the resolvers and constructors below are the same
    from yaml import CSafeLoader as _SafeBase
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _SafeBase  # type: ignore[assignment]


class _DuplicateKey(Exception):
    """A mapping of the file gives one key twice (YAML would silently keep the last)."""

    def __init__(self, key: object, first: int, second: int) -> None:
        super().__init__(key, first, second)
        self.key, self.first, self.second = key, first, second


class _Loader(_SafeBase):
    """``yaml.SafeLoader`` (libyaml's when built) with YAML 1.2 core-schema scalars.

    YAML 1.1 reads ``1:30`` as 90 (base 60), ``017`` as 15, ``yes`` as true and dates as
    datetimes; here those stay strings, so the validator refuses them as not a number.
    Integers of more than 30 digits are kept as text (no 5000-digit int is ever built).
    A key given twice in one mapping is an error (:class:`_DuplicateKey`), not last-wins.
    """

    yaml_implicit_resolvers = {}  # noqa: RUF012 (PyYAML's own class-level table)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Any:
        """SafeConstructor's mapping, refusing a key given twice (merge keys ``<<`` aside)."""
        seen: dict[object, int] = {}
        for key_node, _value in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue  # a complex key is refused by the validator; a merge may be overridden
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise _DuplicateKey(key, seen[key], line)
                seen[key] = line
            except TypeError:  # unhashable: SafeConstructor says so
                continue
        return super().construct_mapping(node, deep=deep)


def _construct_int(loader: _SafeBase, node: yaml.Node) -> int | str:
    text = str(loader.construct_scalar(node))  # type: ignore[arg-type]
    if len(text.lstrip("+-")) > MAX_INT_DIGITS:
        return Oversized(text)
    return int(text, 10)


def _construct_float(loader: _SafeBase, node: yaml.Node) -> float:
    text = str(loader.construct_scalar(node)).lower()  # type: ignore[arg-type]
    special = {".inf": math.inf, "+.inf": math.inf, "-.inf": -math.inf, ".nan": math.nan}
    return special[text] if text in special else float(text)


_RESOLVERS = [
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:int", r"^[-+]?[0-9]+$", "-+0123456789"),
    (
        "tag:yaml.org,2002:float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+0123456789.",
    ),
    ("tag:yaml.org,2002:merge", r"^(?:<<)$", "<"),
]
for _tag, _regexp, _first in _RESOLVERS:
    _Loader.add_implicit_resolver(_tag, re.compile(_regexp), list(_first))
_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)


def _resolve(name_or_path: object) -> Path:
    """The file a shipped name or a path designates; a directory is an error of its own."""
    known = f"Known topologies: {', '.join(available_topologies())}"
    if not isinstance(name_or_path, (str, os.PathLike)) or not os.fspath(name_or_path):
        raise TopologyError(
            f"topology {short_repr(name_or_path)} must be a shipped name or a path to a "
            f".yaml file. {known}."
        )
    text = os.fspath(name_or_path)
    if not isinstance(text, str) or "\x00" in text:
        raise TopologyError(f"topology path {short_repr(text)} is not a valid path. {known}.")
    path = Path(text)
    try:
        is_dir = path.is_dir()
    except OSError as exc:
        raise TopologyError(f"{short_repr(text)}: cannot be read ({exc.strerror}).") from None
    if is_dir:
        raise TopologyError(
            f"{path}: is a directory, not a topology file. Pass a .yaml file in it, or a "
            f"shipped name. {known}."
        )
    if not path.suffix and "/" not in text and os.sep not in text:
        path = TOPOLOGY_DIR / f"{text}.yaml"
    return path


def _read(path: Path) -> str:
    """The file's text: a regular file (never a FIFO or device), UTF-8, at most 1 MiB."""
    known = f"Known topologies: {', '.join(available_topologies())}"
    return read_text(
        path,
        what="topology file",
        limit=MAX_TOPOLOGY_FILE_BYTES,
        error=TopologyError,
        hint=f"{known}; or pass a path to a .yaml file.",
    )


_MAX_NESTING = 32  # a topology nests four levels deep at most; PyYAML recurses once per level
_BRACKETS = re.compile(r"[\[\]{}]")


def _check_nesting(path: Path, text: str) -> None:
    """Refuse deep ``[``/``{`` nesting before PyYAML recurses into it (slow, then it fails)."""
    depth = 0
    for m in _BRACKETS.finditer(text):
        depth += 1 if m.group() in "[{" else -1
        if depth > _MAX_NESTING:
            line = text.count("\n", 0, m.start()) + 1
            raise TopologyError(
                f"{path}: not valid YAML (nested too deeply: more than {_MAX_NESTING} levels "
                f"of [ or {{ by line {line}). Fix the syntax."
            )


def load_topology(
    name_or_path: str | Path = "npu-1h", overrides: Mapping[str, Any] | None = None
) -> Topology:
    """Load and validate a topology by shipped name (``"npu-1h"``) or by YAML file path,
    with ``overrides`` (dotted key to value, :mod:`sim.topology.overrides`) replaced first.

    Any problem is a :class:`TopologyError` naming the file, the key, the value (shortened)
    and the fix: unreadable or non-UTF-8 files, YAML errors, unknown or missing keys, values
    that are not finite positive numbers, or beyond what the simulator represents.
    """
    path = _resolve(name_or_path)
    text = _read(path)
    _check_nesting(path, text)
    try:
        data = yaml.load(text, Loader=_Loader)  # a SafeLoader subclass
    except RecursionError:
        raise TopologyError(
            f"{path}: not valid YAML (nested too deeply). Fix the syntax."
        ) from None
    except _DuplicateKey as dup:
        raise TopologyError(
            f"{path}: key {short_repr(dup.key)} is given twice in one mapping (line "
            f"{dup.first} and line {dup.second}); YAML would silently keep the last. "
            "Remove one of them."
        ) from None
    except Exception as exc:  # PyYAML raises YAMLError, and ValueError/KeyError from tags
        detail = short_repr(str(exc), 300)[1:-1]
        raise TopologyError(f"{path}: not valid YAML ({detail}). Fix the syntax.") from None
    if overrides:
        data = apply_overrides(data, overrides, str(path))
        return build(data, f"{path} with {describe(overrides)}")
    return build(data, str(path))


TOPOLOGY_ENV = "NPUBENCH_TOPOLOGY"


def topology_from_env(default: str = "npu-1h", variable: str = TOPOLOGY_ENV) -> Topology:
    """The topology ``$NPUBENCH_TOPOLOGY`` names (a shipped name or a path), else ``default``,
    with the keys of ``$NPUBENCH_TOPOLOGY_SET`` (a JSON object, a sweep's variant) replaced.

    A bad value is one :class:`TopologyError` that names the variable, its value, what is
    wrong with the file and how to fix it (what the benches load at import).
    """
    value = os.environ.get(variable)
    text = os.environ.get(OVERRIDES_ENV)
    overrides = None if text is None else parse_overrides(text)
    if value is None:
        return load_topology(default, overrides)
    try:
        return load_topology(value, overrides)
    except TopologyError as exc:
        raise TopologyError(
            f"{variable}={value}: {exc} Set {variable} to a shipped name or a path to a "
            f"topology .yaml file, or unset it for the default ({default})."
        ) from None
