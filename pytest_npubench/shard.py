"""Sharded sweeps: run a deterministic part of the configs per machine, then merge the parts.

``--npubench-shard K/N`` keeps the K-th of N parts of the selected configs (balanced by the
bench's ``cost`` estimate, else by count; the same partition on every machine) and writes
``shard.json`` beside its results: what it ran and every config's measured result.
``python -m pytest_npubench merge DIR...`` checks that the shards belong together (one commit,
one topology per bench, one shard count, each shard once, same command) and re-runs pytest with
``--npubench-replay``: each item takes its measurement from the shards instead of simulating,
and everything after that (gate, regen, figures, summaries) is the code path of an unsharded
run, so the merged artifacts are byte-identical to it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SHARD_FILE = "shard.json"
SHARD_SCHEMA = 1
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


def parse_shard(value: str) -> Shard:
    """``K/N`` with 1 <= K <= N."""
    try:
        k, n = (int(part) for part in value.split("/"))
    except ValueError:
        k = n = 0
    if not 1 <= k <= n:
        raise pytest.UsageError(
            f"--npubench-shard {value!r}: give K/N with 1 <= K <= N, e.g. --npubench-shard 2/4 "
            "for the second of four parts"
        )
    return Shard(k, n)


def partition(costs: Sequence[tuple[str, float]], count: int) -> list[int]:
    """The shard (0-based) of each item: longest first onto the least loaded shard (ties: the
    lower shard, then item order), so the same items give the same parts on every machine."""
    order = sorted(range(len(costs)), key=lambda i: (-costs[i][1], costs[i][0]))
    load = [0.0] * count
    shard_of = [0] * len(costs)
    for i in order:
        target = min(range(count), key=lambda s: (load[s], s))
        shard_of[i] = target
        load[target] += costs[i][1]
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


def shard_document(
    shard: Shard,
    args: Sequence[str],
    commit: str | None,
    regen: bool,
    fingerprints: Mapping[str, str | None],
    payloads: Mapping[str, Mapping[str, str]],
) -> str:
    """shard.json: what one shard ran and what it measured."""
    data = {
        "schema": SHARD_SCHEMA,
        "shard": [shard.index, shard.count],
        "args": canonical_args(args),
        "commit": commit,
        "regen": regen,
        "fingerprints": dict(fingerprints),
        "results": {bench: dict(sorted(p.items())) for bench, p in sorted(payloads.items())},
    }
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


class ShardError(Exception):
    """Shards that cannot be merged; the message names the shard and the fix."""


def load_shards(dirs: Sequence[Path]) -> list[dict[str, Any]]:
    """Read and cross-check the shard.json of each folder; ShardError if they do not fit."""
    shards: list[dict[str, Any]] = []
    for folder in dirs:
        path = folder / SHARD_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ShardError(
                f"{path}: not a shard ({exc}); give the artifact folders that runs with "
                "--npubench-shard K/N wrote"
            ) from None
        if not isinstance(data, dict) or data.get("schema") != SHARD_SCHEMA:
            raise ShardError(f"{path}: not a shard file of schema {SHARD_SCHEMA}")
        data["_path"] = str(path)
        shards.append(data)
    if not shards:
        raise ShardError("no shard folders given; usage: python -m pytest_npubench merge DIR...")
    first = shards[0]
    for key, what in (
        ("commit", "commit"),
        ("fingerprints", "topology"),
        ("args", "command"),
        ("regen", "--regen-baselines"),
    ):
        for other in shards[1:]:
            if other[key] != first[key]:
                raise ShardError(
                    f"{other['_path']}: its {what} ({other[key]!r}) differs from that of "
                    f"{first['_path']} ({first[key]!r}); merge shards of one run only"
                )
    count = first["shard"][1]
    seen: dict[int, str] = {}
    for shard in shards:
        index, n = shard["shard"]
        if n != count:
            raise ShardError(
                f"{shard['_path']}: shard {index}/{n} is not one of {count} like "
                f"{first['_path']}; merge shards of one split only"
            )
        if index in seen:
            raise ShardError(f"{shard['_path']}: shard {index}/{n} is also in {seen[index]}")
        seen[index] = shard["_path"]
    missing = [str(k) for k in range(1, count + 1) if k not in seen]
    if missing:
        raise ShardError(
            f"shard(s) {', '.join(missing)} of {count} are missing; give every shard folder"
        )
    return shards


def replay_payloads(shards: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Every measured config's payload, by bench and config id, from all shards."""
    merged: dict[str, dict[str, str]] = {}
    for shard in shards:
        for bench, payloads in shard["results"].items():
            merged.setdefault(bench, {}).update(payloads)
    return merged
