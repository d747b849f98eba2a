"""Chrome trace-event JSON from an op log (opens in Perfetto and chrome://tracing).

One process per chip, one thread per engine lane, one complete ("X") event per operation
with its bytes, MACs and exact picosecond times in ``args``. Engines that overlap their
own operations (a pipelined PE, a DMA engine whose transfers are in flight while it sets
up the next) are split into lanes, ``pe``, ``pe #2`` ..., so no thread has overlapping
events: each operation goes to the first lane that is free when it starts.

Above ``limit`` records, consecutive operations of one engine are merged into spans of
``group`` operations each (``args.ops`` says how many, ``args.bytes``/``args.macs`` sum
them) so large configs stay usable; ``otherData.merged`` says so in the file.
"""

from __future__ import annotations

import heapq
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from sim.oplog import OpLog

__all__ = ["DEFAULT_TRACE_LIMIT", "chrome_trace", "write_trace"]

DEFAULT_TRACE_LIMIT = 200_000
PS_PER_US = 1_000_000


def _spans(log: OpLog, sel: np.ndarray, group: int) -> list[tuple[int, int, int, int, int, int]]:
    """``(start, end, first_op, ops, bytes, macs)`` per span of ``group`` consecutive ops."""
    idx = np.flatnonzero(sel)
    idx = idx[np.lexsort((log.op[idx], log.start[idx]))]
    if group == 1:
        return [
            (
                int(log.start[i]),
                int(log.end[i]),
                int(log.op[i]),
                1,
                int(log.nbytes[i]),
                int(log.macs[i]),
            )
            for i in idx
        ]
    cuts = np.arange(0, len(idx), group)
    return [
        (
            int(log.start[g].min()),
            int(log.end[g].max()),
            int(log.op[g[0]]),
            len(g),
            int(log.nbytes[g].sum()),
            int(log.macs[g].sum()),
        )
        for g in (idx[c : c + group] for c in cuts)
    ]


def _lanes(spans: list[tuple[int, int, int, int, int, int]]) -> list[int]:
    """The first free lane for each span (spans sorted by start)."""
    free: list[tuple[int, int]] = []  # (free at, lane)
    lanes: list[int] = []
    count = 0
    for start, end, *_ in spans:
        if free and free[0][0] <= start:
            _, lane = heapq.heappop(free)
        else:
            lane, count = count, count + 1
        lanes.append(lane)
        heapq.heappush(free, (end, lane))
    return lanes


def chrome_trace(
    log: OpLog, *, limit: int = DEFAULT_TRACE_LIMIT, title: str = ""
) -> dict[str, Any]:
    """The trace-event document of ``log`` (see module docstring)."""
    if limit < 1:
        raise ValueError(f"trace record limit must be >= 1, got {limit}")
    group = max(1, -(-len(log) // limit))
    events: list[dict[str, Any]] = []
    meta: list[dict[str, Any]] = []
    tid_base = 0
    for chip in sorted({int(c) for c in np.unique(log.chip)}):
        meta.append(
            {
                "name": "process_name",
                "ph": "M",
                "pid": chip,
                "tid": 0,
                "args": {"name": f"chip {chip}"},
            }
        )
        on_chip = log.chip == chip
        for eng in sorted({int(e) for e in np.unique(log.engine[on_chip])}):
            sel = on_chip & (log.engine == eng)
            for stage in sorted({int(s) for s in np.unique(log.stage[sel])}):
                spans = _spans(log, sel & (log.stage == stage), group)
                lanes = _lanes(spans)
                name = log.engines[eng]
                if len(np.unique(log.stage[sel])) > 1:
                    name = f"{name} {log.stages[stage]}"
                for lane in range(max(lanes) + 1):
                    meta.append(
                        {
                            "name": "thread_name",
                            "ph": "M",
                            "pid": chip,
                            "tid": tid_base + lane,
                            "args": {"name": name if lane == 0 else f"{name} #{lane + 1}"},
                        }
                    )
                    meta.append(
                        {
                            "name": "thread_sort_index",
                            "ph": "M",
                            "pid": chip,
                            "tid": tid_base + lane,
                            "args": {"sort_index": tid_base + lane},
                        }
                    )
                for (start, end, op, ops, nbytes, macs), lane in zip(spans, lanes, strict=True):
                    args: dict[str, Any] = {
                        "op": op,
                        "bytes": nbytes,
                        "macs": macs,
                        "start_ps": start,
                        "end_ps": end,
                    }
                    if group > 1:
                        args["ops"] = ops
                    events.append(
                        {
                            "name": log.stages[stage],
                            "cat": log.stages[stage],
                            "ph": "X",
                            "pid": chip,
                            "tid": tid_base + lane,
                            "ts": start / PS_PER_US,
                            "dur": (end - start) / PS_PER_US,
                            "args": args,
                        }
                    )
                tid_base += max(lanes) + 1
    other = {
        "title": title,
        "records": len(log),
        "events": len(events),
        "merged": group > 1,
        "ops_per_event": group,
        "record_limit": limit,
        "time_unit": "ts and dur in microseconds; args.start_ps/end_ps exact",
    }
    if group > 1:
        other["note"] = (
            f"{len(log)} records exceed the limit of {limit}: consecutive operations of one "
            f"engine are merged into spans of {group} (args.ops counts them)"
        )
    if len(events) > limit:
        other["over_limit"] = (
            f"{len(events)} events for a limit of {limit}: every engine lane keeps at least one "
            "span, and spans do not cross lanes"
        )
    return {"traceEvents": meta + events, "displayTimeUnit": "ns", "otherData": other}


def write_trace(
    log: OpLog, path: Path, *, limit: int = DEFAULT_TRACE_LIMIT, title: str = ""
) -> Path:
    """Write the trace atomically (temp file + rename); return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = chrome_trace(log, limit=limit, title=title)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
