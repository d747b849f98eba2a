"""Fuzz: hostile baseline files (issue 13). Every mutant of a real baseline either loads or is
one BaselineError, within 10 s; under a -k regen, the file is untouched or a superset of its
readable entries. The mutants are table-driven and seeded: the same ones every run."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from fuzz_guard import time_limit
from toyproject import Project, assert_no_plugin_traceback

from pytest_npubench.baseline import BaselineError, load

SEED_FILE = Path(__file__).parents[2] / "baselines" / "gemm.json"

HOSTILE_VALUES: list[str] = [
    '"123"', "NaN", "Infinity", "-Infinity", "true", "false", "null", "[]", "{}", "[1]",
    '{"a": 1}', "1" + "0" * 400, "7" * 5000, "1e400", "-1e400", "-1", "0", "1e-400",
    '"\\u0000"', '"' + "x" * 100_000 + '"', "[" * 2000 + "]" * 2000,
]  # fmt: skip

Mutant = Callable[[str, random.Random], str | bytes]


def _entry_value(text: str, rng: random.Random, raw: str) -> str:
    data = json.loads(text)
    cid = rng.choice(sorted(data["configs"]))
    metric = rng.choice(sorted(data["configs"][cid]["metrics"]))
    data["configs"][cid]["metrics"][metric] = "@@MUTANT@@"
    return json.dumps(data, indent=2, sort_keys=True).replace('"@@MUTANT@@"', raw)


def _field(text: str, key: str, raw: str | None) -> str:
    data = json.loads(text)
    if raw is None:
        data.pop(key, None)
        return json.dumps(data)
    data[key] = "@@MUTANT@@"
    return json.dumps(data).replace('"@@MUTANT@@"', raw)


def mutants() -> list[tuple[str, Mutant]]:
    """At least 200 named mutants: values, fields, entries, text damage, bytes."""
    out: list[tuple[str, Mutant]] = []
    for i, raw in enumerate(HOSTILE_VALUES):
        for rep in range(4):
            out.append((f"metric-{i}-{rep}", lambda t, r, raw=raw: _entry_value(t, r, raw)))
    for key in ("schema", "configs", "bench", "meta", "fingerprint", "topology"):
        out.append((f"drop-{key}", lambda t, r, key=key: _field(t, key, None)))
        for j, raw in enumerate(['"1"', "1", "[]", "{}", "null", "true", "99", '"x"']):
            out.append((f"{key}-{j}", lambda t, r, key=key, raw=raw: _field(t, key, raw)))
    entry_damage = ["null", "[]", '{"params": {}}', '{"metrics": []}', '{"metrics": null}', "7"]
    for j, raw in enumerate(entry_damage):

        def damage(t: str, r: random.Random, raw: str = raw) -> str:
            data = json.loads(t)
            data["configs"][r.choice(sorted(data["configs"]))] = "@@E@@"
            return json.dumps(data).replace('"@@E@@"', raw)

        out.append((f"entry-{j}", damage))
    for n in range(30):
        out.append((f"truncate-{n}", lambda t, r: t[: r.randrange(len(t))]))
    for n in range(20):

        def flip(t: str, r: random.Random) -> bytes:
            data = bytearray(t.encode())
            for _ in range(r.randrange(1, 8)):
                data[r.randrange(len(data))] = r.randrange(256)
            return bytes(data)

        out.append((f"bytes-{n}", flip))
    for n in range(10):

        def duplicate(t: str, r: random.Random) -> str:
            lines = t.splitlines()
            i = r.randrange(1, len(lines) - 1)
            return "\n".join(
                [
                    *lines[: i + 1],
                    lines[i] if lines[i].rstrip().endswith(",") else lines[i] + ",",
                    *lines[i + 1 :],
                ]
            )

        out.append((f"duplicate-line-{n}", duplicate))
    out += [
        ("empty", lambda t, r: ""),
        ("bom", lambda t, r: "\ufeff" + t),
        ("utf16", lambda t, r: t.encode("utf-16")),
        ("latin1", lambda t, r: t.replace("}", "\u00e9}", 1).encode("latin-1")),
        ("nested-200k", lambda t, r: "[" * 200_000),
        ("top-list", lambda t, r: "[" + t + "]"),
        ("two-docs", lambda t, r: t + t),
    ]
    return out


MUTANTS = mutants()


def write_mutant(path: Path, content: str | bytes) -> None:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", errors="surrogatepass")


def test_the_catalogue_has_at_least_200_mutants() -> None:
    """The suite is as large as the issue asks (counted, so a refactor cannot shrink it)."""
    assert len(MUTANTS) >= 200, len(MUTANTS)
    assert len({name for name, _ in MUTANTS}) == len(MUTANTS)


def test_every_mutant_loads_or_is_one_baseline_error(tmp_path: Path) -> None:
    """Each of the mutants of the committed gemm baseline is read within 10 s and ends as a
    BaselineFile or a BaselineError whose message names the file; never another exception."""
    seed = SEED_FILE.read_text(encoding="utf-8")
    outcomes = {"loaded": 0, "refused": 0}
    for n, (name, mutate) in enumerate(MUTANTS):
        rng = random.Random(n)
        path = tmp_path / f"{n}.json"
        write_mutant(path, mutate(seed, rng))
        with time_limit():
            try:
                load(path, "gemm")
                outcomes["loaded"] += 1
            except BaselineError as exc:
                assert str(path) in str(exc) and len(str(exc)) < 1000, (name, str(exc)[:300])
                outcomes["refused"] += 1
    assert outcomes["refused"] >= 150, outcomes  # most mutants are damage, and are caught


REGEN_SAMPLE = MUTANTS[::6]


@pytest.fixture
def toy_baseline(project: Project) -> str:
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    return project.read("baselines/toy.json")


def test_regen_under_mutants_never_loses_a_readable_entry(
    project: Project, toy_baseline: str
) -> None:
    """For a sample of the mutants applied to a toy baseline, a `-k` regen either leaves the
    file byte for byte or writes a file holding every entry it could read, and prints no
    traceback of the plugin."""
    path = project.path / "baselines" / "toy.json"
    for n, (name, mutate) in enumerate(REGEN_SAMPLE):
        write_mutant(path, mutate(toy_baseline, random.Random(n)))
        before = path.read_bytes()
        try:
            readable = set(load(path, "toy").entries)  # type: ignore[union-attr]
        except BaselineError:
            readable = None
        with time_limit():
            result = project.run("--npubench", "toy", "--regen-baselines", "-k", "16-fast")
        assert_no_plugin_traceback(result)
        after = path.read_bytes()
        if readable is None:
            assert after == before, name
        else:
            assert readable | {"16-fast"} <= set(json.loads(after)["configs"]), name
