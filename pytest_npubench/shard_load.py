"""Reading shard.json files as data, for ``python -m pytest_npubench merge`` (ADR 0018).

Each file is read under :data:`~pytest_npubench.shard.MAX_SHARD_BYTES` (a regular file, UTF-8,
strict JSON), every field is type-checked, its digest is recomputed, its command is checked
against the allow-list (:mod:`pytest_npubench.shard_args`), and the shards are checked against
each other (one commit, topology, command, regen and split; each part once; no config in two
shards). What needs the benches themselves (the configs each part must hold, the payloads
against the bench's metrics, a re-simulated sample) is checked by
:mod:`pytest_npubench.replay` when the merge has collected them. Every refusal is one
:class:`~pytest_npubench.shard.ShardError` naming the file and the entry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_npubench.bench import is_real_number
from pytest_npubench.compare import VERDICTS
from pytest_npubench.inputs import InputError, loads, read_text, short
from pytest_npubench.outcome import METRIC_VERDICTS
from pytest_npubench.shard import (
    MAX_SHARD_BYTES,
    MAX_SHARDS,
    SHARD_FILE,
    SHARD_SCHEMA,
    ShardError,
    digest,
)
from pytest_npubench.shard_args import args_problem

KEYS = ("args", "commit", "digest", "fingerprints", "regen", "results", "schema", "shard")
PAYLOAD_KEYS = (
    "baseline",
    "bench",
    "changes",
    "comparisons",
    "config_id",
    "message",
    "metrics",
    "source",
    "verdict",
)
RERUN = "re-run the shard with this checkout"


@dataclass(frozen=True)
class ShardFile:
    """One accepted shard.json."""

    path: Path
    index: int
    count: int
    args: tuple[str, ...]
    commit: str | None
    regen: bool
    fingerprints: Mapping[str, str | None]
    #: bench -> config id -> the payload text (as the shard's item reported it)
    results: Mapping[str, Mapping[str, str]]
    #: the same payloads, parsed and checked
    parsed: Mapping[str, Mapping[str, Mapping[str, Any]]]


def read_shard(folder: Path) -> ShardFile:
    """``<folder>/shard.json``, checked on its own; ShardError naming the file and entry."""
    path = folder / SHARD_FILE
    try:
        text = read_text(path, MAX_SHARD_BYTES)
        if text is None:
            raise ShardError(
                f"{path}: not a shard (no such file); give the artifact folders that runs with "
                "--npubench-shard K/N wrote"
            )
        data = loads(text, "shard file")
    except InputError as exc:
        raise ShardError(f"{path}: {exc}; {RERUN}") from None
    except OSError as exc:
        raise ShardError(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from None
    return _checked(path, data)


def _checked(path: Path, data: object) -> ShardFile:
    def bad(entry: str, problem: str) -> ShardError:
        return ShardError(f"{path}: {entry}: {problem}")

    if not isinstance(data, dict):
        raise ShardError(f"{path}: not a shard file (a JSON object at the top level)")
    if data.get("schema") != SHARD_SCHEMA:
        raise bad(
            "'schema'",
            f"is {short(data.get('schema'))}; this pytest-npubench merges shards of schema "
            f"{SHARD_SCHEMA}; {RERUN}",
        )
    missing = [k for k in KEYS if k not in data]
    extra = sorted(k for k in data if k not in KEYS)
    if missing or extra:
        what = f"no {short(missing[0])}" if missing else f"an unknown key {short(extra[0])}"
        raise ShardError(f"{path}: has {what}; not a shard file this plugin wrote; {RERUN}")
    index, count = _shard(data["shard"], bad)
    args = data["args"]
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise bad("'args'", f"must be a list of strings, got {short(args)}")
    commit = data["commit"]
    if commit is not None and not isinstance(commit, str):
        raise bad("'commit'", f"must be a string or null, got {short(commit)}")
    if not isinstance(data["regen"], bool):
        raise bad("'regen'", f"must be true or false, got {short(data['regen'])}")
    fingerprints = _fingerprints(data["fingerprints"], bad)
    results = _results(data["results"], bad)
    if sorted(results) != sorted(fingerprints):
        raise bad("'results'", "must hold every bench of 'fingerprints' (the selected benches)")
    if not isinstance(data["digest"], str):
        raise bad("'digest'", f"must be a string, got {short(data['digest'])}")
    if data["digest"] != digest(data):
        raise bad(
            "'digest'",
            "does not match the content: the file was edited or damaged after the shard wrote "
            f"it; {RERUN}",
        )
    problem = args_problem(args)
    if problem:
        raise bad("'args'", f"{problem}; nothing of a shard chooses code or paths")
    parsed = {
        bench: {cid: check_payload(bench, cid, text, bad) for cid, text in payloads.items()}
        for bench, payloads in results.items()
    }
    return ShardFile(
        path, index, count, tuple(args), commit, data["regen"], fingerprints, results, parsed
    )


def _shard(value: object, bad: Any) -> tuple[int, int]:
    ok = (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        and 1 <= value[0] <= value[1] <= MAX_SHARDS
    )
    if not ok:
        raise bad("'shard'", f"must be [K, N] with 1 <= K <= N <= {MAX_SHARDS}, got {short(value)}")
    assert isinstance(value, list)
    return value[0], value[1]


def _fingerprints(value: object, bad: Any) -> dict[str, str | None]:
    if not isinstance(value, dict):
        raise bad(
            "'fingerprints'", f"must be an object of bench to fingerprint, got {short(value)}"
        )
    for bench, fingerprint in value.items():
        if fingerprint is not None and not isinstance(fingerprint, str):
            raise bad(
                f"'fingerprints'[{short(bench)}]", f"must be a string, got {short(fingerprint)}"
            )
    return dict(value)


def _results(value: object, bad: Any) -> dict[str, dict[str, str]]:
    if not isinstance(value, dict):
        raise bad("'results'", f"must be an object of bench to configs, got {short(value)}")
    for bench, payloads in value.items():
        if not isinstance(payloads, dict):
            raise bad(f"'results'[{short(bench)}]", "must be an object of config id to result")
        for cid, text in payloads.items():
            if not isinstance(text, str):
                raise bad(_entry(bench, cid), f"must be a result string, got {short(text)}")
    return {bench: dict(payloads) for bench, payloads in value.items()}


def _entry(bench: str, cid: str) -> str:
    return f"'results'[{short(bench)}][{short(cid)}]"


def check_payload(bench: str, cid: str, text: str, bad: Any) -> dict[str, Any]:
    """One config's result as the shard's item reported it (ConfigResult.to_payload)."""
    where = _entry(bench, cid)
    try:
        data = loads(text, "result")
    except InputError as exc:
        raise bad(where, str(exc)) from None
    if not isinstance(data, dict) or sorted(data) != sorted(PAYLOAD_KEYS):
        raise bad(where, f"must be an object with the keys {', '.join(PAYLOAD_KEYS)}")
    if data["bench"] != bench or data["config_id"] != cid:
        raise bad(
            where,
            f"is the result of {short(data['bench'])}[{short(data['config_id'])}], "
            "not of this entry",
        )
    if data["verdict"] not in VERDICTS:
        raise bad(where, f"'verdict' {short(data['verdict'])} is not one of {', '.join(VERDICTS)}")
    if data["source"] not in ("run", "baseline"):
        raise bad(where, f"'source' must be 'run' or 'baseline', got {short(data['source'])}")
    if not isinstance(data["message"], str):
        raise bad(where, f"'message' must be a string, got {short(data['message'])}")
    _numbers(where, "metrics", data["metrics"], bad)
    if data["baseline"] is not None:
        _numbers(where, "baseline", data["baseline"], bad)
    changes, comparisons = data["changes"], data["comparisons"]
    if not isinstance(changes, dict) or not all(
        c is None or is_real_number(c) for c in changes.values()
    ):
        raise bad(where, "'changes' must be an object of metric to number or null")
    if not isinstance(comparisons, dict) or not all(
        v in METRIC_VERDICTS for v in comparisons.values()
    ):
        raise bad(
            where, "'comparisons' must be an object of metric to " + "/".join(METRIC_VERDICTS)
        )
    return data


def _numbers(where: str, key: str, value: object, bad: Any) -> None:
    if not isinstance(value, dict):
        raise bad(where, f"{short(key)} must be an object of metric to number")
    for name, number in value.items():
        if not is_real_number(number):
            raise bad(where, f"{key}[{short(name)}] is not a finite number ({short(number)})")


def load_shards(dirs: Sequence[Path]) -> list[ShardFile]:
    """Read every folder's shard.json and check that they are the parts of one run."""
    shards = [read_shard(folder) for folder in dirs]
    if not shards:
        raise ShardError("no shard folders given; usage: python -m pytest_npubench merge DIR...")
    first = shards[0]
    for other in shards[1:]:
        for what, mine, theirs in (
            ("commit", other.commit, first.commit),
            ("topology", dict(other.fingerprints), dict(first.fingerprints)),
            ("command", list(other.args), list(first.args)),
            ("--regen-baselines", other.regen, first.regen),
        ):
            if mine != theirs:
                raise ShardError(
                    f"{other.path}: its {what} ({short(mine, 200)}) differs from that of "
                    f"{first.path} ({short(theirs, 200)}); merge shards of one run only"
                )
    seen: dict[int, Path] = {}
    for shard in shards:
        if shard.count != first.count:
            raise ShardError(
                f"{shard.path}: shard {shard.index}/{shard.count} is not one of {first.count} "
                f"like {first.path}; merge shards of one split only"
            )
        if shard.index in seen:
            raise ShardError(
                f"{shard.path}: shard {shard.index}/{shard.count} is also in {seen[shard.index]}"
            )
        seen[shard.index] = shard.path
    if len(seen) < first.count:
        missing = []
        for k in range(1, first.count + 1):  # at most len(seen) + 10 steps
            if k not in seen:
                missing.append(str(k))
                if len(missing) == 10:
                    missing.append("...")
                    break
        raise ShardError(
            f"shard(s) {', '.join(missing)} of {first.count} are missing; give every shard folder"
        )
    _no_config_twice(shards)
    return shards


def _no_config_twice(shards: Sequence[ShardFile]) -> None:
    holder: dict[tuple[str, str], Path] = {}
    for shard in shards:
        for bench, payloads in shard.results.items():
            for cid in payloads:
                if (bench, cid) in holder:
                    raise ShardError(
                        f"{shard.path}: {_entry(bench, cid)} is also in {holder[bench, cid]}: "
                        "a config belongs to one part only; re-run the shards"
                    )
                holder[bench, cid] = shard.path
