"""The checks one topology value must pass, shared by every section's parser: the message
style (file, key, value, rule, fix), integers and numbers inside what the simulator
represents (``sim.limits``), whole picoseconds, mappings and their allowed keys."""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from typing import Any

from sim.errors import TopologyError, short_repr
from sim.limits import MAX_CODE, MAX_INT_KEY, MAX_OP_PS
from sim.topology.sections import exact
from sim.units import PS_PER_NS

__all__ = [
    "INT_MAX",
    "MAX_INT_DIGITS",
    "NS_MAX",
    "Oversized",
    "check_keys",
    "fail",
    "integer",
    "not_a_number",
    "real",
    "require_mapping",
]


def fail(source: str, key: str, value: object, rule: str) -> TopologyError:
    """The one message a bad value gets: the file, the key, the value, the rule, the fix."""
    return TopologyError(
        f"{source}: key '{key}' = {short_repr(value)}: {rule}. Fix the value in the topology file."
    )


class Oversized(str):
    """A YAML integer with too many digits to be a hardware value (never converted to int)."""

    def __repr__(self) -> str:
        return str.__str__(self)


MAX_INT_DIGITS = 30
_SEXAGESIMAL = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
# tighter than MAX_INT_KEY where a value becomes an int16 engine code or sizes a per-block state
INT_MAX = {
    "dma.engines": MAX_CODE - 2,  # dma0..dmaN-1, then fetch and pe
    "hbm.num_pcs": MAX_CODE,  # channel state is compared at every simulated block
    "chips.count": MAX_CODE,  # chip codes; links are bounded by schema's _links()
}
NS_MAX = MAX_OP_PS // PS_PER_NS


def not_a_number(value: object) -> str:
    if isinstance(value, Oversized):
        return f"must be a number, and an integer of {len(value.lstrip('+-'))} digits is too large"
    if isinstance(value, str) and _SEXAGESIMAL.match(value):
        return (
            "must be a number: YAML 1.1 sexagesimal (base 60) notation like 1:30 is read as "
            "text here, not as 90; write the plain number"
        )
    return "must be a number"


def integer(source: str, key: str, value: object, most: int | None = None) -> int:
    """A positive integer of at most ``most`` (default: :data:`INT_MAX` for the key, else
    ``MAX_INT_KEY``)."""
    if most is None:
        most = INT_MAX.get(key, MAX_INT_KEY)
    if isinstance(value, Oversized):
        rule = f"must be at most {most} (what the simulator represents); it has {len(value)} digits"
        raise fail(source, key, value, rule)
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        rule = "must be an integer"
        if isinstance(value, str):
            rule = not_a_number(value).replace("a number", "an integer", 1)
        raise fail(source, key, value, rule)
    number = int(value)
    if number <= 0:
        raise fail(source, key, value, "must be positive (> 0)")
    if number > most:
        raise fail(source, key, value, f"must be at most {most} (what the simulator represents)")
    return number


def real(source: str, key: str, kind: str, value: object, zero_ok: bool = False) -> int | float:
    """A finite positive number (``zero_ok``: or zero); ``kind`` "ns" also asks for whole
    picoseconds and at most one operation's longest duration."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise fail(source, key, value, not_a_number(value))
    number: int | float = int(value) if isinstance(value, numbers.Integral) else float(value)
    if isinstance(number, int) and number.bit_length() > MAX_INT_DIGITS * 4:
        raise fail(source, key, value, f"is too large (more than {MAX_INT_DIGITS} digits)")
    if not math.isfinite(number):
        raise fail(source, key, value, "must be a finite number (not NaN or infinity)")
    if zero_ok and number < 0:
        raise fail(source, key, value, "must be zero or positive (>= 0)")
    if not zero_ok and number <= 0:
        raise fail(source, key, value, "must be positive (> 0)")
    if kind == "ns":
        if number > NS_MAX:
            raise fail(
                source,
                key,
                value,
                f"must be at most {NS_MAX} ns: one operation may last at most 2**40 ps "
                "(sim.limits.MAX_OP_PS) so that a run stays within int64 picoseconds",
            )
        if (exact(number) * PS_PER_NS).denominator != 1:
            raise fail(source, key, value, "must be a whole number of picoseconds (<= 3 decimals)")
    return number


def require_mapping(source: str, key: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise fail(source, key, value, "must be a mapping of keys to values")
    return value


def check_keys(
    source: str,
    prefix: str,
    got: Mapping[str, Any],
    allowed: set[str],
    optional: frozenset[str] = frozenset(),
) -> None:
    """Every key of ``got`` is a name in ``allowed``; every one not ``optional`` is given."""
    for key in got:
        if not isinstance(key, str):
            raise TopologyError(
                f"{source}: key {short_repr(key)} under '{prefix or '<top level>'}' is not a "
                f"name. Allowed here: {', '.join(sorted(allowed))}. Remove or rename it."
            )
    unknown = sorted(set(got) - allowed)
    if unknown:
        key = f"{prefix}{short_repr(unknown[0])[1:-1]}"
        raise TopologyError(
            f"{source}: unknown key '{key}'. Allowed here: {', '.join(sorted(allowed))}. "
            "Remove or rename it."
        )
    missing = sorted(allowed - set(got) - optional)
    if missing:
        raise TopologyError(
            f"{source}: missing key '{prefix}{missing[0]}'. Add it to the topology file."
        )
