"""``chips.dimensions`` (docs/adr/0021 decision 1): the keys of one dimension, their checks,
what a dimensions file derives for :class:`~sim.topology.sections.ChipsConfig`'s one-level
fields, how many links the network has, and the canonical content that is fingerprinted.

A dimension's ``size`` may be 1 (a group of one chip, no peers): the shorthand's
``torus_dims: [1, p]`` is a torus of a ring of ``p`` and a ring of 1, and a sweep can shrink
a dimension without rewriting the list.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sim.errors import TopologyError
from sim.limits import MAX_CODE
from sim.topology.checks import check_keys, fail, integer, real, require_mapping
from sim.topology.sections import ChipsConfig
from sim.topology.system import DIMENSION_SHAPES, DimensionConfig
from sim.units import ps_for_bytes

__all__ = [
    "DIMENSION_KEYS",
    "MAX_DIMENSIONS",
    "MULTI",
    "SHORTHAND_KEYS",
    "build_dimensions",
    "check_count",
    "chips_content",
    "derived_chips",
    "dimension_content",
    "dimension_duration_cases",
    "network_links",
    "refuse_both_forms",
    "with_dimensions",
]

#: the one-level keys of ``chips`` that ``dimensions`` replaces (ADR 0021: the shorthand)
SHORTHAND_KEYS = ("topology", "torus_dims", "link_bw_gbs", "link_latency_ns")
#: ``chips.topology`` of a dimensions file that is none of the one-level shapes (derived only)
MULTI = "multi"
#: ``count`` <= 32767 leaves room for 15 dimensions of 2 or more; a size-1 one adds nothing
MAX_DIMENSIONS = 16

# key -> (kind, description); kinds: "shape", "int", "num", "ns", "num0" / "ns0" (zero allowed)
DIMENSION_KEYS: dict[str, tuple[str, str]] = {
    "shape": ("shape", "ring, fully_connected or switch"),
    "size": ("int", "chips per group of this dimension (1 or more)"),
    "links": ("int", "parallel links per directed chip pair (ring: per neighbour; FC: per peer)"),
    "ports": ("int", "full-duplex ports per chip into the group's switch (switch only)"),
    "link_bw_gbs": ("num", "per link (or port), per direction, GB/s"),
    "link_latency_ns": ("ns", "per hop, ns (flight time)"),
    "nic_latency_ns": ("ns0", "once at each end of a traversal of this dimension, ns"),
    "switch_reduce_gbs": ("num0", "> 0: the switch reduces at this rate per port, GB/s"),
}
_DEFAULTS: dict[str, int] = {"links": 1, "ports": 1, "nic_latency_ns": 0, "switch_reduce_gbs": 0}
_ONLY: dict[str, tuple[str, ...]] = {
    "links": ("ring", "fully_connected"),
    "ports": ("switch",),
    "switch_reduce_gbs": ("switch",),
}


def refuse_both_forms(source: str, raw: Mapping[str, Any]) -> None:
    """A ``chips`` section with ``dimensions`` gives none of the shorthand keys."""
    given = [f"chips.{k}" for k in SHORTHAND_KEYS if k in raw]
    if given:
        quoted = ", ".join(f"'{k}'" for k in given)
        raise TopologyError(
            f"{source}: keys 'chips.dimensions' and {quoted} are two forms of one chip "
            "network (docs/adr/0021): give chips.dimensions, or the one-level shorthand "
            "(chips.topology, torus_dims, link_bw_gbs, link_latency_ns), not both. Remove "
            f"{' and '.join(given)}, or chips.dimensions."
        )


def _dimension(source: str, index: int, value: object) -> DimensionConfig:
    prefix = f"chips.dimensions[{index}]"
    raw = require_mapping(source, prefix, value)
    if "shape" not in raw:
        raise TopologyError(f"{source}: missing key '{prefix}.shape'. Add it to the topology file.")
    shape = raw["shape"]
    if not isinstance(shape, str) or shape not in DIMENSION_SHAPES:
        raise fail(
            source, f"{prefix}.shape", shape, f"must be one of {', '.join(DIMENSION_SHAPES)}"
        )
    for key, shapes in _ONLY.items():
        if key in raw and shape not in shapes:
            raise TopologyError(
                f"{source}: key '{prefix}.{key}' is only read when the dimension's shape is "
                f"{' or '.join(shapes)}, and {prefix}.shape is {shape}. Remove {prefix}.{key}, "
                "or change the shape."
            )
    allowed = {k for k in DIMENSION_KEYS if shape in _ONLY.get(k, DIMENSION_SHAPES)}
    check_keys(source, f"{prefix}.", raw, allowed, frozenset(_DEFAULTS))
    values: dict[str, Any] = {"shape": shape}
    for key, (kind, _desc) in DIMENSION_KEYS.items():
        if key == "shape" or key not in raw:
            continue  # checked above, or an optional key left out: the dataclass's default
        where = f"{prefix}.{key}"
        if kind == "int":
            values[key] = integer(source, where, raw[key], MAX_CODE if key == "size" else None)
        else:
            values[key] = real(source, where, kind.rstrip("0"), raw[key], kind.endswith("0"))
    return DimensionConfig(**values)


def build_dimensions(source: str, value: object) -> tuple[DimensionConfig, ...]:
    """The checked list of ``chips.dimensions``, innermost first."""
    if not isinstance(value, (list, tuple)):
        raise fail(
            source,
            "chips.dimensions",
            value,
            "must be a list of dimensions, innermost first, each a mapping with shape, size, "
            "link_bw_gbs and link_latency_ns",
        )
    if not value:
        raise fail(source, "chips.dimensions", value, "must list at least one dimension")
    if len(value) > MAX_DIMENSIONS:
        raise fail(
            source,
            "chips.dimensions",
            f"<{len(value)} dimensions>",
            f"must have at most {MAX_DIMENSIONS} dimensions (chips.count <= {MAX_CODE} leaves "
            "room for 15 of size 2 or more; a dimension of size 1 adds nothing)",
        )
    return tuple(_dimension(source, i, v) for i, v in enumerate(value))


def check_count(source: str, count: int, dims: tuple[DimensionConfig, ...]) -> None:
    """``chips.count`` is the product of the dimensions' sizes."""
    product = math.prod(d.size for d in dims)
    if product != count:
        sizes = " x ".join(str(d.size) for d in dims)
        raise fail(
            source,
            "chips.count",
            count,
            f"must equal the product of the chips.dimensions sizes ({sizes} = {product}); "
            f"set chips.count: {product}, or change the sizes",
        )


def derived_chips(dims: tuple[DimensionConfig, ...]) -> dict[str, Any]:
    """The one-level fields a dimensions file's ``ChipsConfig`` reads (derived, not content):
    ``topology`` is the shape of a single dimension, ``torus2d`` for exactly two rings
    (``torus_dims`` = [outer size, inner size], the shorthand's rows and cols), else
    ``multi`` (``torus_dims`` [1, count]); ``link_bw_gbs`` and ``link_latency_ns`` are
    dimension 0's. A model of a multi-dimension system reads ``dimensions``, not these."""
    count = math.prod(d.size for d in dims)
    if len(dims) == 1:
        topology, torus = dims[0].shape, (1, count)
    elif len(dims) == 2 and all(d.shape == "ring" for d in dims):
        topology, torus = "torus2d", (dims[1].size, dims[0].size)
    else:
        topology, torus = MULTI, (1, count)
    return {
        "topology": topology,
        "torus_dims": torus,
        "link_bw_gbs": dims[0].link_bw_gbs,
        "link_latency_ns": dims[0].link_latency_ns,
    }


def network_links(dims: tuple[DimensionConfig, ...]) -> int:
    """How many links (one per direction) the network has, at most: in every group of every
    dimension, a ring 2 per chip per parallel link, a fully connected group one per ordered
    pair per parallel link, a switch one up and one down per port."""
    count = math.prod(d.size for d in dims)
    total = 0
    for d in dims:
        per_group = {
            "ring": 2 * d.size * d.links,
            "fully_connected": d.size * (d.size - 1) * d.links,
            "switch": 2 * d.size * d.ports,
        }[d.shape]
        total += count // d.size * per_group
    return total


def dimension_duration_cases(
    dims: tuple[DimensionConfig, ...], chunk_bytes: int, chunk: str
) -> list[tuple[str, float, int, str, str]]:
    """(key, value, ps, what, unit) of each operation a dimension's values define: one chunk
    sent on its links, and reduced by its switch when it reduces."""
    cases = []
    for i, d in enumerate(dims):
        key = f"chips.dimensions[{i}]"
        bw = d.link_bw
        cases.append(
            (
                f"{key}.link_bw_gbs",
                d.link_bw_gbs,
                ps_for_bytes(chunk_bytes, bw),
                f"sending {chunk} on dimension {i}",
                " GB/s",
            )
        )
        if d.switch_reduce_bw > 0:
            ps = ps_for_bytes(chunk_bytes, d.switch_reduce_bw)
            cases.append(
                (
                    f"{key}.switch_reduce_gbs",
                    d.switch_reduce_gbs,
                    ps,
                    f"reducing {chunk} in dimension {i}'s switch",
                    " GB/s",
                )
            )
    return cases


def dimension_content(dim: DimensionConfig) -> dict[str, Any]:
    """A dimension as the file would say it, keys at their neutral default left out."""
    out: dict[str, Any] = {
        "shape": dim.shape,
        "size": dim.size,
        "link_bw_gbs": dim.link_bw_gbs,
        "link_latency_ns": dim.link_latency_ns,
    }
    for key, default in _DEFAULTS.items():
        value = getattr(dim, key)
        if value != default:
            out[key] = value
    return out


def chips_content(chips: ChipsConfig) -> dict[str, Any]:
    """A dimensions file's ``chips`` content: its own keys, not the derived one-level ones."""
    out: dict[str, Any] = {
        "count": chips.count,
        "reduce_gbs": chips.reduce_gbs,
        "chunk_kib": chips.chunk_kib,
        "staging_buffers": chips.staging_buffers,
        "dimensions": [dimension_content(d) for d in chips.dimensions],
    }
    return out


def with_dimensions(
    chips: Mapping[str, Any], dimensions: list[Mapping[str, Any]] | tuple[DimensionConfig, ...]
) -> dict[str, Any]:
    """``chips`` content switched to the general form: the shorthand keys dropped,
    ``dimensions`` (mappings as a file writes them, or :class:`DimensionConfig`) given, and
    ``count`` their sizes' product when every size is an integer (else the validator says
    which is not)."""
    out = {k: v for k, v in chips.items() if k not in SHORTHAND_KEYS and k != "dimensions"}
    out["dimensions"] = dimensions  # not a list: the validator says so
    if isinstance(dimensions, (list, tuple)):
        dims = [dimension_content(d) if isinstance(d, DimensionConfig) else d for d in dimensions]
        sizes = [d.get("size") if isinstance(d, Mapping) else None for d in dims]
        if dims and all(isinstance(n, int) and not isinstance(n, bool) for n in sizes):
            out["count"] = math.prod(n for n in sizes if isinstance(n, int))
        out["dimensions"] = dims
    return out
