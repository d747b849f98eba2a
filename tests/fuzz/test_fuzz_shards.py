"""Fuzz: tampered shards (issue 22). Two real shards of a regen of the toy project are made
once (subprocess runs of the plugin); each case mutates a copy of them (values, ids, parts,
commits, types, nesting, sizes, commands, payloads), usually with the digest recomputed as a
careful forger would, and the merge must refuse it with one project message naming the shard
file, and write nothing: the baselines stay byte for byte, no artifact folder appears.

Cases the merge refuses while reading the files run ``merge()`` in this process (fast); cases
it refuses after collecting the benches (parts re-derived from the split, payloads against the
bench, the re-simulated sample) run ``python -m pytest_npubench merge``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fuzz_guard import time_limit
from shardproject import baselines, copy_of, make_sharded, merge, shard_data, write_shard

from pytest_npubench import __main__ as cli
from pytest_npubench.shard import MAX_SHARD_BYTES

Mutation = Callable[[Path], None]
RAW_ERRORS = ("Traceback", "TypeError", "KeyError", "AttributeError", "RecursionError")


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sharded(tmp_path_factory.mktemp("sharded"))


# -- mutations ----------------------------------------------------------------------------------


def text(k: int, content: str | bytes) -> Mutation:
    def mutate(project: Path) -> None:
        path = project / f"s{k}" / "shard.json"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")

    return mutate


def edit(k: int, change: Callable[[dict[str, Any]], Any], *, resign: bool = True) -> Mutation:
    """Change shard k's parsed document in place, then write it (digest recomputed)."""

    def mutate(project: Path) -> None:
        data = shard_data(project, k)
        change(data)
        write_shard(project, k, data, resign=resign)

    return mutate


def setkey(key: str, value: Any, k: int = 1, resign: bool = True) -> Mutation:
    return edit(k, lambda d: d.__setitem__(key, value), resign=resign)


def delkey(key: str) -> Mutation:
    return edit(1, lambda d: d.pop(key), resign=False)


def first(data: dict[str, Any], bench: str = "toy") -> str:
    return sorted(data["results"][bench])[0]


def payload(change: Callable[[dict[str, Any]], Any], k: int = 1) -> Mutation:
    """Change the parsed payload of shard k's first toy config."""

    def on(data: dict[str, Any]) -> None:
        cid = first(data)
        parsed = json.loads(data["results"]["toy"][cid])
        replaced = change(parsed)
        data["results"]["toy"][cid] = json.dumps(parsed) if replaced is None else replaced

    return edit(k, on)


def sparse(size: int) -> Mutation:
    def mutate(project: Path) -> None:
        with (project / "s1" / "shard.json").open("r+b") as handle:
            handle.truncate(size)

    return mutate


def replace_path(kind: str) -> Mutation:
    def mutate(project: Path) -> None:
        path = project / "s1" / "shard.json"
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "dir":
            path.mkdir()
        elif kind == "device":
            path.symlink_to("/dev/zero")
        elif kind == "dangling":
            path.symlink_to(project / "nowhere.json")

    return mutate


def add_args(*extra: str) -> Mutation:
    """Both shards record the same extra arguments (so only the allow-list can refuse)."""

    def mutate(project: Path) -> None:
        for k in (1, 2):
            data = shard_data(project, k)
            data["args"] = [*data["args"], *extra]
            write_shard(project, k, data)

    return mutate


def both(change: Callable[[dict[str, Any]], Any]) -> Mutation:
    def mutate(project: Path) -> None:
        for k in (1, 2):
            edit(k, change)(project)

    return mutate


def move_first_config(project: Path) -> None:
    """s2's first toy config moves into s1 (both digests recomputed)."""
    s1, s2 = shard_data(project, 1), shard_data(project, 2)
    cid = first(s2)
    s1["results"]["toy"][cid] = s2["results"]["toy"].pop(cid)
    write_shard(project, 1, s1)
    write_shard(project, 2, s2)


def copy_first_config(project: Path) -> None:
    """s2's first toy config also in s1."""
    s1, s2 = shard_data(project, 1), shard_data(project, 2)
    cid = first(s2)
    s1["results"]["toy"][cid] = s2["results"]["toy"][cid]
    write_shard(project, 1, s1)


def invent_config(data: dict[str, Any]) -> None:
    cid = first(data)
    parsed = json.loads(data["results"]["toy"][cid])
    parsed["config_id"] = "64-fast"
    data["results"]["toy"]["64-fast"] = json.dumps(parsed)


def latency(value: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda p: p["metrics"].__setitem__("latency_ns", value)


def rename_util(parsed: dict[str, Any]) -> None:
    parsed["metrics"]["utilisation"] = parsed["metrics"].pop("util")


def drop_first(data: dict[str, Any]) -> None:
    del data["results"]["toy"][first(data)]


def _truncate(project: Path) -> None:
    path = project / "s1" / "shard.json"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _edit_without_digest(project: Path) -> None:
    """The issue's case: latency_ns set to 1.0 in the file, nothing else changed."""
    data = shard_data(project, 1)
    cid = first(data)
    parsed = json.loads(data["results"]["toy"][cid])
    parsed["metrics"]["latency_ns"] = 1.0
    data["results"]["toy"][cid] = json.dumps(parsed)
    write_shard(project, 1, data, resign=False)


DEEP = "[" * 100_000 + "]" * 100_000
#: Refused while the files are read: (id, mutation, part of the message)
READ_TIME: list[tuple[str, Mutation, str]] = [
    # sizes, encodings, file kinds, JSON damage
    ("empty", text(1, ""), "is not valid JSON"),
    ("truncated", _truncate, "is not valid JSON"),
    ("latin1", text(1, b'{"schema": 2, "args": ["caf\xe9"]}'), "is not UTF-8 text"),
    ("utf16", text(1, '{"schema": 2}'.encode("utf-16")), "is not UTF-8 text"),
    ("binary", text(1, bytes(range(256))), "is not UTF-8 text"),
    ("deep-nesting", text(1, DEEP), "is nested too deeply to be a shard file"),
    ("over-64MiB", sparse(MAX_SHARD_BYTES + 1), "over the 64.0 MiB limit"),
    ("300MB-junk", sparse(300 * 10**6), "is 286.1 MiB, over the 64.0 MiB limit"),
    ("fifo", replace_path("fifo"), "is a FIFO, not a regular file"),
    ("directory", replace_path("dir"), "cannot be read (IsADirectoryError"),
    ("device", replace_path("device"), "is a device, not a regular file"),
    ("dangling-link", replace_path("dangling"), "not a shard (no such file)"),
    ("top-list", text(1, "[]"), "not a shard file (a JSON object at the top level)"),
    ("top-string", text(1, '"shard"'), "not a shard file"),
    ("duplicate-key", text(1, '{"schema": 2, "schema": 2}'), "has the key 'schema' twice"),
    ("huge-number", text(1, '{"schema": ' + "9" * 5000 + "}"), "holds a number of 5000"),
    # schema and keys
    ("schema-1", setkey("schema", 1), "'schema': is 1; this pytest-npubench merges"),
    ("schema-str", setkey("schema", "2"), "'schema': is '2'"),
    ("schema-missing", delkey("schema"), "'schema': is None"),
    ("no-commit", delkey("commit"), "has no 'commit'"),
    ("no-results", delkey("results"), "has no 'results'"),
    ("no-digest", delkey("digest"), "has no 'digest'"),
    ("no-shard", delkey("shard"), "has no 'shard'"),
    ("extra-key", setkey("run_this", "rm -rf /"), "has an unknown key 'run_this'"),
    # types of every field
    ("shard-int", setkey("shard", 5), "'shard': must be [K, N]"),
    ("shard-zero", setkey("shard", [0, 1]), "'shard': must be [K, N]"),
    ("shard-short", setkey("shard", [1]), "'shard': must be [K, N]"),
    ("shard-bool", setkey("shard", [True, 2]), "'shard': must be [K, N]"),
    ("shard-k-over-n", setkey("shard", [3, 2]), "'shard': must be [K, N]"),
    ("shard-huge-n", setkey("shard", [1, 10**20]), "'shard': must be [K, N]"),
    ("shard-float", setkey("shard", [1.0, 2]), "'shard': must be [K, N]"),
    ("args-string", setkey("args", "--npubench all"), "'args': must be a list of strings"),
    ("args-int", setkey("args", [1]), "'args': must be a list of strings"),
    ("commit-int", setkey("commit", 5), "'commit': must be a string or null"),
    ("regen-str", setkey("regen", "yes"), "'regen': must be true or false"),
    ("fingerprints-list", setkey("fingerprints", []), "'fingerprints': must be an object"),
    ("fingerprint-int", setkey("fingerprints", {"toy": 5, "other": "x"}), "must be a string"),
    ("results-list", setkey("results", []), "'results': must be an object"),
    ("results-bench-list", setkey("results", {"toy": [], "other": {}}), "of config id"),
    ("result-int", edit(1, lambda d: d["results"]["toy"].update(x=5)), "must be a result string"),
    ("results-no-bench", edit(1, lambda d: d["results"].pop("other")), "every bench"),
    ("digest-int", setkey("digest", 5, resign=False), "'digest': must be a string"),
    # the digest: edits made without recomputing it
    ("digest-zero", setkey("digest", "sha256:00", resign=False), "'digest': does not match"),
    ("value-edited", _edit_without_digest, "'digest': does not match the content: the file"),
    ("commit-edited", setkey("commit", "0" * 40, resign=False), "'digest': does not match"),
    ("regen-edited", setkey("regen", False, resign=False), "'digest': does not match"),
    ("args-edited", setkey("args", ["--npubench", "toy"], resign=False), "does not match"),
    # the command: code, ini values and paths are refused by name
    ("p-module", add_args("-p", "evil"), "'-p' 'evil': imports the plugin module"),
    ("p-joined", add_args("-pevil"), "'-p' 'evil': imports the plugin module"),
    ("o-ini", add_args("-o", "npubench_baselines=/tmp/x"), "'-o': overrides an ini value"),
    ("override-ini", add_args("--override-ini=x=1"), "'--override-ini': overrides an ini"),
    ("junitxml", add_args("--junitxml=/tmp/x.xml"), "'--junitxml': writes a file where"),
    ("artifacts", add_args("--npubench-artifacts=/tmp/a"), "'--npubench-artifacts': writes"),
    ("config-file", add_args("-c", "other.ini"), "'-c': chooses the ini file"),
    ("rootdir", add_args("--rootdir=/"), "'--rootdir': chooses the project root"),
    ("confcutdir", add_args("--confcutdir=/"), "'--confcutdir': chooses which conftest.py"),
    ("warning-class", add_args("-W", "error::evil.Warn"), "'-W': imports the module"),
    ("path-arg", add_args("evil_folder"), "'evil_folder' is a path or a test name"),
    ("replay", add_args("--npubench-replay=x.json"), "'--npubench-replay'"),
    ("xdist", add_args("-n", "2"), "'-n': starts worker processes"),
    ("remote-tx", add_args("--tx", "ssh=evil"), "'--tx': starts worker processes"),
    ("pdbcls", add_args("--pdbcls=evil:Dbg"), "'--pdbcls': imports the debugger class"),
    ("pyargs", add_args("--pyargs"), "'--pyargs': imports modules by name"),
    ("unknown-option", add_args("--cov=evil"), "'--cov': is not on the allow-list"),
    ("k-swallows-option", add_args("-k", "--junitxml=/tmp/x"), "'-k' has no value"),
    ("bench-name-junk", add_args("--npubench", "../x"), "'--npubench' '../x'"),
    ("args-no-bench", both(lambda d: d.__setitem__("args", ["-q"])), "selects no bench"),
    ("args-empty", both(lambda d: d.__setitem__("args", [])), "selects no bench"),
    # payloads (digest recomputed)
    ("payload-not-json", payload(lambda p: "{not json"), "is not valid JSON"),
    ("payload-list", payload(lambda p: "[]"), "must be an object with the keys"),
    ("payload-deep", payload(lambda p: DEEP), "is nested too deeply to be a result"),
    (
        "payload-no-metrics",
        payload(lambda p: p.__delitem__("metrics")),
        "must be an object with the",
    ),
    ("payload-other-bench", payload(lambda p: p.__setitem__("bench", "other")), "is the result"),
    ("payload-other-id", payload(lambda p: p.__setitem__("config_id", "x")), "is the result of"),
    ("metric-string", payload(latency("1.0")), "metrics['latency_ns'] is not a finite number"),
    ("metric-nan", payload(latency(float("nan"))), "is not a finite number (nan)"),
    ("metric-inf", payload(latency(float("inf"))), "is not a finite number (inf)"),
    ("metric-bool", payload(latency(True)), "is not a finite number (True)"),
    ("metric-null", payload(latency(None)), "is not a finite number (None)"),
    ("metrics-list", payload(lambda p: p.__setitem__("metrics", [])), "must be an object of"),
    ("verdict-junk", payload(lambda p: p.__setitem__("verdict", "great")), "'verdict' 'great'"),
    ("source-junk", payload(lambda p: p.__setitem__("source", "x")), "'source' must be"),
    ("message-int", payload(lambda p: p.__setitem__("message", 5)), "'message' must be"),
    ("changes-junk", payload(lambda p: p.__setitem__("changes", {"a": "b"})), "'changes'"),
    ("comparisons-junk", payload(lambda p: p.__setitem__("comparisons", {"a": 1})), "'compar"),
    # shards that do not fit together (digests recomputed)
    ("other-commit", setkey("commit", "f" * 40), "its commit (None) differs from that of"),
    ("other-topology", setkey("fingerprints", {"toy": "hw:9", "other": "toy-hw:1"}), "topology"),
    ("other-command", setkey("args", ["-q", "--npubench", "all"]), "its command"),
    ("other-regen", setkey("regen", False), "its --regen-baselines (True) differs"),
    ("part-twice", setkey("shard", [2, 2]), "shard 2/2 is also in"),
    ("one-of-one-twice", both(lambda d: d.__setitem__("shard", [1, 1])), "shard 1/1 is also in"),
    ("other-split", setkey("shard", [1, 3]), "is not one of 3 like"),
    ("config-in-two-shards", copy_first_config, "is also in"),
]
#: Refused once the merge has collected the benches (subprocess runs)
COLLECT_TIME: list[tuple[str, Mutation, str]] = [
    ("config-moved", move_first_config, "belongs to part 2/2"),
    ("config-dropped", edit(1, drop_first), "misses toy["),
    ("config-invented", edit(1, invent_config), "toy[64-fast]: it is not a config of this"),
    ("metric-renamed", payload(rename_util), "not a result of the bench"),
    ("source-baseline", payload(lambda p: p.__setitem__("source", "baseline")), "'source' is"),
    ("topology-both", both(lambda d: d["fingerprints"].__setitem__("toy", "hw:9")), "measured on"),
    ("value-resigned", payload(latency(1.0)), "re-simulated here, latency_ns is"),
    ("verdict-failed", payload(lambda p: p.__setitem__("verdict", "failed-check")), "check"),
]


def assert_refused(project: Path, before: dict[str, bytes], out: str, message: str) -> None:
    assert "npubench merge: " in out, out
    assert "shard.json" in out, out  # names the shard file
    assert message in out, out
    assert not any(raw in out for raw in RAW_ERRORS), out
    assert baselines(project) == before
    assert not (project / "npubench-artifacts").exists()


@pytest.mark.parametrize(
    ("mutate", "message"), [c[1:] for c in READ_TIME], ids=[c[0] for c in READ_TIME]
)
def test_a_tampered_shard_is_refused_while_read_and_nothing_is_written(
    made: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    mutate: Mutation,
    message: str,
) -> None:
    project = copy_of(made, tmp_path / "p")
    before = baselines(project)
    mutate(project)
    monkeypatch.chdir(project)
    with time_limit(10):
        code = cli.merge(["merge", "s1", "s2", "--regen-baselines"])
    captured = capsys.readouterr()
    assert code == pytest.ExitCode.USAGE_ERROR
    assert_refused(project, before, captured.out + captured.err, message)


@pytest.mark.parametrize(
    ("mutate", "message"), [c[1:] for c in COLLECT_TIME], ids=[c[0] for c in COLLECT_TIME]
)
def test_a_tampered_shard_is_refused_before_any_config_runs_and_nothing_is_written(
    made: Path, tmp_path: Path, mutate: Mutation, message: str
) -> None:
    """Digests recomputed, so only the merge's own re-derivation (the split, the bench's
    metrics, the topology, the re-simulated sample: every config, with --recheck all) refuses."""
    project = copy_of(made, tmp_path / "p")
    before = baselines(project)
    mutate(project)
    done = merge(project, "--recheck", "all")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert_refused(project, before, done.stdout + done.stderr, message)


def test_the_suite_holds_at_least_fifty_mutations() -> None:
    """The issue asks for >= 50 tampered shards; ids are unique."""
    ids = [c[0] for c in READ_TIME + COLLECT_TIME]
    assert len(ids) >= 50 and len(set(ids)) == len(ids)


def test_the_untampered_shards_merge(made: Path, tmp_path: Path) -> None:
    """The control: the same copies, unmutated, merge and write the baselines."""
    project = copy_of(made, tmp_path / "p")
    before = baselines(project)
    done = merge(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert baselines(project) != before
    assert (project / "npubench-artifacts" / "results.json").is_file()
