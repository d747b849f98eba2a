"""The simulator's error types: one base class for every failure a user can cause.

Every error that ``sim`` raises because of its input (a topology file, an argument of the
Python API, a run too large for the budgets in :mod:`sim.limits`) is an :class:`NpuSimError`.
It subclasses :class:`ValueError`, so code that caught ``ValueError`` keeps working. A
message names the file or argument, the key, the value (shortened by :func:`short_repr`,
never built in full), the rule it breaks and what to do.
"""

from __future__ import annotations

import reprlib

__all__ = [
    "BudgetError",
    "InputError",
    "NpuSimError",
    "TopologyError",
    "short_number",
    "short_repr",
]

SHORT_REPR_CHARS = 80  # longest value quoted in a message


class NpuSimError(ValueError):
    """Base class of every error ``sim`` raises because of its input; the message says the fix."""


class TopologyError(NpuSimError):
    """A topology file is missing, unreadable, malformed or breaks a rule."""


class InputError(NpuSimError):
    """An argument of the Python API (a shape, a size, a variant, an algorithm) is invalid."""


class BudgetError(NpuSimError):
    """A run would exceed a budget (memory, operations, int64 picoseconds); nothing was started."""


class _ShortRepr(reprlib.Repr):
    """``reprlib`` bounded in depth and breadth; huge integers are described, not printed."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxtuple = self.maxlist = self.maxdict = self.maxset = self.maxfrozenset = 4
        self.maxstring = self.maxother = 60
        self.maxlong = 40

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:  # repr() of a 5000-digit int raises; never build it
            return f"<integer of about {int(x.bit_length() * 0.30103) + 1} digits>"
        return super().repr_int(x, level)


_SHORT = _ShortRepr()


def short_repr(value: object, limit: int = SHORT_REPR_CHARS) -> str:
    """A repr of ``value`` of at most ``limit`` characters, cheap for any value (alias bombs)."""
    try:
        text = _SHORT.repr(value)
    except Exception:  # a hostile __repr__: describe the type instead
        text = f"<{type(value).__name__} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def short_number(x: float) -> str:
    """``x`` to 3 significant digits, also an integer too large for a float (``~1e400``)."""
    if isinstance(x, int) and x.bit_length() > 1000:
        return f"~1e{int(x.bit_length() * 0.30103)}"
    return f"{x:.3g}"
