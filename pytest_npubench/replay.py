"""The merge's replay: what the shards measured, checked against the configs the merge collects.

``python -m pytest_npubench merge`` runs pytest in its own process with a :class:`MergeReplay`
plugin (no child process, no temp file). After -k/-m, the plugin re-derives each part from the
same deterministic split the shards used (:func:`~pytest_npubench.shard.partition`) and
refuses, before any config runs or any file is written: a config a part misses or holds
without owning it, a bench or topology other than the shards', a payload that is not a valid
result of the bench (its metrics), and a re-simulated sample that differs from what the shard
says. Then each item takes its measurement from :meth:`MergeReplay.payloads`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_npubench.bench import Result, ResultError
from pytest_npubench.inputs import InputError, loads, read_text, short
from pytest_npubench.item import BenchItem
from pytest_npubench.shard import MAX_SHARD_BYTES, partition
from pytest_npubench.shard_load import ShardFile, check_payload
from pytest_npubench.shard_select import _cost

PLUGIN_NAME = "npubench-merge"
#: Configs per shard the merge runs again and compares with the shard (``--recheck``).
DEFAULT_RECHECK = 2


class MergeReplay:
    """The plugin ``merge`` hands to :func:`pytest.main`; see the module docstring."""

    def __init__(
        self,
        shards: Sequence[ShardFile],
        recheck: int | None = DEFAULT_RECHECK,
        invocation: str | None = None,
    ) -> None:
        self.shards = list(shards)
        self.recheck = recheck  # None: every config
        self.invocation = invocation  # the merge's command line, for results.json
        self.payloads: dict[str, dict[str, str]] = {}
        for shard in self.shards:
            for bench, payloads in shard.results.items():
                self.payloads.setdefault(bench, {}).update(payloads)
        self.rechecked = 0
        self.__name__ = PLUGIN_NAME  # the name pluggy registers it under

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """Refuse (a UsageError: nothing has run, nothing is written) unless the shards hold
        exactly the measured configs of this selection, each in its own part."""
        state = config.pluginmanager.get_plugin("npubench-session")
        benches = {b.name: b for b in state.benches} if state is not None else {}
        bench_items = [i for i in items if isinstance(i, BenchItem)]
        self._check_benches(benches)
        owner = partition([(i.nodeid, _cost(i)) for i in bench_items], self.shards[0].count)
        by_index = {s.index: s for s in self.shards}
        expected: dict[int, dict[tuple[str, str], BenchItem]] = {s.index: {} for s in self.shards}
        for item, part in zip(bench_items, owner, strict=True):
            expected[part + 1][item.bench.name, item.bench_config.config_id] = item
        for index, shard in by_index.items():
            self._check_part(shard, expected[index], expected)
        for shard in self.shards:
            self._recheck(shard, list(expected[shard.index].values()))

    def _check_benches(self, benches: Mapping[str, Any]) -> None:
        shard = self.shards[0]
        if sorted(shard.fingerprints) != sorted(benches):
            raise pytest.UsageError(
                f"npubench merge: {shard.path}: the shards measured the benches "
                f"{sorted(shard.fingerprints)}, this selection has {sorted(benches)}; "
                "merge from the checkout the shards ran on"
            )
        for name, bench in benches.items():
            try:
                here = bench.fingerprint()
            except Exception:
                here = None  # what a shard records when fingerprint() raises
            if here != shard.fingerprints[name]:
                raise pytest.UsageError(
                    f"npubench merge: {shard.path}: bench {name!r} was measured on "
                    f"{shard.fingerprints[name]!r}, this checkout gives {here!r}; merge with "
                    "the topology the shards ran on"
                )

    def _check_part(
        self,
        shard: ShardFile,
        mine: Mapping[tuple[str, str], BenchItem],
        parts: Mapping[int, Mapping[tuple[str, str], BenchItem]],
    ) -> None:
        held = {(b, cid) for b, payloads in shard.results.items() for cid in payloads}
        for key in sorted(held - set(mine)):
            owner = next((k for k, part in parts.items() if key in part), None)
            why = (
                f"it belongs to part {owner}/{shard.count}"
                if owner is not None
                else "it is not a config of this selection"
            )
            raise pytest.UsageError(f"npubench merge: {shard.path}: {_entry(*key)}: {why}")
        for key in sorted(set(mine) - held):
            raise pytest.UsageError(
                f"npubench merge: {shard.path}: misses {_entry(*key)}, which the split gives "
                f"to part {shard.index}/{shard.count}; re-run that shard to the end"
            )
        for key, item in mine.items():
            self._check_payload(shard, item, shard.parsed[key[0]][key[1]])

    def _check_payload(self, shard: ShardFile, item: BenchItem, data: Mapping[str, Any]) -> None:
        where = (
            f"npubench merge: {shard.path}: {_entry(item.bench.name, item.bench_config.config_id)}"
        )
        reused = bool(item.reuse)
        if (data["source"] == "baseline") != reused:
            expect = "reused from the baseline" if reused else "measured"
            raise pytest.UsageError(f"{where}: 'source' is {data['source']!r}, it must be {expect}")
        if reused or data["verdict"] == "error":
            return
        raw = Result(metrics=data["metrics"], ok=data["verdict"] != "failed-check")
        try:
            item.bench.check_result(item.bench_config.config_id, raw)
        except ResultError as exc:
            raise pytest.UsageError(f"{where}: not a result of the bench: {exc}") from None

    def _recheck(self, shard: ShardFile, items: list[BenchItem]) -> None:
        """Run a random sample of the shard's measured configs here and compare: the simulator
        is deterministic, so an honest shard always agrees, and an edit made with a recomputed
        digest is caught when the sample holds it."""
        measured = [i for i in items if not i.reuse]
        picked = (
            measured
            if self.recheck is None or self.recheck >= len(measured)
            else random.SystemRandom().sample(measured, self.recheck)
        )
        for item in picked:
            self.rechecked += 1
            cid = item.bench_config.config_id
            data = shard.parsed[item.bench.name][cid]
            difference = _difference(item, data)
            if difference:
                raise pytest.UsageError(
                    f"npubench merge: {shard.path}: {_entry(item.bench.name, cid)}: re-simulated "
                    f"here, {difference}: the shard was edited, or measured on other code; "
                    "re-run the shards from this checkout"
                )

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """What the merge checked, so a log shows it."""
        terminalreporter.write_line(
            f"npubench merge: {len(self.shards)} shard(s) accepted (digest, command, parts, "
            f"payloads); {self.rechecked} config(s) re-simulated, each as its shard says"
        )


def _difference(item: BenchItem, data: Mapping[str, Any]) -> str:
    """'' if running the config here gives what the shard recorded, else what differs."""
    bench, cid = item.bench, item.bench_config.config_id
    try:
        raw = bench.run(dict(item.bench_config.params))
        metrics = bench.check_result(cid, raw)
    except Exception as exc:
        if data["verdict"] == "error" and data["message"] == repr(exc):
            return ""
        return f"it raises {short(repr(exc), 200)}; the shard says {data['verdict']}"
    if data["verdict"] == "error":
        return f"it runs; the shard says it raised {short(data['message'], 200)}"
    for name in sorted(set(metrics) | set(data["metrics"])):
        mine, theirs = metrics.get(name), data["metrics"].get(name)
        if mine != theirs:
            return f"{name} is {mine!r}; the shard says {theirs!r}"
    if bool(raw.ok) != (data["verdict"] != "failed-check"):
        return f"its functional check {'passes' if raw.ok else 'fails'}; the shard says otherwise"
    if str(raw.message) != data["message"]:
        return f"its message is {short(str(raw.message))}; the shard says {short(data['message'])}"
    return ""


def _entry(bench: str, cid: str) -> str:
    return f"{bench}[{cid}]"


def load_replay(config: pytest.Config) -> dict[str, dict[str, str]] | None:
    """The payloads to replay: the merge's (its plugin), else ``--npubench-replay FILE``
    (read as data, like a shard), else None (a normal run)."""
    merge = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if isinstance(merge, MergeReplay):
        return merge.payloads
    path = config.option.npubench_replay
    if path is None:
        return None
    try:
        text = read_text(Path(path), MAX_SHARD_BYTES)
        data = loads(text or "", "replay file")
    except (InputError, OSError) as exc:
        raise pytest.UsageError(f"--npubench-replay {path}: cannot be read ({exc})") from None
    if not isinstance(data, dict) or not all(isinstance(p, dict) for p in data.values()):
        raise pytest.UsageError(f"--npubench-replay {path}: not a replay file of merged shards")

    def bad(entry: str, problem: str) -> pytest.UsageError:
        return pytest.UsageError(f"--npubench-replay {path}: {entry}: {problem}")

    for bench, payloads in data.items():
        for cid, payload in payloads.items():
            if not isinstance(payload, str):
                raise bad(_entry(bench, cid), "must be a result string")
            check_payload(bench, cid, payload, bad)
    return data
