"""A Gantt picture of a Chrome trace-event file: one row per (process, thread) lane, one bar per
complete ("X") event. Drawn by the controller for each traced config, so a reader of index.html
sees the overlap of engines without opening a trace viewer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: Above this many events a timeline draws every n-th only (the trace file keeps them all).
MAX_BARS = 20_000


def draw_timeline(trace: Path, png: Path, title: str) -> Path:
    """Read ``trace`` and write its timeline to ``png``; return ``png``."""
    import matplotlib.pyplot as plt

    doc: dict[str, Any] = json.loads(trace.read_text(encoding="utf-8"))
    events = [e for e in doc.get("traceEvents", []) if isinstance(e, dict)]
    names = {
        (e.get("pid"), e.get("tid")): str(e.get("args", {}).get("name", ""))
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    bars = [e for e in events if e.get("ph") == "X"]
    step = max(1, len(bars) // MAX_BARS)
    lanes: dict[tuple[Any, Any], list[tuple[float, float]]] = {}
    for e in bars[::step]:
        lanes.setdefault((e.get("pid"), e.get("tid")), []).append(
            (float(e.get("ts", 0.0)), float(e.get("dur", 0.0)))
        )
    order = sorted(lanes, key=lambda k: (str(k[0]), str(k[1])))
    fig, ax = plt.subplots(figsize=(11, 0.9 + 0.32 * max(1, len(order))), dpi=90)
    for row, key in enumerate(order):
        ax.broken_barh(lanes[key], (row - 0.4, 0.8), color=f"C{row % 10}")
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([f"chip {k[0]}: {names.get(k, k[1])}" for k in order], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time [us]")
    shown = "" if step == 1 else f" (every {step}th of {len(bars)} events)"
    ax.set_title(f"{title}: engine lanes over time{shown}", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png)
    plt.close(fig)
    return png
