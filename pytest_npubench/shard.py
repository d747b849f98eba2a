"""Sharded sweeps: run a deterministic part of the configs per machine, then merge the parts.

``--npubench-shard K/N`` keeps the K-th of N parts of the selected configs (balanced by the
bench's ``cost`` estimate, else by count; the same partition on every machine) and writes
``shard.json`` beside its results: what it ran, every config's measured result, and a digest
of both. ``python -m pytest_npubench merge DIR...`` treats the files as data (ADR 0018): it
checks them (:mod:`pytest_npubench.shard_load`, :mod:`pytest_npubench.shard_args`), then runs
pytest in its own process with the shards' (allow-listed) command and a replay plugin
(:mod:`pytest_npubench.replay`): each item takes its measurement from the shards instead of
simulating, and everything after that (gate, regen, figures, summaries) is the code path of an
unsharded run, so the merged artifacts are byte-identical to it.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

SHARD_FILE = "shard.json"
#: 2: with a digest (issue 22); shards of schema 1 are refused (re-run them)
SHARD_SCHEMA = 2
#: Largest shard.json the merge reads (the full regen sweep in one shard is about 3 MiB).
MAX_SHARD_BYTES = 64 * 2**20
#: Options (each with a value) that say how or where a run ran, not what it measured: xdist's,
#: pytest's temp folder, the artifact folder, sharding and replay.
HOW_OPTIONS = (
    "-n",
    "--numprocesses",
    "--dist",
    "--maxprocesses",
    "--tx",
    "--basetemp",
    "--npubench-artifacts",
    "--npubench-shard",
    "--npubench-replay",
)


@dataclass(frozen=True)
class Shard:
    """``--npubench-shard K/N``: this run is part ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


#: The most parts a sweep may be split into: far more machines than any CI matrix has, and
#: small enough that a mistyped count is a clear usage error instead of a huge allocation.
MAX_SHARDS = 1_000_000


def parse_shard(value: str) -> Shard:
    """``K/N`` with 1 <= K <= N <= :data:`MAX_SHARDS`."""
    try:
        k, n = (int(part) for part in value.split("/"))
    except ValueError:
        k = n = 0
    if not 1 <= k <= n:
        raise pytest.UsageError(
            f"--npubench-shard {value!r}: give K/N with 1 <= K <= N, e.g. --npubench-shard 2/4 "
            "for the second of four parts"
        )
    if n > MAX_SHARDS:
        raise pytest.UsageError(
            f"--npubench-shard {value[:40]!r}: at most {MAX_SHARDS} parts (N); a part per "
            "machine of the CI matrix, e.g. --npubench-shard 2/4"
        )
    return Shard(k, n)


def partition(costs: Sequence[tuple[str, float]], count: int) -> list[int]:
    """The shard (0-based) of each item: longest first onto the least loaded shard (ties: the
    lower shard, then item order), so the same items give the same parts on every machine.

    O(items log items) whatever ``count`` is: the shards not used yet all have load 0, so the
    least loaded one is the least loaded used shard (a heap) or the next unused one."""
    order = sorted(range(len(costs)), key=lambda i: (-costs[i][1], costs[i][0]))
    used: list[tuple[float, int]] = []  # (load, shard) of the shards given an item
    shard_of = [0] * len(costs)
    for i in order:
        fresh = len(used)  # shards are taken in order: 0 .. fresh-1 are the used ones
        if fresh < count and (not used or (0.0, fresh) < used[0]):
            target, load = fresh, 0.0
        else:
            load, target = heapq.heappop(used)
        shard_of[i] = target
        heapq.heappush(used, (load + costs[i][1], target))
    return shard_of


def canonical_args(args: Sequence[str]) -> list[str]:
    """The command line without the options of :data:`HOW_OPTIONS` (and their values)."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in HOW_OPTIONS:
            skip = True
        elif arg.startswith(tuple(f"{o}=" for o in HOW_OPTIONS)):
            continue
        elif arg.startswith("-n") and not arg.startswith("--") and arg[2:].isalnum():
            continue  # -n2, -nauto
        else:
            out.append(arg)
    return out


def digest(data: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of a shard document without its ``digest`` key, serialised
    canonically (sorted keys, no spaces, ASCII): what was measured, with the commit, the split,
    the command and the topology it was measured with."""
    body = {key: value for key, value in data.items() if key != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def shard_document(
    shard: Shard,
    args: Sequence[str],
    commit: str | None,
    regen: bool,
    fingerprints: Mapping[str, str | None],
    payloads: Mapping[str, Mapping[str, str]],
) -> str:
    """shard.json: what one shard ran and what it measured, and the digest of both."""
    data: dict[str, Any] = {
        "schema": SHARD_SCHEMA,
        "shard": [shard.index, shard.count],
        "args": canonical_args(args),
        "commit": commit,
        "regen": regen,
        "fingerprints": dict(fingerprints),
        "results": {bench: dict(sorted(p.items())) for bench, p in sorted(payloads.items())},
    }
    data["digest"] = digest(data)
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


class ShardError(Exception):
    """Shards that cannot be merged; the message names the shard file, the entry and the fix."""
