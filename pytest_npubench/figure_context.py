"""What a bench's figures must say about the run that drew them (issue 27): which configs
failed, whether the run was partial (``-k``, ``-m``, node ids: a subset of the sweep), and
whether it was a hardware what-if (this run's topology differs from the baseline's, so configs
reused from the baseline were measured on other hardware and are left out of the figures).

The plugin computes one :class:`FigureContext` per bench (:func:`for_bench`) and sets it
around the bench's figures function (:func:`using`), in whatever process or thread draws it;
:mod:`pytest_npubench.plotting` reads it (:func:`current`) to mark failed configs and to stamp
a banner on every figure of a partial or what-if run (``plotting.save``). A figures function
called without a context (a notebook, a test) sees ``None`` and draws as before, failed
configs told by their verdict.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pytest_npubench.outcome import ConfigResult

#: verdicts that fail an item whatever the options (the rest depend on regen and strictness)
ALWAYS_FAILED = frozenset({"failed-check", "error"})


@dataclass(frozen=True)
class FigureContext:
    """How one bench's figures relate to the run: ``selected`` of ``total`` sweep configs have
    a result; ``failed`` are the ids of the configs whose item failed (``failed_unplotted`` of
    them have no metric values to draw); under a what-if (``whatif``: 'this run's fingerprint
    vs the baseline's'), ``dropped`` configs reused from the baseline's topology are not drawn.
    """

    bench: str
    selected: int
    total: int
    failed: tuple[str, ...] = ()
    failed_unplotted: tuple[str, ...] = ()
    whatif: str = ""
    dropped: int = 0

    @property
    def partial(self) -> bool:
        return self.selected < self.total

    def banner(self) -> list[str]:
        """The lines every figure of this bench carries (none for a full, clean run)."""
        lines = []
        if self.partial:
            lines.append(
                f"partial run: {self.selected} of {self.total} configs selected (-k / -m / "
                "node ids); not the full figure"
            )
        if self.whatif:
            lines.append(
                f"what-if ({self.whatif}): only configs measured on this run's topology; "
                f"{self.dropped} reused from the baseline's topology not drawn"
            )
        if self.failed:
            shown = ", ".join(self.failed_unplotted[:3])
            more = len(self.failed_unplotted) - 3
            unplotted = (
                f"; {len(self.failed_unplotted)} without values to draw: {shown}"
                + (f" and {more} more" if more > 0 else "")
                if self.failed_unplotted
                else ""
            )
            lines.append(
                f"{len(self.failed)} configs FAILED in this run (red x where drawn){unplotted}"
            )
        return lines

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FigureContext:
        fields = dict(data)
        for key in ("failed", "failed_unplotted"):
            fields[key] = tuple(fields.get(key, ()))
        return cls(**fields)


def failing(result: ConfigResult, regen: bool, fail_improvements: bool) -> bool:
    """Whether this config's item failed (as ``item._judge`` decides)."""
    if result.verdict in ALWAYS_FAILED:
        return True
    if regen:
        return False
    failing_verdicts = {"regression", "new"} | ({"improved"} if fail_improvements else set())
    return result.verdict in failing_verdicts


def for_bench(
    bench: str,
    total: int,
    results: Mapping[str, ConfigResult],
    *,
    regen: bool,
    fail_improvements: bool,
    whatif: str = "",
) -> tuple[FigureContext, dict[str, ConfigResult]]:
    """The context of one bench's figures and the results they draw: every config with
    metric values, except, under a what-if, those reused from the baseline (other hardware)."""
    failed = [cid for cid, r in results.items() if failing(r, regen, fail_improvements)]
    drawn = {cid: r for cid, r in results.items() if r.metrics}
    dropped = 0
    if whatif:
        kept = {cid: r for cid, r in drawn.items() if r.source == "run"}
        dropped, drawn = len(drawn) - len(kept), kept
    context = FigureContext(
        bench=bench,
        selected=len(results),
        total=total,
        failed=tuple(failed),
        failed_unplotted=tuple(cid for cid in failed if cid not in drawn),
        whatif=whatif,
        dropped=dropped,
    )
    return context, drawn


_CURRENT: contextvars.ContextVar[FigureContext | None] = contextvars.ContextVar(
    "npubench_figure_context", default=None
)


def current() -> FigureContext | None:
    """The context of the figures being drawn now (None outside the plugin)."""
    return _CURRENT.get()


@contextlib.contextmanager
def using(context: FigureContext | None) -> Iterator[None]:
    """Draw under ``context`` (in this thread)."""
    token = _CURRENT.set(context)
    try:
        yield
    finally:
        _CURRENT.reset(token)
