"""Chrome trace-event export: the format's required fields, per-thread order, no overlaps,
merging above the record limit."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from sim.gemm.run import run_gemm
from sim.oplog import OpLog
from sim.topology import Topology
from sim.trace import chrome_trace, write_trace

REQUIRED_X = {"name", "cat", "ph", "pid", "tid", "ts", "dur", "args"}


def check_trace_event_format(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Validate against the Trace Event Format (JSON object form); return the X events."""
    assert set(doc) >= {"traceEvents", "displayTimeUnit"}
    assert doc["displayTimeUnit"] in ("ms", "ns")
    json.dumps(doc)  # serialisable
    named_threads = set()
    xs = []
    for ev in doc["traceEvents"]:
        assert ev["ph"] in ("X", "M")
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int)
        if ev["ph"] == "M":
            assert ev["name"] in ("process_name", "thread_name", "thread_sort_index")
            if ev["name"] == "thread_name":
                named_threads.add((ev["pid"], ev["tid"]))
            continue
        assert set(ev) >= REQUIRED_X
        assert isinstance(ev["ts"], float | int) and isinstance(ev["dur"], float | int)
        assert ev["dur"] >= 0 and ev["ts"] >= 0
        xs.append(ev)
    by_thread: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for ev in xs:
        by_thread[(ev["pid"], ev["tid"])].append(ev)
    assert set(by_thread) <= named_threads, "every thread with events has a name"
    for evs in by_thread.values():
        starts = [e["args"]["start_ps"] for e in evs]
        assert starts == sorted(starts), "events are monotonic per thread"
        for a, b in itertools.pairwise(evs):
            assert a["args"]["end_ps"] <= b["args"]["start_ps"], "no overlap on one thread"
    return xs


def test_every_operation_becomes_one_event(topo: Topology) -> None:
    """Below the limit: one X event per record, with bytes, MACs and exact ps in args."""
    log = run_gemm("128x128x128", "double_buffer", topo).log
    doc = chrome_trace(log)
    xs = check_trace_event_format(doc)
    assert len(xs) == len(log) and doc["otherData"]["merged"] is False
    assert sum(e["args"]["macs"] for e in xs) == int(log.macs.sum())
    assert sum(e["args"]["bytes"] for e in xs) == int(log.nbytes.sum())
    ends = max(e["args"]["end_ps"] for e in xs)
    assert ends == log.makespan_ps
    assert max(e["ts"] + e["dur"] for e in xs) == pytest.approx(log.makespan_ps / 1e6)


def test_pipelined_pe_is_split_into_lanes(topo: Topology) -> None:
    """The PE overlaps D tile-ops in flight, so its events spread over D lanes."""
    log = run_gemm("64x1024x64", "resident", topo).log
    doc = chrome_trace(log)
    check_trace_event_format(doc)
    names = [e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"]
    pe_lanes = [n for n in names if n.startswith("pe")]
    assert len(pe_lanes) == topo.pe.pipeline_stages


def test_large_logs_merge_into_spans_and_say_so(topo: Topology, tmp_path: Path) -> None:
    """Above the limit the file stays small, counts every op once and states the merge."""
    log = run_gemm("512x512x512", "load_ref", topo).log
    path = write_trace(log, tmp_path / "t" / "trace.json", limit=500)
    doc = json.loads(path.read_text())
    xs = check_trace_event_format(doc)
    assert len(xs) <= 500 + 10  # spans are per engine and stage: rounding adds a few
    assert doc["otherData"]["merged"] is True and "merged into spans" in doc["otherData"]["note"]
    assert sum(e["args"]["ops"] for e in xs) == len(log)
    assert not list(tmp_path.glob("t/.*.tmp")), "no temp file left behind"


def test_multi_chip_logs_get_one_process_per_chip() -> None:
    """The chip column becomes the pid, each with its process name."""
    log = OpLog.from_columns(
        ["link0->1", "reduce"],
        ["send", "reduce"],
        {
            "chip": [0, 1, 1],
            "engine": [0, 1, 1],
            "stage": [0, 1, 1],
            "op": [0, 1, 2],
            "start": [0, 10, 30],
            "end": [10, 20, 40],
        },
    )
    doc = chrome_trace(log)
    check_trace_event_format(doc)
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert procs == {0: "chip 0", 1: "chip 1"}


def test_limit_must_be_positive(topo: Topology) -> None:
    """A zero limit is a usage error, not an empty file."""
    with pytest.raises(ValueError, match="limit must be >= 1"):
        chrome_trace(run_gemm("32x64x32", "load_ref", topo).log, limit=0)


def test_a_limit_below_the_lane_count_says_why_it_is_exceeded(topo: Topology) -> None:
    """--npubench-trace-limit 1 cannot give one event when the log has several engine lanes:
    the trace keeps one span per lane and otherData says so (it used to exceed it silently)."""
    doc = chrome_trace(run_gemm("64x128x64", "double_buffer", topo).log, limit=1)
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    lanes = {(e["pid"], e["tid"]) for e in spans}
    assert len(spans) == len(lanes) > 1
    assert doc["otherData"]["over_limit"].startswith(f"{len(spans)} events for a limit of 1")
    small = chrome_trace(run_gemm("64x128x64", "double_buffer", topo).log, limit=10**6)
    assert "over_limit" not in small["otherData"]
